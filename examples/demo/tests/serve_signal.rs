//! `policy-demo serve` stopped the way a container runtime or systemd stops it: SIGTERM. It
//! drains the deferred work in flight while the providers that work calls are still up, prints
//! its report, and exits 0.
#![cfg(unix)]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed unwrap or a missing line is a failed test"
)]

use std::process::Stdio;
use std::time::Duration;

use axum::body::Bytes;
use http::{Method, StatusCode};
use policy_demo::client::{self, http_client};
use policy_demo::service::token_for;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{ChildStdout, Command};

/// Reads lines until one starts with `prefix`, keeping what it read for the failure message.
async fn line_starting(
    lines: &mut tokio::io::Lines<BufReader<ChildStdout>>,
    prefix: &str,
    seen: &mut String,
) -> String {
    loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no `{prefix}` line within 60 s; so far:\n{seen}"))
            .expect("stdout readable")
            .unwrap_or_else(|| panic!("stdout ended before a `{prefix}` line:\n{seen}"));
        seen.push_str(&line);
        seen.push('\n');
        if line.starts_with(prefix) {
            return line;
        }
    }
}

/// The first `http://...` in `line`, without a trailing slash.
fn url_in(line: &str) -> String {
    let start = line.find("http://").expect("a URL in the line");
    line[start..]
        .split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_deferred_work_before_the_providers_stop_then_reports_and_exits_0() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_policy-demo"))
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the demo binary starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = String::new();
    let service = url_in(&line_starting(&mut lines, "the service:", &mut seen).await);
    let search = url_in(&line_starting(&mut lines, "search:", &mut seen).await);
    line_starting(&mut lines, "Ctrl-C or SIGTERM to stop.", &mut seen).await;

    // Every call to the search provider now takes 1.5 s: longer than an attempt may (1 s), so
    // the save's indexing is still at its first attempt when SIGTERM comes, and will need a
    // second one.
    let http = http_client();
    let switch = format!("{search}/_mode");
    let mode =
        |text: &'static str| client::send(&http, Method::POST, &switch, &[], Bytes::from(text));
    assert_eq!(mode("slow 1500ms").await.unwrap().status, StatusCode::OK);
    let token = format!("Bearer {}", token_for(1));
    let saved = client::send(
        &http,
        Method::POST,
        &format!("{service}/documents"),
        &[("authorization", &token)],
        Bytes::from(r#"{"title":"before the shutdown","body":"indexed during the drain"}"#),
    )
    .await
    .unwrap();
    assert_eq!(saved.status, StatusCode::CREATED, "{:?}", saved.body);

    let pid = child.id().expect("still running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());

    // While the service drains, its providers are still up: the provider heals, and the
    // indexing's second attempt (after the first times out at 1 s) reaches it. Were the
    // providers stopped first, this switch and that attempt would both find nobody listening.
    let healed = mode("healthy").await;
    assert!(
        healed.as_ref().is_ok_and(|r| r.status == StatusCode::OK),
        "the search provider is still up during the drain: {healed:?}"
    );
    drop(http);

    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("it stops within 30 s of SIGTERM")
        .unwrap();
    let mut rest = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        rest.push_str(&line);
        rest.push('\n');
    }
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .await
        .unwrap();
    let output = format!("{seen}{rest}\nstderr:\n{stderr}");

    assert_eq!(status.code(), Some(0), "{output}");
    assert!(
        rest.contains("SIGTERM: stopping: no new connections; the open requests finish"),
        "{output}"
    );
    // The drain waited for what was in flight (indexing, at least) and abandoned nothing...
    let drained = rest
        .lines()
        .find_map(|l| {
            l.strip_prefix("stopped; deferred work still in flight at shutdown: ")
                .and_then(|l| l.strip_suffix(" finished, 0 abandoned"))
        })
        .unwrap_or_else(|| panic!("no drain line with 0 abandoned:\n{output}"));
    let drained: u64 = drained.parse().unwrap();
    assert!((1..=4).contains(&drained), "{output}");
    // ...and the save's four deferred tasks all finished well: indexing's second attempt still
    // reached the search provider, which stopped only after the drain.
    assert!(
        rest.contains(
            "since start, deferred: 4 scheduled: 4 finished (0 failed, 0 panicked, 0 refused), 0 shed, 0 abandoned, 0 in flight"
        ),
        "{output}"
    );
    assert!(rest.contains("since start, background: "), "{output}");
    assert!(
        !rest.contains("not every task is accounted for"),
        "{output}"
    );
}
