//! May this capability run once more in this period? A rate limiter.
//!
//! A bulkhead bounds how many calls run at once; a rate limiter bounds how many start per
//! period (sign ups per minute, calls to a provider with a quota). [`RateLimiter`] is one
//! named limiter with one state, whichever interface names it: the attributes
//! (`ratelimit = "signups"`), a `.policy` operation (`ratelimit = signups`), the tower layer
//! ([`RateLimitLayer`](crate::layer::RateLimitLayer)) and hand-written code share the
//! [registry](crate::Registry::rate_limiter)'s entry. It decides in one of two places:
//!
//! - **In this process** (the default): GCRA from the `governor` crate on tokio's clock, a
//!   burst of the whole `limit`, then one call every `per / limit`. Admitting is one
//!   compare-and-swap on one atomic and allocates nothing; a refusal says when the next call
//!   would be admitted. It bounds **one instance**: ten instances admit ten times the rate.
//! - **Across the fleet**, when a Redis store is set for limiters
//!   ([`Registry::set_limiter_store`](crate::Registry::set_limiter_store), feature `redis`):
//!   the same GCRA in one Lua round trip on the Redis server's clock ([`RedisRateLimiter`]).
//!
//! A refused call is a [`ResilienceError`](crate::ResilienceError) of kind
//! [`RateLimited`](crate::RefusalKind::RateLimited) whose
//! [`retry_after`](crate::ResilienceError::retry_after) is the wait that would admit it
//! (`retry_after_ms` in JSON and in the refusal's event): the work never ran.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::{RefusalKind, Registry};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let registry = Registry::new();
//! let signups = registry.rate_limiter("signups", 2, Duration::from_secs(1), |l| l);
//! signups.acquire().await.unwrap();
//! signups.acquire().await.unwrap();
//! let refusal = signups.acquire().await.unwrap_err();
//! assert_eq!(refusal.kind(), RefusalKind::RateLimited);
//! assert_eq!(refusal.retry_after(), Some(Duration::from_millis(500)));
//! assert_eq!(registry.snapshot().limiters[0].refused, 1);
//! # }
//! ```
//!
//! # When the fleet's store fails
//!
//! A fleet limiter's own failure is a decision to take in advance, and there are two of them:
//!
//! - **`on_timeout`**: the store answered too slowly.
//! - **`on_error`**: the store could not be reached at all.
//!
//! Each is one of three [`FailMode`]s:
//!
//! - [`FailMode::Local`] (the default): this instance enforces a rate of its own
//!   (`LocalRate`), so an outage of the store degrades the fleet-wide limit to a
//!   per-instance one, neither all admitted nor all refused. With `n` instances the fleet then
//!   admits up to `n` times the local rate: set it to the fleet's rate divided by the usual
//!   number of instances when that matters.
//! - [`FailMode::Open`] (admit: the limiter guards best-effort work, and failing closed would
//!   merely delete a feature).
//! - [`FailMode::Closed`] (refuse: the limiter guards unbounded work, and failing open would
//!   unleash it).
//!
//! The seed keeps timeout and error separate because a slow store and a dead store are
//! different situations for the same capability. A `.policy` limiter that guards critical work
//! must choose both explicitly (`policy::ratelimit-fail-mode-unset`). An in-process limiter has
//! no store, so it never needs either.
//!
//! A limiter's settings, its rate, fail modes, local rate and timeout, are one plain value,
//! [`RateLimitConfig`] (a `ratelimit` stanza's, built in a `const`; the expansions declare
//! theirs so): [`RateLimiter::from_config`], or [`RateLimiterBuilder::config`] in the
//! registry's builder, and the snapshot's `config`.

use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "redis")]
pub use fleet::{RedisRateLimiter, RedisRateLimiterBuilder};

/// What a limiter decides when its store fails: one type with the `.policy` language's
/// `on_timeout` and `on_error` (defined in `velocity-policy-model`).
pub use velocity_policy_model::FailMode;
/// A limiter's settings: one type with the `.policy` language's `ratelimit` stanza (defined
/// in `velocity-policy-model`).
pub use velocity_policy_model::rate_limit::RateLimitConfig;

/// A point-in-time view of a rate limiter, for dashboards.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LimiterSnapshot {
    /// The limiter's name.
    pub name: Arc<str>,
    /// `in_process` or `fleet` (through the Redis store).
    pub scope: &'static str,
    /// Its configuration: its rate (a `limit` of 0 when a [`LimiterSource`] of your own does
    /// not say), and what a fleet limiter decides when its store fails.
    pub config: RateLimitConfig,
    /// Calls admitted by the rate (in this process, or by the store's decision).
    pub admitted: u64,
    /// Calls refused for being over the rate.
    pub refused: u64,
    /// Calls admitted because the store failed and the limiter fails open.
    pub failed_open: u64,
    /// Calls refused because the store failed and the limiter fails closed.
    pub failed_closed: u64,
    /// Calls admitted by the local rate because the store failed ([`FailMode::Local`]).
    pub local_admitted: u64,
    /// Calls refused by the local rate because the store failed ([`FailMode::Local`]).
    pub local_refused: u64,
    /// Round trips to the store made on a caller's behalf.
    pub store_calls: u64,
    /// Background checks of whether the store is back.
    pub probes: u64,
    /// States found corrupt in the store and reset: a value that was not a number, or further
    /// ahead than one period (what a writer to the store would set to hold the limiter shut).
    pub store_resets: u64,
    /// Whether the limiter is deciding without the store now.
    pub degraded: bool,
}

