//! With `REDIS_URL` set, `policy-demo --short` runs a second service instance in its own
//! process; the two share their breakers through Redis, and the second one, sent saves while the
//! first one's opening holds, refuses them without ever calling the sick provider.
//!
//! The test starts its own `redis-server` on a free loopback port. Under `CI=true` a missing
//! `redis-server` fails the test (`.ci/run` installs it); elsewhere the test is skipped with a
//! message on stderr.
#![cfg(feature = "redis")]
#![allow(
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers: failing to set up is a failed test"
)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    fn start() -> Option<Self> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "redis-server is not installed, and CI=true: install it (apt-get install -y redis-server); .ci/run does"
            );
            eprintln!(
                "SKIPPED: redis-server is not installed (install it to run the Redis demo test)"
            );
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let server = Self { child, port };
        let started = Instant::now();
        while !server.answers_ping() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(server)
    }

    fn answers_ping(&self) -> bool {
        let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
        let mut reply = [0u8; 7];
        conn.write_all(b"PING\r\n").is_ok()
            && conn.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The number right after `before` in `text`.
fn number_after(text: &str, before: &str) -> u64 {
    let at = text
        .find(before)
        .unwrap_or_else(|| panic!("`{before}` in:\n{text}"))
        + before.len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("a number after `{before}` in:\n{text}"))
}

#[test]
fn the_second_instance_refuses_from_the_shared_opening_without_calling_the_provider() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let report = tempfile::NamedTempFile::new().expect("a report file");
    let output = Command::new(env!("CARGO_BIN_EXE_policy-demo"))
        .args(["--short", "--quiet", "--report"])
        .arg(report.path())
        .env("REDIS_URL", server.url())
        .stdin(Stdio::null())
        .output()
        .expect("run policy-demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "policy-demo failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{stdout}");

    let shared = &stdout[stdout
        .find("two instances, one breaker")
        .unwrap_or_else(|| panic!("no shared-breaker section in:\n{stdout}"))..];
    let saves = number_after(shared, "the second instance took ");
    let refused = number_after(shared, "its search breaker refused ");
    let calls = number_after(shared, "and it made ");
    assert!(saves > 0, "the second instance took saves: {shared}");
    assert!(refused > 0, "its breaker refused index attempts: {shared}");
    assert!(
        shared.contains("another instance"),
        "the opening came from the other instance: {shared}"
    );
    assert_eq!(calls, 0, "it never called the sick provider: {shared}");

    let html = std::fs::read_to_string(report.path()).expect("the HTML report");
    assert!(
        html.contains("Two instances, one breaker"),
        "the report tells it"
    );
}
