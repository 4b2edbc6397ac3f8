//! A controllable fake dependency: a plain async function (feature `fake`) or a real HTTP
//! server on loopback ([`http`], feature `fake-http`) whose [`Behaviour`] a test scripts and
//! switches while it runs (healthy, slow, down, rate limited with a `Retry-After`, flaky at a
//! rate with a seed, or a [`Script`] of phases), and which counts what it saw ([`Counts`]:
//! calls per outcome, calls in flight and the most at once).
//!
//! Its delays are `tokio::time::sleep`, so on tokio's paused clock (`start_paused = true`,
//! `tokio::time::advance`) a slow dependency takes no real time, and a test of a deadline or a
//! breaker runs in microseconds and the same way every time.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_testkit::fake::{Behaviour, FakeDependency, FakeError};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let search = FakeDependency::new("search").with_latency(Duration::from_millis(20));
//! let start = tokio::time::Instant::now();
//! assert!(search.call().await.is_ok());
//! assert_eq!(start.elapsed(), Duration::from_millis(20));
//!
//! search.set(Behaviour::rate_limited(Duration::from_secs(5)));
//! let error = search.call().await.unwrap_err();
//! assert_eq!(error.retry_after(), Some(Duration::from_secs(5)));
//! assert!(matches!(error, FakeError::RateLimited { .. }));
//!
//! let counts = search.counts();
//! assert_eq!((counts.calls, counts.ok, counts.rate_limited), (2, 1, 1));
//! # }
//! ```
//!
//! [`FakeError`] is a real error type (`thiserror`): wrap it in your own error with
//! `#[from]`, and let your `velocity_policy::Transient` say what to retry (the fake error's own
//! [`Transient`](velocity_policy_runtime::Transient) answers for it: a 503 is worth another attempt, a
//! 429 is not).

mod behaviour;
mod counts;
#[cfg(feature = "fake-http")]
pub mod http;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use behaviour::{Behaviour, Lasts, Phase, Script};
use behaviour::{Decision, Running};
pub use counts::Counts;
use counts::{Counters, Outcome};

/// Why a fake dependency's call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FakeError {
    /// It is down ([`Behaviour::Down`], or a failed call of [`Behaviour::Flaky`]): a 503.
    #[error("{dependency} is down (503 Service Unavailable)")]
    Down {
        /// The dependency's name.
        dependency: Arc<str>,
    },
    /// It refused the call and said when to come back ([`Behaviour::RateLimited`]): a 429.
    #[error("{dependency} is rate limited (429 Too Many Requests, Retry-After: {} ms)", retry_after.as_millis())]
    RateLimited {
        /// The dependency's name.
        dependency: Arc<str>,
        /// How long it told the caller to wait.
        retry_after: Duration,
    },
}

impl FakeError {
    /// The `Retry-After` of a 429, for `Breaker::trip`.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } => Some(*retry_after),
            Self::Down { .. } => None,
        }
    }

    /// The HTTP status the same failure has over HTTP: 503 or 429.
    #[must_use]
    pub fn status(&self) -> u16 {
        match self {
            Self::Down { .. } => 503,
            Self::RateLimited { .. } => 429,
        }
    }

    /// The dependency's name.
    #[must_use]
    pub fn dependency(&self) -> &str {
        match self {
            Self::Down { dependency } | Self::RateLimited { dependency, .. } => dependency,
        }
    }
}

impl velocity_policy_runtime::Transient for FakeError {
    /// A 503 may answer differently next time; a 429 said when it would, and an attempt
    /// milliseconds later ignores that (trip a breaker for its `Retry-After` instead).
    fn is_transient(&self) -> bool {
        matches!(self, Self::Down { .. })
    }
}

/// A successful call's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// The call's number, from 1, counted since the dependency was made (or last reset).
    pub call: u64,
    /// How long the dependency took to answer.
    pub latency: Duration,
}

#[derive(Debug)]
struct Shared {
    name: Arc<str>,
    usual_latency: Mutex<Duration>,
    running: Mutex<Running>,
    counters: Counters,
    numbered: AtomicU64,
}

