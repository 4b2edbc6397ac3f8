//! What happens after a refusal: fallbacks per operation, and stale-if-error.
//!
//! A [`ResilienceError`](crate::ResilienceError) means the work never ran, so retrying is
//! pointless and a fallback is the only useful response. Two rules:
//!
//! - **Per operation, never inherited.** A fallback belongs to one function. A nested annotated call
//!   that is refused does not use its caller's fallback: it returns its refusal to the caller
//!   as an error, and the caller's own fallback answers only for the caller's own refusals and
//!   expiries (or its failures, when it asked for that).
//! - **A fallback never widens a permission.** Graceful degradation drops privileges (an
//!   authenticated request degrades to anonymous when the session store is down); it never
//!   raises them. [`Privileges`] and [`degrade`] make that checkable: a fallback states the
//!   ceiling its answer must stay within, and a widening answer fails a debug assertion in
//!   tests (and in release is replaced by the least privilege, and logged).
//!
//! Stale-if-error ([`StaleCache`], feature `stale`) keeps the last good result per set of
//! arguments and serves it, for at most its window, when the call is refused, expires or fails;
//! every stale answer is a tracing event and a counter, so it is never mistaken for a fresh one.
//!
//! Every fallback use is observable: an event (`kind = "fallback"`, with the operation's name, the
//! reason and which fallback answered) and a counter in [`FallbackSnapshot`].
//!
//! # Less privileged, or not allowed?
//!
//! A degraded answer grants less, and that is right; but it must not be mistaken for the real
//! answer "this caller may not". A request degraded to anonymous because the session store
//! timed out is not an anonymous request: told "401 sign in", its client signs in again (which
//! cannot help, and loads the identity provider when it is already struggling), where "503,
//! retry in a second" is the truth. Under CPU overload, when every lookup misses its deadline,
//! the difference is every save.
//!
//! So let the fallback's answer **say it is degraded, and why**: a variant of its own (say
//! `Session::Degraded { because }`, with the reason taken from the [`CallError`] the fallback
//! receives) that grants exactly what the least privilege grants, so [`degrade`] accepts it.
//! Then, where work needs the privilege:
//!
//! | the caller is | the answer | the client should |
//! |---|---|---|
//! | allowed | the work runs | |
//! | really less privileged: no session, or a session without the right | 401 / 403 | sign in, or give up |
//! | degraded: the privilege could not be checked | 503 with the reason and a `Retry-After` | retry later, keep its credentials |
//!
//! Work that does not need the privilege (reading a public document) goes on either way: that
//! is what degrading is for.
//!
//!
//! # The session example
//!
//! ```
//! use velocity_policy_runtime::fallback::{Privileges, degrade};
//!
//! #[derive(Debug, Clone, PartialEq)]
//! enum Session {
//!     Anonymous,
//!     User { id: u64, admin: bool },
//! }
//!
//! impl Privileges for Session {
//!     fn is_within(&self, ceiling: &Self) -> bool {
//!         match (self, ceiling) {
//!             (Session::Anonymous, _) => true,
//!             (Session::User { id, admin }, Session::User { id: c, admin: c_admin }) => {
//!                 id == c && (!admin || *c_admin)
//!             }
//!             (Session::User { .. }, Session::Anonymous) => false,
//!         }
//!     }
//!     fn least() -> Self {
//!         Session::Anonymous
//!     }
//! }
//!
//! // The session store is down: the request's token claims user 7 (the most it could have
//! // been), and the fallback answers anonymous, which is within that.
//! let claimed = Session::User { id: 7, admin: false };
//! assert_eq!(degrade(Session::Anonymous, &claimed), Session::Anonymous);
//! ```
//!
//! Telling "degraded" from "really anonymous", so that work needing the privilege answers
//! "retry" for the first and "sign in" for the second:
//!
//! ```
//! use velocity_policy_runtime::{CallError, DeadlineExceeded};
//! use velocity_policy_runtime::fallback::{Privileges, degrade};
//! # use std::time::Duration;
//!
//! #[derive(Debug, Clone, PartialEq)]
//! enum Session {
//!     /// The session store says: no session.
//!     Anonymous,
//!     /// The session store could not say: the privileges of `Anonymous`, and why.
//!     Degraded { because: &'static str },
//!     User { id: u64 },
//! }
//!
//! impl Privileges for Session {
//!     fn is_within(&self, ceiling: &Self) -> bool {
//!         match self {
//!             Session::Anonymous | Session::Degraded { .. } => true,
//!             Session::User { .. } => self == ceiling,
//!         }
//!     }
//!     fn least() -> Self {
//!         Session::Anonymous
//!     }
//! }
//!
//! /// The lookup's fallback: degraded, saying why.
//! fn degraded<E>(claimed_user: u64, why: &CallError<E>) -> Session {
//!     let because = match why {
//!         CallError::Refused(refusal) => refusal.kind().as_str(),
//!         CallError::DeadlineExceeded(_) => "deadline_exceeded",
//!         CallError::Failed(_) => "failed",
//!     };
//!     degrade(Session::Degraded { because }, &Session::User { id: claimed_user })
//! }
//!
//! #[derive(Debug, PartialEq)]
//! enum Denied {
//!     /// 401: sign in.
//!     NotSignedIn,
//!     /// 503 with the reason and a `Retry-After`: retry, keep the credentials.
//!     CannotTellNow(&'static str),
//! }
//!
//! /// Work that needs a signed-in user.
//! fn may_save(session: &Session) -> Result<u64, Denied> {
//!     match session {
//!         Session::User { id } => Ok(*id),
//!         Session::Anonymous => Err(Denied::NotSignedIn),
//!         Session::Degraded { because } => Err(Denied::CannotTellNow(because)),
//!     }
//! }
//!
//! let expired: CallError<std::io::Error> = DeadlineExceeded::new(Duration::from_millis(150)).into();
//! assert_eq!(may_save(&degraded(7, &expired)), Err(Denied::CannotTellNow("deadline_exceeded")));
//! assert_eq!(may_save(&Session::Anonymous), Err(Denied::NotSignedIn));
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::CallError;
use crate::instruments::FallbackMetrics;