impl LimiterSnapshot {
    /// A view of the limiter `name` with every counter at zero, in process, with no rate (a
    /// `config` whose `limit` is 0): the start for a [`LimiterSource`] of your own, which sets
    /// the fields it knows (its `config`, its counts).
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        let mut config = RateLimitConfig::new(1, Duration::ZERO);
        config.limit = 0;
        Self {
            name: name.into(),
            scope: "in_process",
            config,
            admitted: 0,
            refused: 0,
            failed_open: 0,
            failed_closed: 0,
            local_admitted: 0,
            local_refused: 0,
            store_calls: 0,
            probes: 0,
            store_resets: 0,
            degraded: false,
        }
    }
}

/// Anything that reports a [`LimiterSnapshot`]: a rate limiter of your own registers itself
/// with [`Registry::register_limiter`](crate::Registry::register_limiter) to appear in the
/// snapshot. (The runtime's own [rate limiters](RateLimiter) are there by
/// name already: [`Registry::rate_limiter`](crate::Registry::rate_limiter).)
pub trait LimiterSource: Send + Sync + std::fmt::Debug + 'static {
    /// The limiter's state now.
    fn limiter_snapshot(&self) -> LimiterSnapshot;
}

pub use local::LocalRate;
pub use rate_limiter::{RateLimiter, RateLimiterBuilder};

mod rate_limiter;

// The fleet form (feature `redis`): the same GCRA in one Lua round trip on the store; without
// the feature, a stand-in whose types have no values. Chosen here, once.
#[cfg_attr(not(feature = "redis"), path = "limiter/no_fleet.rs")]
mod fleet;

mod local {
    use std::fmt;
    use std::num::NonZeroU32;
    use std::time::Duration;

    use governor::clock::Clock;
    use governor::middleware::NoOpMiddleware;
    use governor::nanos::Nanos;
    use governor::state::{InMemoryState, NotKeyed};
    use governor::{Quota, RateLimiter};

    /// tokio's clock for governor, so a paused test clock drives the local rate too.
    #[derive(Debug, Clone, Copy)]
    struct TokioClock {
        origin: tokio::time::Instant,
    }

    impl Clock for TokioClock {
        type Instant = Nanos;

        fn now(&self) -> Nanos {
            Nanos::from(self.origin.elapsed())
        }
    }

    /// `limit` calls per `per` on this instance alone: GCRA from the `governor` crate, on
    /// tokio's clock, with a burst of the whole `limit` (the same rule the fleet limiter's Lua
    /// script applies in Redis). Checking is lock-free and allocates nothing.
    pub struct LocalRate {
        limiter: RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Nanos>>,
        clock: TokioClock,
        limit: u32,
        per: Duration,
    }

    impl fmt::Debug for LocalRate {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("LocalRate")
                .field("limit", &self.limit)
                .field("per", &self.per)
                .finish_non_exhaustive()
        }
    }

    impl LocalRate {
        /// `limit` calls (at least 1) per `per` (at least 1 ns per call).
        pub fn new(limit: u32, per: Duration) -> Self {
            let burst = NonZeroU32::new(limit).unwrap_or(NonZeroU32::MIN);
            // governor counts in u64 nanoseconds (584 years): a longer period (`Duration::MAX`
            // included) is its longest, rather than a panic.
            let period = per.min(Duration::from_nanos(u64::MAX / 2));
            let interval = (period / burst.get()).max(Duration::from_nanos(1));
            let quota = Quota::with_period(interval)
                .unwrap_or_else(|| Quota::per_second(burst))
                .allow_burst(burst);
            let clock = TokioClock {
                origin: tokio::time::Instant::now(),
            };
            Self {
                limiter: RateLimiter::direct_with_clock(quota, clock),
                clock,
                limit: burst.get(),
                per,
            }
        }

        /// Admits one call, or says how long until one would be admitted.
        pub fn check(&self) -> Result<(), Duration> {
            self.limiter
                .check()
                .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
        }

        /// Calls per period.
        pub fn limit(&self) -> u32 {
            self.limit
        }

        /// The period.
        pub fn per(&self) -> Duration {
            self.per
        }
    }

    #[cfg(test)]
    mod tests {
        #![allow(clippy::unwrap_used, reason = "test code")]

        use super::*;

        #[tokio::test(start_paused = true)]
        async fn admits_its_rate_with_the_whole_burst_and_refuses_beyond_it() {
            let rate = LocalRate::new(3, Duration::from_secs(60));
            for _ in 0..3 {
                rate.check().unwrap();
            }
            assert_eq!(rate.check(), Err(Duration::from_secs(20)));
            tokio::time::advance(Duration::from_secs(20)).await;
            rate.check().unwrap();
            assert!(rate.check().is_err());
        }
    }
}
