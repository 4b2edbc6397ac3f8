//! Helpers shared by the runtime's integration tests.
#![allow(
    clippy::unwrap_used,
    reason = "a test helper: a poisoned lock is a failed test"
)]
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::io::Write;

pub(crate) use velocity_policy_testkit::captured::Captured;

thread_local! {
    static SINK: std::cell::RefCell<Option<Captured>> = const { std::cell::RefCell::new(None) };
}

/// Writes to the capture of the thread that emitted the event, if it has one.
struct ThreadSink;

impl Write for ThreadSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        SINK.with(|sink| match &mut *sink.borrow_mut() {
            Some(captured) => captured.write(buf),
            None => Ok(buf.len()),
        })
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Stops the current thread's capture when dropped.
pub(crate) struct CaptureGuard(());

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        SINK.with(|sink| *sink.borrow_mut() = None);
    }
}

/// Captures every `policy` event (DEBUG and up) emitted on the current thread until the guard
/// drops.
///
/// One global subscriber routes each event to its thread's capture: scoped subscribers
/// (`set_default`) race with tracing's per-callsite interest cache when tests run in
/// parallel, and an event can be lost.
pub(crate) fn capture() -> (Captured, CaptureGuard) {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(|| ThreadSink)
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
    });
    let captured = Captured::default();
    SINK.with(|sink| *sink.borrow_mut() = Some(captured.clone()));
    (captured, CaptureGuard(()))
}