/// A value that grants privileges, ordered by inclusion.
pub trait Privileges {
    /// True when `self` grants nothing that `ceiling` does not.
    fn is_within(&self, ceiling: &Self) -> bool;
    /// The least privilege: what a widening answer is replaced with in release builds.
    fn least() -> Self;
}

/// A fallback's answer, checked against the ceiling it must stay within: the most the caller
/// could have had (say, what the request's token claims).
///
/// A widening answer is a bug: it fails a debug assertion (so tests catch it); in release it is
/// logged (`kind = "fallback_widened"`) and replaced with [`Privileges::least`].
pub fn degrade<T: Privileges + fmt::Debug>(answer: T, ceiling: &T) -> T {
    if answer.is_within(ceiling) {
        return answer;
    }
    debug_assert!(
        answer.is_within(ceiling),
        "a fallback widened privileges: {answer:?} is not within {ceiling:?}"
    );
    tracing::error!(
        target: "policy",
        kind = "fallback_widened",
        reason = "the fallback's answer is wider than the caller's ceiling",
        answer = ?answer,
        ceiling = ?ceiling,
        "a fallback widened privileges; answering with the least privilege instead"
    );
    T::least()
}

#[derive(Debug, Default)]
struct Counts {
    refused: AtomicU64,
    expired: AtomicU64,
    failed: AtomicU64,
    stale: AtomicU64,
}

/// One operation's fallback: its name, which function answers, and how often it did.
pub struct Fallback {
    operation: Arc<str>,
    answered_by: Arc<str>,
    counts: Counts,
    metrics: FallbackMetrics,
}

impl fmt::Debug for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fallback")
            .field("operation", &self.operation)
            .field("answered_by", &self.answered_by)
            .finish()
    }
}

/// A point-in-time view of one operation's fallbacks, for dashboards.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct FallbackSnapshot {
    /// The operation (an annotated function's, named as the registry knows it: made unique by
    /// the module path, `policy_demo::service::lookup_session`).
    pub operation: Arc<str>,
    /// The operation's own name, without the module path (`lookup_session`): what a dashboard
    /// shows.
    pub display_name: Arc<str>,
    /// The function that answers, or `stale-if-error`.
    pub answered_by: Arc<str>,
    /// Answers given because the operation was refused.
    pub refused: u64,
    /// Answers given because the operation's deadline passed.
    pub expired: u64,
    /// Answers given because the operation failed (only when it asked for that).
    pub failed: u64,
    /// Stale results served.
    pub stale: u64,
}

/// Why a fallback answered, as a stable string.
fn reason_of<E>(reason: &CallError<E>) -> (&'static str, String) {
    match reason {
        CallError::Refused(refusal) => (refusal.kind().as_str(), refusal.to_string()),
        CallError::DeadlineExceeded(expired) => ("deadline_exceeded", expired.to_string()),
        CallError::Failed(_) => ("failed", "the work ran and failed".to_owned()),
    }
}

impl Fallback {
    /// A fallback for `operation`, answered by `answered_by`.
    pub fn new(operation: impl Into<Arc<str>>, answered_by: impl Into<Arc<str>>) -> Self {
        let operation = operation.into();
        Self {
            metrics: FallbackMetrics::new(crate::observe::short_name(&operation)),
            operation,
            answered_by: answered_by.into(),
            counts: Counts::default(),
        }
    }

