//! Starts a private `redis-server` on a free loopback port for one test, and stops it.
#![allow(
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers: failing to set up is a failed test"
)]
//!
//! Under `CI=true` a missing `redis-server` fails the test; elsewhere the test is skipped with
//! a message on stderr.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct RedisServer {
    child: Option<Child>,
    port: u16,
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    listener.local_addr().expect("local address").port()
}

impl RedisServer {
    /// A running server, or `None` (skip) when `redis-server` is missing outside CI.
    pub(crate) fn start() -> Option<Self> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok();
        if !found {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!(
                    "redis-server is not installed, and CI=true: install it (apt-get install -y redis-server); .ci/run does"
                );
            }
            eprintln!("SKIPPED: redis-server is not installed (install it to run the Redis tests)");
            return None;
        }
        let mut server = Self {
            child: None,
            port: free_port(),
        };
        server.spawn();
        Some(server)
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if let Ok(mut conn) = redis::Client::open(self.url()).and_then(|c| c.get_connection())
                && redis::cmd("PING").query::<String>(&mut conn).is_ok()
            {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("server running").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Freezes the server (SIGSTOP): connections stay open and nothing answers.
    pub(crate) fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused server.
    pub(crate) fn resume(&self) {
        self.signal("-CONT");
    }

    /// Kills the server; connections are refused until [`RedisServer::restart`].
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a fresh, empty server on the same port.
    pub(crate) fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Calls per command name, from `INFO commandstats`.
    pub(crate) fn command_calls(&self) -> BTreeMap<String, u64> {
        let mut conn = redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect for INFO");
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut conn)
            .expect("INFO commandstats");
        info.lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("cmdstat_")?;
                let (name, stats) = rest.split_once(':')?;
                let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
                Some((name.to_owned(), calls.parse().ok()?))
            })
            .collect()
    }
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
