//! Servers that need TCP: a Redis Cluster (its nodes and their bus talk TCP only) and a primary
//! with a replica watched by Redis Sentinel. Every server listens on `127.0.0.1` only, on ports
//! the operating system handed out as free a moment before; a server that could not bind its
//! port (another test took it in between) is started again on others, and a server is used only
//! once `INFO server` on its port names the process started here, so parallel runs never share
//! one.

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{STARTED, command_calls, info_field, resp_query, tools_found};

/// How many times a server is started again on other ports before the test fails.
const BIND_ATTEMPTS: usize = 20;

/// A port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// One command to `127.0.0.1:port` over a fresh connection (1 s timeouts).
fn query_port(port: u16, args: &[&str]) -> std::io::Result<String> {
    let stream = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(1),
    )?;
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    stream.set_write_timeout(Some(Duration::from_secs(1)))?;
    resp_query(stream, args)
}

/// Polls `done` every 20 ms for at most `limit`.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// Whether `openssl` can be run (for [`RedisTcpServer::start_tls`]); under `CI=true` a missing
/// one fails the test.
fn openssl_found() -> bool {
    let found = Command::new("openssl")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "openssl is not installed, and CI=true: install it (apt-get install -y openssl); .ci/run does"
        );
        eprintln!(
            "SKIPPED: openssl is not installed (the TLS test makes its certificates with it)"
        );
    }
    found
}

/// One `redis-server` on a loopback port, in a folder of its own.
#[derive(Debug)]
struct TcpNode {
    port: u16,
    child: Option<Child>,
}

