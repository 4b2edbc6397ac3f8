//! A test kit for services that use the `policy` crate, and the test support of its own
//! workspace: a controllable fake dependency (`fake`), a private `redis-server`
//! ([`RedisServer`]) and a loopback HTTP server and client (`http`). Add it to your
//! `[dev-dependencies]` with only the features you use:
//!
//! ```toml
//! [dev-dependencies]
//! velocity-policy-testkit = { version = "0.1", features = ["fake"] }
//! ```
//!
//! [`RedisServer`] starts a private `redis-server` listening only on a unix socket in a
//! temporary folder of its own (no TCP port at all), checks that the server answering there is
//! the process it started (`INFO server`'s `process_id`), and stops it and removes the folder
//! when dropped. Tests running in parallel, several copies of one test binary included, can
//! never reach each other's server, and [`RedisServer::key_prefix`] gives each test a key
//! prefix no other test uses.
//!
//! It speaks just enough of the Redis protocol (RESP) to check that the server is up and to
//! read `INFO`, so a test that uses it does not pull the `redis` crate into a build that would
//! not otherwise have it.
//!
//! Under `CI=true` a missing `redis-server` fails the test (`.ci/run` installs it); elsewhere
//! [`RedisServer::start`] returns `None` after saying on stderr that the test is skipped.
//!
//! ```no_run
//! use velocity_policy_testkit::RedisServer;
//!
//! let Some(server) = RedisServer::start() else {
//!     return; // skipped: redis-server is not installed (and this is not CI)
//! };
//! let url = server.url(); // unix:///tmp/.tmpXXXXXX/redis.sock
//! let prefix = server.key_prefix("payments"); // payments-<unique>
//! assert_eq!(server.query(&["PING"]).unwrap(), "PONG");
//! # let _ = (url, prefix);
//! ```
//!
//! [`browser::Chromium`] runs headless Chromium on a page and returns the DOM its scripts built
//! (for the dashboard's tests).
//!
//! With feature `capacity`, [`capacity::Capacity`] is a dependency that serves so many calls
//! at once and queues the rest, for the adaptive bulkhead's tests and scenario.
//!
//! With feature `http`, `http` serves an axum router on loopback for tests of tower layers that
//! must see a response as a connection does, with a real client and a streaming body.
//!
//! For users' own tests of their annotated functions: with feature `isolation`,
//! [`isolation::isolate`] gives a test a registry of its own, so tests run in parallel without
//! sharing breaker state; with `assert`, [`assert`](mod@assert) checks on tokio's paused clock that a
//! breaker opens after its failures, that no call outlives its deadline, that retries stay
//! within their budget and that critical work is never shed; with `store`,
//! [`store::SharedMemory`] is a shared breaker store in memory, for fleet behaviour without
//! Redis.
//!
#![cfg_attr(feature = "fake", doc = include_str!("fake/example.md"))]
//!
//! # Feature flags
//!
#![doc = include_str!("features.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![allow(
    clippy::expect_used,
    clippy::panic,
    reason = "test support: failing to set up is a failed test"
)]

#[cfg(feature = "assert")]
pub mod assert;
pub mod browser;
#[cfg(feature = "capacity")]
pub mod capacity;
#[cfg(feature = "tracing")]
pub mod captured;
#[cfg(feature = "fake")]
pub mod fake;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "isolation")]
pub mod isolation;
#[cfg(feature = "metrics")]
pub mod recorder;
#[cfg(feature = "store")]
pub mod store;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod tcp;

pub use tcp::{RedisCluster, RedisSentinel, RedisTcpServer};

/// Servers started by this process, so that each has an id no other server shares.
static STARTED: AtomicU64 = AtomicU64::new(0);

/// A private `redis-server` on a unix socket in its own temporary folder, without persistence;
/// killed on drop, and its folder removed.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    /// Holds the socket; removed on drop (after the server is killed).
    dir: tempfile::TempDir,
    socket: PathBuf,
    /// Unique among every server started on this machine while this one runs: this process's
    /// id and a counter.
    id: String,
    /// Whether it persists every write (AOF, `appendfsync always`), so a restart keeps them.
    durable: bool,
}

impl RedisServer {
    /// A running server, or `None` (the caller skips) when `redis-server` is missing outside
    /// CI.
    ///
    /// # Panics
    ///
    /// When `redis-server` is missing and `CI=true`, when it exits or does not answer within
    /// 10 s, or when whatever answers on its socket is not the process started here.
    #[must_use]
    pub fn start() -> Option<Self> {
        Self::start_with(false)
    }

    /// As [`RedisServer::start`], with persistence: an append-only file written on every
    /// command (`appendonly yes`, `appendfsync always`), so [`RedisServer::restart`] comes back
    /// with everything the server acknowledged.
    ///
    /// # Panics
    ///
    /// As [`RedisServer::start`].
    #[must_use]
    pub fn start_durable() -> Option<Self> {
        Self::start_with(true)
    }