    /// The operation's name.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// The function that answers, or `stale-if-error`.
    pub fn answered_by(&self) -> &str {
        &self.answered_by
    }

    /// Whether the fallback answers for `reason`: refusals and expiries always, the function's
    /// own failures only when `on_failure`.
    pub fn covers<E>(&self, reason: &CallError<E>, on_failure: bool) -> bool {
        on_failure || !matches!(reason, CallError::Failed(_))
    }

    /// Records (count and event) that the fallback function answers for `reason`.
    pub fn answering<E>(&self, reason: &CallError<E>) {
        let counter = match reason {
            CallError::Refused(_) => &self.counts.refused,
            CallError::DeadlineExceeded(_) => &self.counts.expired,
            CallError::Failed(_) => &self.counts.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let (kind, detail) = reason_of(reason);
        tracing::info!(
            target: "policy",
            operation = crate::observe::operation(),
            mechanism = "fallback",
            name = crate::observe::short_name(&self.operation),
            kind = "fallback",
            reason = kind,
            answered_by = &*self.answered_by,
            "`{}` answered by its fallback `{}`: {detail}",
            self.operation,
            self.answered_by
        );
        self.metrics.fallback(kind);
    }

    /// Records (count and event) that a stale result answers for `reason`.
    pub fn serving_stale<E>(&self, reason: &CallError<E>, age: std::time::Duration) {
        self.counts.stale.fetch_add(1, Ordering::Relaxed);
        let (kind, detail) = reason_of(reason);
        tracing::warn!(
            target: "policy",
            operation = crate::observe::operation(),
            mechanism = "fallback",
            name = crate::observe::short_name(&self.operation),
            kind = "stale",
            reason = kind,
            age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
            "`{}` served a stale result {} old: {detail}",
            self.operation,
            crate::error::Human(age)
        );
        self.metrics.stale(kind);
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> FallbackSnapshot {
        FallbackSnapshot {
            operation: self.operation.clone(),
            display_name: crate::observe::short_name(&self.operation).into(),
            answered_by: self.answered_by.clone(),
            refused: self.counts.refused.load(Ordering::Relaxed),
            expired: self.counts.expired.load(Ordering::Relaxed),
            failed: self.counts.failed.load(Ordering::Relaxed),
            stale: self.counts.stale.load(Ordering::Relaxed),
        }
    }
}

#[cfg(feature = "stale")]
pub use stale::StaleCache;

#[cfg(feature = "stale")]
mod stale {
    use std::hash::Hash;
    use std::time::Duration;

    use tokio::time::Instant;

    /// The last good result per set of arguments, served for at most `max_age` after it was
    /// stored (on tokio's clock), in a bounded cache (`moka`; least recently used entries go
    /// first past `capacity`).
    ///
    /// Bounded twice: at most `capacity` entries (an annotated function's cache, built by
    /// `stale_if_error`, holds 10,000 argument sets), and no entry outlives `max_age` plus a
    /// minute (a time-to-live on the wall clock, a safety net for entries nobody asks for
    /// again). Its memory is `capacity` times the size of a key and a value, plus `moka`'s
    /// bookkeeping per entry; the library soak stores a million argument sets through one
    /// function and stays flat once the first 10,000 are in.
    pub struct StaleCache<K, V> {
        max_age: Duration,
        entries: moka::sync::Cache<K, (Instant, V)>,
    }

    impl<K, V> std::fmt::Debug for StaleCache<K, V> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("StaleCache")
                .field("max_age", &self.max_age)
                .field("entries", &self.entries.entry_count())
                .finish()
        }
    }

    impl<K, V> StaleCache<K, V>
    where
        K: Hash + Eq + Send + Sync + 'static,
        V: Clone + Send + Sync + 'static,
    {
        /// A cache serving results at most `max_age` old, holding at most `capacity` entries.
        pub fn new(max_age: Duration, capacity: u64) -> Self {
            Self {
                max_age,
                entries: moka::sync::Cache::builder()
                    .max_capacity(capacity)
                    // A safety net only: ages are checked on tokio's clock in `get`.
                    .time_to_live(max_age.saturating_add(Duration::from_secs(60)))
                    .build(),
            }
        }

        /// The window a stale result may be served in.
        pub fn max_age(&self) -> Duration {
            self.max_age
        }

        /// Keeps `value` as the last good result for `key`.
        pub fn store(&self, key: K, value: V) {
            self.entries.insert(key, (Instant::now(), value));
        }

        /// The last good result for `key` and its age, if it is at most `max_age` old.
        pub fn get(&self, key: &K) -> Option<(V, Duration)> {
            let (stored, value) = self.entries.get(key)?;
            let age = stored.elapsed();
            if age <= self.max_age {
                Some((value, age))
            } else {
                self.entries.invalidate(key);
                None
            }
        }
    }
}
