//! With `REDIS_URL` set, `policy-demo --short` runs a second service instance in its own
//! process; the two share their breakers through Redis, and the second one, sent saves while the
//! first one's opening holds, refuses them without ever calling the sick provider. The
//! embeddings go through the durable queue on the same Redis, computed by both instances.
//!
//! The test starts its own `redis-server` on a unix socket in a temporary folder. Under `CI=true` a missing
//! `redis-server` fails the test (`.ci/run` installs it); elsewhere the test is skipped with a
//! message on stderr.
#![cfg(feature = "redis")]
#![allow(
    clippy::expect_used,
    clippy::panic,
    reason = "test code: failing to set up is a failed test"
)]

use std::process::{Command, Stdio};

use velocity_policy_testkit::RedisServer;

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

    // The embeddings went through the Redis stream, and this instance's worker computed some of
    // them (the second instance's worker takes the others), none dead-lettered.
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("embeddings enqueued on the Redis stream `embeddings`"))
        .collect();
    assert!(!lines.is_empty(), "no queue line in:\n{stdout}");
    let enqueued: u64 = lines
        .iter()
        .map(|l| number_after(l, "background         "))
        .sum();
    let completed: u64 = lines.iter().map(|l| number_after(l, "refused), ")).sum();
    assert!(enqueued > 0, "embeddings were enqueued: {lines:?}");
    assert!(completed > 0, "this instance computed some: {lines:?}");
    for line in &lines {
        assert!(line.contains("0 dead letters"), "{line}");
        assert!(line.contains("redeliveries"), "{line}");
    }

    let html = std::fs::read_to_string(report.path()).expect("the HTML report");
    assert!(
        html.contains("embeddings enqueued on the Redis stream"),
        "the report shows the queue"
    );
    assert!(
        html.contains("Two instances, one breaker"),
        "the report tells it"
    );
}
