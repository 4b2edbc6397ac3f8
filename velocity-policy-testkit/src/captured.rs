//! Formatted tracing output kept in memory, so a test can assert on it: [`Captured`] is the
//! writer of a `tracing_subscriber::fmt` subscriber, and its text is what was logged.
//!
//! ```
//! use velocity_policy_testkit::captured::Captured;
//!
//! let logs = Captured::default();
//! let subscriber = tracing_subscriber::fmt()
//!     .with_writer(logs.clone())
//!     .with_ansi(false)
//!     .finish();
//! tracing::subscriber::with_default(subscriber, || tracing::info!(name = "search", "opened"));
//! assert_eq!(logs.lines_with(&["opened", "name=\"search\""]).len(), 1);
//! ```

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

/// Collects formatted tracing output so a test can assert on it.
#[derive(Debug, Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("a test thread panicked while logging"))
            .into_owned()
    }

    /// Lines that contain every one of `needles`.
    pub fn lines_with(&self, needles: &[&str]) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .map(str::to_owned)
            .collect()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .expect("a test thread panicked while logging")
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