impl TcpNode {
    /// Starts `redis-server` with `args(port)` in `dir`, on fresh ports until one binds.
    fn start(dir: &Path, args: &dyn Fn(u16) -> Vec<String>) -> Self {
        for _ in 0..BIND_ATTEMPTS {
            let port = free_port();
            let mut child = Command::new("redis-server")
                .args(args(port))
                .current_dir(dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-server");
            let pid = child.id().to_string();
            let started = Instant::now();
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    // Most likely the port was taken between `free_port` and the bind.
                    break;
                }
                if let Ok(info) = query_port(port, &["INFO", "server"]) {
                    if info_field(&info, "process_id").as_deref() == Some(pid.as_str()) {
                        return Self {
                            port,
                            child: Some(child),
                        };
                    }
                    // Someone else's server answers there: ours cannot have bound it.
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                if started.elapsed() > Duration::from_secs(10) {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("redis-server did not answer on port {port} within 10 s");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        panic!("redis-server could not bind a free loopback port in {BIND_ATTEMPTS} attempts");
    }

    fn query(&self, args: &[&str]) -> std::io::Result<String> {
        query_port(self.port, args)
    }

    fn is_running(&self) -> bool {
        self.child.is_some()
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for TcpNode {
    fn drop(&mut self) {
        self.kill();
    }
}

fn folder(label: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(label)
        .tempdir()
        .expect("a temporary folder for the servers")
}

fn unique_id() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        STARTED.fetch_add(1, Ordering::Relaxed)
    )
}

fn sub_folder(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("a folder for one server");
    dir
}

/// What every server here is started with: `port` on loopback only, `dir` as its folder, and no
/// persistence. Each kind of server adds its own arguments after these.
fn node_args(port: u16, dir: &str) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--dir",
        dir,
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A Redis Cluster on loopback: `primaries` primaries (three or more; the slots split evenly by
/// `redis-cli --cluster create`), each with `replicas` replicas that take over when it dies.
/// No persistence; every server is killed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<TcpNode>,
    _dir: tempfile::TempDir,
    id: String,
}

impl RedisCluster {
    /// A running cluster whose every slot is served, or `None` (the caller skips) when
    /// `redis-server` or `redis-cli` is missing outside CI.
    ///
    /// # Panics
    ///
    /// When a tool is missing and `CI=true`, or the cluster does not form within 30 s.
    #[must_use]
    pub fn start(primaries: usize, replicas: usize) -> Option<Self> {
        if !tools_found(&["redis-cli"]) {
            return None;
        }
        let dir = folder("policy-redis-cluster-");
        let total = primaries * (1 + replicas);
        let nodes: Vec<TcpNode> = (0..total)
            .map(|i| {
                let node_dir = sub_folder(dir.path(), &format!("node-{i}"));
                let path = node_dir
                    .to_str()
                    .expect("a UTF-8 temporary path")
                    .to_owned();
                TcpNode::start(&node_dir, &|port| {
                    let bus = free_port();
                    let mut args = node_args(port, &path);
                    args.extend(
                        [
                            "--cluster-port",
                            &bus.to_string(),
                            "--cluster-enabled",
                            "yes",
                            "--cluster-config-file",
                            &format!("{path}/nodes.conf"),
                            // Fast enough to fail over within a test, slow enough that a loaded
                            // machine does not look like a dead node.
                            "--cluster-node-timeout",
                            "2000",
                        ]
                        .map(str::to_owned),
                    );
                    args
                })
            })
            .collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        let status = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run redis-cli --cluster create");
        assert!(status.success(), "redis-cli --cluster create failed");
        let cluster = Self {
            nodes,
            _dir: dir,
            id: unique_id(),
        };
        assert!(
            cluster.wait_until_healthy(Duration::from_secs(30)),
            "the cluster did not form within 30 s"
        );
        Some(cluster)
    }

    /// Every node's URL, `redis://127.0.0.1:<port>`, killed ones included.
    #[must_use]
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect()
    }

    /// A key prefix no other test uses; see [`RedisServer::key_prefix`](crate::RedisServer::key_prefix).
    #[must_use]
    pub fn key_prefix(&self, label: &str) -> String {
        format!("{label}-{}", self.id)
    }

    /// One command to node `node`; see [`RedisServer::query`](crate::RedisServer::query).
    ///
    /// # Errors
    ///
    /// When the node cannot be reached, does not answer in time, or answers with an error.
    pub fn query(&self, node: usize, args: &[&str]) -> std::io::Result<String> {
        self.nodes[node].query(args)
    }

    /// Whether every running node says `cluster_state:ok`, knows every node, and every slot is
    /// served by a running primary.
    #[must_use]
    pub fn is_healthy(&self) -> bool {
        let running: Vec<&TcpNode> = self.nodes.iter().filter(|n| n.is_running()).collect();
        let ok = running.iter().all(|n| {
            n.query(&["CLUSTER", "INFO"])
                .is_ok_and(|info| info_field(&info, "cluster_state").as_deref() == Some("ok"))
        });
        ok && running.iter().all(|n| {
            // Every replica has its primary's data, so it can take over.
            n.query(&["INFO", "replication"]).is_ok_and(|info| {
                info_field(&info, "role").as_deref() != Some("slave")
                    || info_field(&info, "master_link_status").as_deref() == Some("up")
            })
        })
    }

    /// Waits until [`is_healthy`](Self::is_healthy), for at most `limit`.
    #[must_use]
    pub fn wait_until_healthy(&self, limit: Duration) -> bool {
        wait_until(limit, || self.is_healthy())
    }

    /// The node serving `key`'s slot now (a primary), as its index.
    ///
    /// # Panics
    ///
    /// When no running node answers, or none serves the slot.
    #[must_use]
    pub fn primary_for(&self, key: &str) -> usize {
        let node = self
            .nodes
            .iter()
            .find(|n| n.is_running())
            .expect("a running node");
        let slot: u16 = node
            .query(&["CLUSTER", "KEYSLOT", key])
            .expect("CLUSTER KEYSLOT")
            .parse()
            .expect("a slot number");
        let nodes = node.query(&["CLUSTER", "NODES"]).expect("CLUSTER NODES");
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(addr), Some(flags)) = (fields.get(1), fields.get(2)) else {
                continue;
            };
            if !flags.contains("master") || flags.contains("fail") {
                continue;
            }
            let serves = fields.iter().skip(8).any(|range| {
                let (from, to) = range.split_once('-').unwrap_or((range, range));
                matches!((from.parse::<u16>(), to.parse::<u16>()), (Ok(a), Ok(b)) if a <= slot && slot <= b)
            });
            if !serves {
                continue;
            }
            let port: Option<u16> = addr
                .split('@')
                .next()
                .and_then(|hp| hp.rsplit(':').next())
                .and_then(|p| p.parse().ok());
            if let Some(index) = self.nodes.iter().position(|n| Some(n.port) == port) {
                return index;
            }
        }
        panic!("no running primary serves slot {slot}");
    }

