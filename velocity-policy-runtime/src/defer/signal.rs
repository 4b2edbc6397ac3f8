//! Knowing when to stop: SIGINT and SIGTERM, for the shutdown sequence (feature `http`).

use std::fmt;
use std::io;

use crate::observe;

/// The signal that asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum ShutdownSignal {
    /// SIGINT: Ctrl-C in a terminal (on Windows, Ctrl-C or Ctrl-Break).
    Interrupt,
    /// SIGTERM: what a container runtime, Kubernetes and systemd send to stop a process.
    Terminate,
}

impl ShutdownSignal {
    /// The signal's name: `SIGINT` or `SIGTERM`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
        }
    }
}

impl fmt::Display for ShutdownSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The process's stop signals, listened to from the moment they are
/// [installed](ShutdownSignals::install): SIGINT (Ctrl-C) and SIGTERM, the signal containers
/// and systemd send (and follow with SIGKILL after their grace period, 30 s by default in
/// Kubernetes and 90 s in systemd). Listening only for Ctrl-C, a process killed by SIGTERM
/// stops at once: no drain, no report, deferred work in flight lost.
///
/// Install them at startup, before the server accepts its first request (from then on the
/// signals no longer stop the process by themselves), and wait for one where the server waits
/// for its shutdown signal. The whole sequence:
///
/// 1. [`recv`](ShutdownSignals::recv) returns: stop accepting, and let the server finish the
///    requests it has (with axum, the future given to `with_graceful_shutdown`);
/// 2. the server returned: every response is finished, so the work they deferred is in flight;
///    [`shutdown`](super::shutdown()) drains it within a deadline shorter than the platform's
///    grace period, and reports it;
/// 3. only then stop what that work needs (connection pools, clients, a database handle).
///
/// ```no_run
/// use std::time::Duration;
/// use velocity_policy_runtime::defer::{self, ShutdownSignals};
///
/// # async fn serve(_stop: impl std::future::Future<Output = ()>) {}
/// # #[tokio::main]
/// # async fn main() -> std::io::Result<()> {
/// let mut signals = ShutdownSignals::install()?;
/// // axum::serve(listener, app).with_graceful_shutdown(async move { signals.recv().await; })
/// serve(async move {
///     let signal = signals.recv().await;
///     eprintln!("{signal}: finishing the open requests");
/// })
/// .await;
/// let report = defer::shutdown(Duration::from_secs(20)).await;
/// eprintln!("deferred work drained: {} finished, {} abandoned", report.finished, report.abandoned);
/// // ...and only now close the pools the deferred work used.
/// # Ok(())
/// # }
/// ```
///
/// Each signal received is logged (`kind = "shutdown_signal"`, `signal = "SIGTERM"`).
#[derive(Debug)]
pub struct ShutdownSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    /// Starts listening for SIGINT and SIGTERM (Ctrl-C and Ctrl-Break on Windows): from now on
    /// they no longer stop the process by themselves. Call it inside a tokio runtime; fails only
    /// when the signal handlers cannot be installed.
    pub fn install() -> io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    /// Waits for the next stop signal, logs it, and says which it was. Call it again to wait for
    /// a second one (say, to give up a drain an operator does not want to wait for).
    pub async fn recv(&mut self) -> ShutdownSignal {
        let signal = self.next().await;
        observe::shutdown_signal(signal.as_str());
        signal
    }

    #[cfg(unix)]
    async fn next(&mut self) -> ShutdownSignal {
        // `None` only when the runtime is shutting down: then stopping is what is wanted too.
        tokio::select! {
            _ = self.interrupt.recv() => ShutdownSignal::Interrupt,
            _ = self.terminate.recv() => ShutdownSignal::Terminate,
        }
    }

    #[cfg(not(unix))]
    async fn next(&mut self) -> ShutdownSignal {
        // Windows has no SIGTERM: a service is stopped through its control handler, and a
        // console process with Ctrl-C, Ctrl-Break or a close event.
        let _ = tokio::signal::ctrl_c().await;
        ShutdownSignal::Interrupt
    }
}

/// Installs the [stop signals](ShutdownSignals) and waits for the first: SIGINT or SIGTERM.
///
/// A shorthand for a future given to `with_graceful_shutdown`. The handlers are installed
/// when the future is first polled, so a signal arriving before that (while the process
/// starts) still stops it at once; install [`ShutdownSignals`] first to close that window.
pub async fn shutdown_signal() -> io::Result<ShutdownSignal> {
    Ok(ShutdownSignals::install()?.recv().await)
}
