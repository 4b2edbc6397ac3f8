//! Helpers for the deferred-work and background tests that run a real server on loopback
//! (the server, the client and a streaming body are `velocity_policy_testkit::http`'s).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::sync::OnceLock;

pub(crate) use velocity_policy_testkit::captured::Captured;
#[allow(unused_imports, reason = "each test binary uses a different subset")]
pub(crate) use velocity_policy_testkit::http::{ChannelBody, Client, Server, client, get};

/// Captures every event (DEBUG and up) of every thread of this test binary: the server's
/// worker threads log too. Tests tell their lines apart by unique task names.
pub(crate) fn global_capture() -> &'static Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        captured
    })
}