    /// Kills node `node` (SIGKILL): its connections drop, and its replica, if it has one,
    /// takes over once the cluster notices (the node timeout, 2 s, and an election).
    pub fn kill(&mut self, node: usize) {
        self.nodes[node].kill();
    }

    /// Calls per command name, summed over the running nodes.
    #[must_use]
    pub fn command_calls(&self) -> BTreeMap<String, u64> {
        let mut total = BTreeMap::new();
        for node in self.nodes.iter().filter(|n| n.is_running()) {
            if let Ok(info) = node.query(&["INFO", "commandstats"]) {
                for (name, calls) in command_calls(&info) {
                    *total.entry(name).or_insert(0) += calls;
                }
            }
        }
        total
    }
}

/// A primary and one replica on loopback, watched by three Redis Sentinels (quorum 2, a primary
/// counts as down after 1 s without answering). No persistence; every server is killed on drop.
#[derive(Debug)]
pub struct RedisSentinel {
    primary: TcpNode,
    replica: TcpNode,
    sentinels: Vec<TcpNode>,
    service: String,
    _dir: tempfile::TempDir,
    id: String,
}

impl RedisSentinel {
    /// The service's name as the sentinels know it.
    pub const SERVICE: &'static str = "policy-primary";

    /// A primary, its replica in sync, and three sentinels that see both and each other; or
    /// `None` (the caller skips) when `redis-server` is missing outside CI.
    ///
    /// # Panics
    ///
    /// When `redis-server` is missing and `CI=true`, or the set-up is not complete within 30 s.
    #[must_use]
    pub fn start() -> Option<Self> {
        if !tools_found(&[]) {
            return None;
        }
        let dir = folder("policy-redis-sentinel-");
        let plain = |name: &str, replica_of: Option<u16>| {
            let node_dir = sub_folder(dir.path(), name);
            let path = node_dir
                .to_str()
                .expect("a UTF-8 temporary path")
                .to_owned();
            TcpNode::start(&node_dir, &|port| {
                let mut args = node_args(port, &path);
                if let Some(primary) = replica_of {
                    args.extend(["--replicaof".to_owned(), "127.0.0.1".to_owned()]);
                    args.push(primary.to_string());
                }
                args
            })
        };
        let primary = plain("primary", None);
        let replica = plain("replica", Some(primary.port));
        let service = Self::SERVICE.to_owned();
        let sentinels: Vec<TcpNode> = (0..3)
            .map(|i| {
                let node_dir = sub_folder(dir.path(), &format!("sentinel-{i}"));
                let conf = node_dir.join("sentinel.conf");
                let conf = conf.to_str().expect("a UTF-8 temporary path").to_owned();
                let path = node_dir
                    .to_str()
                    .expect("a UTF-8 temporary path")
                    .to_owned();
                let primary_port = primary.port;
                let service = service.clone();
                TcpNode::start(&node_dir, &move |port| {
                    // Sentinel rewrites its configuration file: one per start.
                    std::fs::write(
                        &conf,
                        format!(
                            "port {port}\nbind 127.0.0.1\ndir {path}\n\
                             sentinel monitor {service} 127.0.0.1 {primary_port} 2\n\
                             sentinel down-after-milliseconds {service} 1000\n\
                             sentinel failover-timeout {service} 5000\n"
                        ),
                    )
                    .expect("write sentinel.conf");
                    vec![conf.clone(), "--sentinel".to_owned()]
                })
            })
            .collect();
        let setup = Self {
            primary,
            replica,
            sentinels,
            service,
            _dir: dir,
            id: unique_id(),
        };
        let ready = wait_until(Duration::from_secs(30), || {
            let replica_synced = setup
                .replica
                .query(&["INFO", "replication"])
                .is_ok_and(|i| info_field(&i, "master_link_status").as_deref() == Some("up"));
            replica_synced
                && setup.sentinels.iter().all(|s| {
                    s.query(&["INFO", "sentinel"]).is_ok_and(|info| {
                        info.contains("status=ok")
                            && info.contains("slaves=1")
                            && info.contains("sentinels=3")
                    })
                })
        });
        assert!(
            ready,
            "the sentinels did not see the primary, its replica and each other within 30 s"
        );
        Some(setup)
    }

