//! Test support shared by the workspace's tests and benches.
//!
//! [`RedisServer`] starts a private `redis-server` on a free loopback port and stops it when
//! dropped. It speaks just enough of the Redis protocol (RESP) to check that the server is up
//! and to read `INFO commandstats`, so it depends on nothing, and a test that uses it does not
//! pull the `redis` crate into a build that would not otherwise have it.
//!
//! Under `CI=true` a missing `redis-server` fails the test (`.ci/run` installs it); elsewhere
//! [`RedisServer::start`] returns `None` after saying on stderr that the test is skipped.
//!
//! ```no_run
//! use policy_testkit::RedisServer;
//!
//! let Some(server) = RedisServer::start() else {
//!     return; // skipped: redis-server is not installed (and this is not CI)
//! };
//! let url = server.url(); // redis://127.0.0.1:<port>/
//! assert_eq!(server.query(&["PING"]).unwrap(), "PONG");
//! # let _ = url;
//! ```
//!
//! With feature `http`, `http` serves an axum router on loopback for tests of tower layers that
//! must see a response as a connection does, with a real client and a streaming body.
#![allow(
    clippy::expect_used,
    clippy::panic,
    reason = "test support: failing to set up is a failed test"
)]

#[cfg(feature = "http")]
pub mod http;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private `redis-server` on a free loopback port, without persistence; killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
}

impl RedisServer {
    /// A running server, or `None` (the caller skips) when `redis-server` is missing outside
    /// CI.
    ///
    /// # Panics
    ///
    /// When `redis-server` is missing and `CI=true`, or when it does not answer within 10 s.
    #[must_use]
    pub fn start() -> Option<Self> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !found {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "redis-server is not installed, and CI=true: install it (apt-get install -y redis-server); .ci/run does"
            );
            eprintln!("SKIPPED: redis-server is not installed (install it to run the Redis tests)");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free loopback port")
            .port();
        let mut server = Self { child: None, port };
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
        while self.query(&["PING"]).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start within 10 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's URL, `redis://127.0.0.1:<port>/`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// One command over a fresh connection (1 s read timeout); the reply as text, for a status
    /// or bulk-string reply. An error reply, or any other kind, is an `Err` holding its line.
    ///
    /// # Errors
    ///
    /// When the server cannot be reached, does not answer in time, or answers with an error.
    pub fn query(&self, args: &[&str]) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream.write_all(request.as_bytes())?;
        let mut reader = BufReader::new(stream);
        let mut header = String::new();
        reader.read_line(&mut header)?;
        match header.as_bytes().first() {
            Some(b'$') => {
                let len: usize = header[1..].trim().parse().map_err(std::io::Error::other)?;
                let mut body = vec![0; len + 2];
                reader.read_exact(&mut body)?;
                body.truncate(len);
                String::from_utf8(body).map_err(std::io::Error::other)
            }
            Some(b'+') => Ok(header[1..].trim().to_owned()),
            _ => Err(std::io::Error::other(header)),
        }
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
        info.lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("cmdstat_")?;
                let (name, stats) = rest.split_once(':')?;
                let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
                Some((name.to_owned(), calls.parse().ok()?))
            })
            .collect()
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
    }

    /// Starts a fresh, empty server on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
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