    fn start_with(durable: bool) -> Option<Self> {
        if !tools_found(&[]) {
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("policy-redis-")
            .tempdir()
            .expect("a temporary folder for the redis socket");
        let socket = dir.path().join("redis.sock");
        let id = format!(
            "{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        );
        let mut server = Self {
            child: None,
            dir,
            socket,
            id,
            durable,
        };
        server.spawn();
        Some(server)
    }

    fn spawn(&mut self) {
        let socket = self.socket.to_str().expect("a UTF-8 temporary path");
        let dir = self.dir.path().to_str().expect("a UTF-8 temporary path");
        let child = Command::new("redis-server")
            // No TCP listener at all: the socket in our own folder is the only way in.
            .args([
                "--port",
                "0",
                "--unixsocket",
                socket,
                "--unixsocketperm",
                "700",
            ])
            .args(["--dir", dir, "--save", ""])
            .args(if self.durable {
                ["--appendonly", "yes", "--appendfsync", "always"]
            } else {
                ["--appendonly", "no", "--appendfsync", "everysec"]
            })
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let pid = child.id();
        // Held before waiting, so a failed start still kills it on drop.
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if let Ok(info) = self.query(&["INFO", "server"]) {
                let answering = info_field(&info, "process_id");
                assert_eq!(
                    answering.as_deref(),
                    Some(pid.to_string().as_str()),
                    "the redis-server answering on {} is not the one started here (pid {pid})",
                    self.socket.display()
                );
                break;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("redis-server exited at start ({status})");
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start within 10 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The server's URL, `unix://<socket>`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The path of the server's unix socket.
    #[must_use]
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// A key prefix no other test uses: `label`, then this server's unique id. Instances of
    /// one test that must share state ask with the same label.
    #[must_use]
    pub fn key_prefix(&self, label: &str) -> String {
        format!("{label}-{}", self.id)
    }

    /// One command over a fresh connection (1 s read timeout); the reply as text, for a status,
    /// integer or bulk-string reply. An error reply, or any other kind, is an `Err` holding its
    /// line.
    ///
    /// # Errors
    ///
    /// When the server cannot be reached, does not answer in time, or answers with an error.
    pub fn query(&self, args: &[&str]) -> std::io::Result<String> {
        let stream = UnixStream::connect(&self.socket)?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        resp_query(stream, args)
    }

    /// Calls per command name (lower case, as Redis names them), from `INFO commandstats`.
    ///
    /// # Panics
    ///
    /// When the server does not answer.
    #[must_use]
    pub fn command_calls(&self) -> BTreeMap<String, u64> {
        let info = self
            .query(&["INFO", "commandstats"])
            .expect("INFO commandstats");
        command_calls(&info)
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("the server is running").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {pid} failed");
    }

    /// Freezes the server (SIGSTOP): connections stay open and nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused server.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Kills the server; connections are refused until [`RedisServer::restart`].
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Nothing listens on a socket file left behind; remove it so a connection fails at
        // once, as to a closed port.
        let _ = std::fs::remove_file(&self.socket);
    }

    /// Starts the server again on the same socket: empty, or, for a
    /// [durable](RedisServer::start_durable) one, with everything it had acknowledged.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

/// Calls per command name from an `INFO commandstats` reply.
fn command_calls(info: &str) -> BTreeMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(':')?;
            let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// Sends one command in RESP and reads the reply as text: a status, integer or bulk string as
/// it is, an array as its elements on lines of their own (nested arrays flattened, a nil
/// element as an empty line). An error reply is an `Err` holding its line.
fn resp_query<S: Read + Write>(mut stream: S, args: &[&str]) -> std::io::Result<String> {
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(request.as_bytes())?;
    let mut reader = BufReader::new(stream);
    read_reply(&mut reader)
}

fn read_reply<R: BufRead>(reader: &mut R) -> std::io::Result<String> {
    let mut header = String::new();
    reader.read_line(&mut header)?;
    let number =
        |h: &str| -> std::io::Result<i64> { h[1..].trim().parse().map_err(std::io::Error::other) };
    match header.as_bytes().first() {
        Some(b'$') => {
            let Ok(len) = usize::try_from(number(&header)?) else {
                return Ok(String::new()); // nil
            };
            let mut body = vec![0; len + 2];
            reader.read_exact(&mut body)?;
            body.truncate(len);
            String::from_utf8(body).map_err(std::io::Error::other)
        }
        Some(b'*') => {
            let count = usize::try_from(number(&header)?).unwrap_or(0);
            let items = (0..count)
                .map(|_| read_reply(reader))
                .collect::<std::io::Result<Vec<_>>>()?;
            Ok(items.join("\n"))
        }
        Some(b'+' | b':') => Ok(header[1..].trim().to_owned()),
        _ => Err(std::io::Error::other(header)),
    }
}

/// Whether `redis-server` (and, for `also`, those tools too) can be run. Under `CI=true` a
/// missing one fails the test; elsewhere it is reported on stderr and the caller skips.
fn tools_found(also: &[&str]) -> bool {
    let mut missing = Vec::new();
    for tool in std::iter::once(&"redis-server").chain(also) {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !found {
            missing.push(*tool);
        }
    }
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "{} not installed, and CI=true: install them (apt-get install -y redis-server redis-tools); .ci/run does",
        missing.join(" and ")
    );
    eprintln!(
        "SKIPPED: {} not installed (install it to run the Redis tests)",
        missing.join(" and ")
    );
    false
}

/// The value of `field` in an `INFO` reply (`field:value` lines).
fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name == field).then(|| value.trim().to_owned())
    })
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A paused server must be thawed to die cleanly.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.kill();
    }
}

/// The crate docs' "Feature flags" table is checked in (`src/features.md`) rather than rendered
/// by `document-features` in every build, whose proc macro would be one more crate in a
/// user's first build; this keeps it what `document_features!()` renders from the `## `
/// comments in `Cargo.toml`. `POLICY_BLESS=1 cargo test -p velocity-policy-testkit --lib features_table`
/// rewrites it.
#[cfg(test)]
#[test]
fn the_features_table_is_what_cargo_toml_says() {
    let rendered = document_features::document_features!();
    if std::env::var_os("POLICY_BLESS").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/features.md");
        assert!(
            std::fs::write(path, rendered).is_ok(),
            "cannot write {path}"
        );
    }
    assert_eq!(
        include_str!("features.md"),
        rendered,
        "src/features.md is not the table Cargo.toml's `## ` comments give: rerun with POLICY_BLESS=1"
    );
}