// A poisoned lock means a panic elsewhere while it was held; the value is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A fake dependency called as a plain async function; cloning shares it (its behaviour and
/// its counts).
///
/// Made [healthy](Behaviour::healthy) with no latency; [`FakeDependency::with_latency`] gives
/// it a usual latency and [`FakeDependency::set`] switches its behaviour, also while calls
/// are waiting (those keep the behaviour they started with).
#[derive(Debug, Clone)]
pub struct FakeDependency {
    shared: Arc<Shared>,
}

impl FakeDependency {
    /// A healthy dependency named `name` (the name is in its errors).
    #[must_use]
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self {
            shared: Arc::new(Shared {
                name: name.into(),
                usual_latency: Mutex::new(Duration::ZERO),
                running: Mutex::new(Running::new(Behaviour::healthy())),
                counters: Counters::default(),
                numbered: AtomicU64::new(0),
            }),
        }
    }

    /// Its usual latency: how long a [healthy](Behaviour::healthy) or
    /// [flaky](Behaviour::Flaky) call takes to answer.
    #[must_use]
    pub fn with_latency(self, latency: Duration) -> Self {
        *lock(&self.shared.usual_latency) = latency;
        self
    }

    /// Starts with `behaviour` instead of healthy.
    #[must_use]
    pub fn with(self, behaviour: Behaviour) -> Self {
        self.set(behaviour);
        self
    }

    /// Its name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Its usual latency.
    #[must_use]
    pub fn usual_latency(&self) -> Duration {
        *lock(&self.shared.usual_latency)
    }

    /// Behaves as `behaviour` from the next call on. A [`Script`] starts again at its first
    /// phase, its time from now; a [flaky](Behaviour::Flaky) one starts its call numbers again.
    pub fn set(&self, behaviour: Behaviour) {
        *lock(&self.shared.running) = Running::new(behaviour);
    }

    /// How it behaves now.
    #[must_use]
    pub fn behaviour(&self) -> Behaviour {
        lock(&self.shared.running).behaviour().clone()
    }

    /// One call: waits as its behaviour says (on tokio's clock), then answers or fails.
    ///
    /// # Errors
    ///
    /// [`FakeError::Down`] while it is down (or for a flaky call's failure),
    /// [`FakeError::RateLimited`] while it is rate limited.
    pub async fn call(&self) -> Result<Reply, FakeError> {
        let call = self.shared.numbered.fetch_add(1, Ordering::Relaxed) + 1;
        let start = tokio::time::Instant::now();
        self.call_with(|| Reply {
            call,
            latency: start.elapsed(),
        })
        .await
    }

    /// One call, answered with `answer()` when it succeeds (after its latency).
    ///
    /// # Errors
    ///
    /// As [`FakeDependency::call`].
    pub async fn call_with<T>(&self, answer: impl FnOnce() -> T) -> Result<T, FakeError> {
        let mut call = self.shared.counters.enter();
        let decision = {
            let usual = *lock(&self.shared.usual_latency);
            lock(&self.shared.running).decide(tokio::time::Instant::now(), usual)
        };
        let name = || self.shared.name.clone();
        match decision {
            Decision::Answer(latency) => {
                if !latency.is_zero() {
                    tokio::time::sleep(latency).await;
                }
                call.finish(Outcome::Ok);
                Ok(answer())
            }
            Decision::Fail => {
                call.finish(Outcome::Failed);
                Err(FakeError::Down { dependency: name() })
            }
            Decision::RateLimited(retry_after) => {
                call.finish(Outcome::RateLimited);
                Err(FakeError::RateLimited {
                    dependency: name(),
                    retry_after,
                })
            }
        }
    }

    /// What it counted so far.
    #[must_use]
    pub fn counts(&self) -> Counts {
        self.shared.counters.snapshot()
    }

    /// Starts counting again from zero (the calls in flight stay counted as in flight, and
    /// are the new maximum); [`Reply::call`] numbers start again too.
    pub fn reset(&self) {
        self.shared.counters.reset();
        self.shared.numbered.store(0, Ordering::Relaxed);
    }

    /// The most calls it had in flight at once since the last take (or the start), then starts
    /// that maximum over from the calls in flight now.
    pub fn take_max_in_flight(&self) -> u64 {
        self.shared.counters.take_max_in_flight()
    }
}