    /// The sentinels' URLs, `redis://127.0.0.1:<port>`.
    #[must_use]
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect()
    }

    /// A key prefix no other test uses; see [`RedisServer::key_prefix`](crate::RedisServer::key_prefix).
    #[must_use]
    pub fn key_prefix(&self, label: &str) -> String {
        format!("{label}-{}", self.id)
    }

    /// The port of the primary the sentinels name now (asked of the first one that answers).
    #[must_use]
    pub fn primary_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let info = s.query(&["INFO", "sentinel"]).ok()?;
            let address = info
                .lines()
                .find(|l| l.contains(&format!("name={}", self.service)))?
                .split(',')
                .find_map(|f| f.strip_prefix("address="))?
                .to_owned();
            address.rsplit(':').next()?.parse().ok()
        })
    }

    /// Kills the primary (SIGKILL). The sentinels promote the replica once they agree it is down.
    pub fn kill_primary(&mut self) {
        self.primary.kill();
    }

    /// Waits until the sentinels name the replica as the primary, and it says it is one.
    #[must_use]
    pub fn wait_for_failover(&self, limit: Duration) -> bool {
        wait_until(limit, || {
            self.primary_port() == Some(self.replica.port)
                && self
                    .replica
                    .query(&["INFO", "replication"])
                    .is_ok_and(|i| info_field(&i, "role").as_deref() == Some("master"))
        })
    }

    /// Calls per command name on the current primary (the replica once it took over).
    #[must_use]
    pub fn command_calls(&self) -> BTreeMap<String, u64> {
        let node = if self.primary.is_running() {
            &self.primary
        } else {
            &self.replica
        };
        node.query(&["INFO", "commandstats"])
            .map(|info| command_calls(&info))
            .unwrap_or_default()
    }
}

/// One standalone `redis-server` on a free loopback TCP port, for what a unix socket would
/// flatter (a fleet's connections as they would cross a network stack). No persistence; killed
/// on drop.
#[derive(Debug)]
pub struct RedisTcpServer {
    node: TcpNode,
    /// With [`start_tls`](Self::start_tls): the TLS port and the CA's certificate (PEM).
    tls: Option<(u16, Vec<u8>)>,
    _dir: tempfile::TempDir,
    id: String,
}

impl RedisTcpServer {
    /// A running server, or `None` (the caller skips) when `redis-server` is missing outside
    /// CI. `extra` are further `redis-server` arguments (`["--maxclients", "20000"]`).
    ///
    /// # Panics
    ///
    /// When `redis-server` is missing and `CI=true`, or it does not start.
    #[must_use]
    pub fn start(extra: &[&str]) -> Option<Self> {
        if !tools_found(&[]) {
            return None;
        }
        let dir = folder("policy-redis-tcp-");
        let path = dir
            .path()
            .to_str()
            .expect("a UTF-8 temporary path")
            .to_owned();
        let node = TcpNode::start(dir.path(), &|port| {
            let mut args = node_args(port, &path);
            args.extend(extra.iter().map(|a| (*a).to_owned()));
            args
        });
        Some(Self {
            node,
            tls: None,
            _dir: dir,
            id: unique_id(),
        })
    }

