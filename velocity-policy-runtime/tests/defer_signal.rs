//! The stop signals of the shutdown sequence: SIGTERM and SIGINT, each told apart and logged.
//!
//! The test signals its own process, so this binary holds one test: once installed, the
//! handlers stay for the process's life.
#![cfg(all(feature = "http", unix))]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::time::Duration;

use velocity_policy_runtime::defer::{ShutdownSignal, ShutdownSignals};

fn kill(signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(std::process::id().to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal}");
}

#[tokio::test(flavor = "current_thread")]
async fn sigterm_and_sigint_are_received_told_apart_and_logged() {
    let (logs, _guard) = common::capture();
    let mut signals = ShutdownSignals::install().unwrap();

    // SIGTERM (what containers and systemd send) no longer kills the process: it is received.
    kill("TERM");
    let received = tokio::time::timeout(Duration::from_secs(10), signals.recv())
        .await
        .unwrap();
    assert_eq!(received, ShutdownSignal::Terminate);
    assert_eq!(received.to_string(), "SIGTERM");

    // A second signal, say an impatient operator's Ctrl-C, is received too.
    kill("INT");
    let received = tokio::time::timeout(Duration::from_secs(10), signals.recv())
        .await
        .unwrap();
    assert_eq!(received, ShutdownSignal::Interrupt);

    let lines = logs.lines_with(&["kind=\"shutdown_signal\"", "received: stopping"]);
    assert_eq!(lines.len(), 2, "{}", logs.text());
    assert!(lines[0].contains("signal=\"SIGTERM\""), "{}", logs.text());
    assert!(lines[1].contains("signal=\"SIGINT\""), "{}", logs.text());
}
