//! May this capability run once more in this period, fleet-wide? A rate limiter.
//!
//! A bulkhead bounds one instance; some capabilities need a rate across the whole fleet (sign
//! ups per minute, calls to a provider with a global quota). The limiter keeps its state in a
//! shared store ([`RedisRateLimiter`] with the `redis` feature), so its own failure is a
//! decision to take in advance, and there are two of them:
//!
//! - **`on_timeout`**: the store answered too slowly.
//! - **`on_error`**: the store could not be reached at all.
//!
//! Each is [`FailMode::Open`] (admit: the limiter guards best-effort work, and failing closed
//! would merely delete a feature) or [`FailMode::Closed`] (refuse: the limiter guards unbounded
//! work, and failing open would unleash it). The seed keeps them separate because a slow store
//! and a dead store are different situations for the same capability.
//!
//! Its refusals are [`ResilienceError`](crate::ResilienceError)s of kind
//! [`RateLimited`](crate::RefusalKind::RateLimited).

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

#[cfg(feature = "redis")]
pub use crate::redis_store::RedisRateLimiter;

/// What a limiter decides when its store fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailMode {
    /// Admit the call: for a limiter guarding best-effort work.
    Open,
    /// Refuse the call: for a limiter guarding unbounded work.
    Closed,
}

impl fmt::Display for FailMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Open => "open",
            Self::Closed => "closed",
        })
    }
}

/// A point-in-time view of a rate limiter, for dashboards.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct LimiterSnapshot {
    /// The limiter's name.
    pub name: Arc<str>,
    /// Calls admitted by the store's decision.
    pub admitted: u64,
    /// Calls refused for being over the rate.
    pub refused: u64,
    /// Calls admitted because the store failed and the limiter fails open.
    pub failed_open: u64,
    /// Calls refused because the store failed and the limiter fails closed.
    pub failed_closed: u64,
}