    /// A running server that also listens with TLS, on a port of its own, with a certificate
    /// for `127.0.0.1` and `localhost` signed by a CA made for it (`openssl`, in its folder);
    /// clients need no certificate. `None` (the caller skips) when `redis-server` or `openssl`
    /// is missing outside CI.
    ///
    /// # Panics
    ///
    /// When a tool is missing and `CI=true`, a certificate cannot be made, or the server does
    /// not start.
    #[must_use]
    pub fn start_tls() -> Option<Self> {
        if !tools_found(&[]) || !openssl_found() {
            return None;
        }
        let dir = folder("policy-redis-tls-");
        let path = dir
            .path()
            .to_str()
            .expect("a UTF-8 temporary path")
            .to_owned();
        let openssl = |args: &[&str]| {
            let status = Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run openssl");
            assert!(status.success(), "openssl {args:?} failed");
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &["-keyout", "ca.key", "-out", "ca.crt", "-days", "2"],
                &[
                    "-subj",
                    "/CN=velocity-policy-testkit CA",
                    "-addext",
                    "basicConstraints=critical,CA:TRUE",
                    "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign",
                ],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    "server.key",
                    "-out",
                    "server.csr",
                    "-subj",
                    "/CN=localhost",
                ],
            ]
            .concat(),
        );
        std::fs::write(
            dir.path().join("server.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write server.ext");
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ]);
        let ca = std::fs::read(dir.path().join("ca.crt")).expect("the CA's certificate");
        let tls_port = std::cell::Cell::new(0);
        let node = TcpNode::start(dir.path(), &|port| {
            let tls = free_port();
            tls_port.set(tls);
            let mut args = node_args(port, &path);
            args.extend(
                [
                    "--tls-port",
                    &tls.to_string(),
                    "--tls-cert-file",
                    &format!("{path}/server.crt"),
                    "--tls-key-file",
                    &format!("{path}/server.key"),
                    "--tls-ca-cert-file",
                    &format!("{path}/ca.crt"),
                    "--tls-auth-clients",
                    "no",
                ]
                .map(str::to_owned),
            );
            args
        });
        Some(Self {
            node,
            tls: Some((tls_port.get(), ca)),
            _dir: dir,
            id: unique_id(),
        })
    }

    /// The TLS URL, `rediss://127.0.0.1:<tls port>`, for a server from
    /// [`start_tls`](Self::start_tls).
    #[must_use]
    pub fn tls_url(&self) -> Option<String> {
        self.tls
            .as_ref()
            .map(|(port, _)| format!("rediss://127.0.0.1:{port}"))
    }

    /// The certificate (PEM) of the CA that signed the server's, for
    /// [`start_tls`](Self::start_tls).
    #[must_use]
    pub fn tls_ca(&self) -> Option<&[u8]> {
        self.tls.as_ref().map(|(_, ca)| ca.as_slice())
    }

    /// The server's URL, `redis://127.0.0.1:<port>`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.node.port)
    }

    /// The server's process id.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.node.child.as_ref().map(Child::id)
    }

    /// A key prefix no other test uses; see [`RedisServer::key_prefix`](crate::RedisServer::key_prefix).
    #[must_use]
    pub fn key_prefix(&self, label: &str) -> String {
        format!("{label}-{}", self.id)
    }

    /// One command; see [`RedisServer::query`](crate::RedisServer::query).
    ///
    /// # Errors
    ///
    /// When the server cannot be reached, does not answer in time, or answers with an error.
    pub fn query(&self, args: &[&str]) -> std::io::Result<String> {
        self.node.query(args)
    }

    /// One numeric field of `INFO <section>` (`used_cpu_user`, `used_memory`, ...).
    #[must_use]
    pub fn info_number(&self, section: &str, field: &str) -> Option<f64> {
        let info = self.node.query(&["INFO", section]).ok()?;
        info_field(&info, field)?.parse().ok()
    }

    /// Calls per command name, from `INFO commandstats`.
    #[must_use]
    pub fn command_calls(&self) -> BTreeMap<String, u64> {
        self.node
            .query(&["INFO", "commandstats"])
            .map(|info| command_calls(&info))
            .unwrap_or_default()
    }
}
