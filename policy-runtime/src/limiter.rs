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
//! Each is one of three [`FailMode`]s:
//!
//! - [`FailMode::Local`] (the default): this instance enforces a rate of its own
//!   (`LocalRate`, with the `redis` feature), so an outage of the store degrades the fleet-wide limit to a
//!   per-instance one, neither all admitted nor all refused. With `n` instances the fleet then
//!   admits up to `n` times the local rate: set it to the fleet's rate divided by the usual
//!   number of instances when that matters.
//! - [`FailMode::Open`] (admit: the limiter guards best-effort work, and failing closed would
//!   merely delete a feature).
//! - [`FailMode::Closed`] (refuse: the limiter guards unbounded work, and failing open would
//!   unleash it).
//!
//! The seed keeps timeout and error separate because a slow store and a dead store are
//! different situations for the same capability.
//!
//! Its refusals are [`ResilienceError`](crate::ResilienceError)s of kind
//! [`RateLimited`](crate::RefusalKind::RateLimited).

use std::sync::Arc;

use serde::Serialize;

#[cfg(feature = "redis")]
pub use crate::redis_store::{RedisRateLimiter, RedisRateLimiterBuilder};

/// What a limiter decides when its store fails: one type with the `.policy` language's
/// `on_timeout` and `on_error` (defined in `policy-model`).
pub use policy_model::FailMode;

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
    /// Calls admitted by the local rate because the store failed ([`FailMode::Local`]).
    pub local_admitted: u64,
    /// Calls refused by the local rate because the store failed ([`FailMode::Local`]).
    pub local_refused: u64,
    /// Round trips to the store made on a caller's behalf.
    pub store_calls: u64,
    /// Background checks of whether the store is back.
    pub probes: u64,
    /// Whether the limiter is deciding without the store now.
    pub degraded: bool,
}

impl LimiterSnapshot {
    /// A view of the limiter `name` with every counter at zero: the start for a
    /// [`LimiterSource`](crate::registry::LimiterSource) of your own, which sets the fields it
    /// counts.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self {
            name: name.into(),
            admitted: 0,
            refused: 0,
            failed_open: 0,
            failed_closed: 0,
            local_admitted: 0,
            local_refused: 0,
            store_calls: 0,
            probes: 0,
            degraded: false,
        }
    }
}

#[cfg(feature = "redis")]
pub use local::LocalRate;

#[cfg(feature = "redis")]
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
            let interval = (per / burst.get()).max(Duration::from_nanos(1));
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
