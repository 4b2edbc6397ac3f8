//! [`RateLimiter`]: one named limiter, deciding in this process or through the fleet's store.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[cfg(feature = "redis")]
use super::RedisRateLimiter;
use super::fleet::{self, Fleet, Store};
use super::{LimiterSnapshot, LocalRate, RateLimitConfig};
use crate::error::{Human, RefusalKind, RefusalReason, ResilienceError};
use crate::instruments::Refusals;
use crate::observe;

/// A named rate limiter: `limit` calls per `per`, in this process or, with a store, across the
/// fleet; see the [module docs](super).
///
/// Cloning is cheap and clones share state. Take it from the
/// [`Registry`](crate::Registry::rate_limiter) so that the attributes, the `.policy`
/// operations and the [layer](crate::layer::RateLimitLayer) that name it share one state.
#[derive(Clone)]
pub struct RateLimiter {
    inner: Arc<Inner>,
}

struct Inner {
    name: Arc<str>,
    /// Its settings, as built (the rate and the local rate at least 1).
    config: RateLimitConfig,
    decides: Decides,
}

enum Decides {
    /// GCRA on this instance, with its own counts.
    InProcess {
        rate: LocalRate,
        detail: Arc<str>,
        admitted: AtomicU64,
        refused: AtomicU64,
        /// `policy_refusals_total` for this limiter (feature `metrics`).
        refusals: Refusals,
    },
    /// GCRA in Redis, with the fleet limiter's own counts and fail modes (feature `redis`;
    /// without it, `Fleet` has no value).
    Fleet(Fleet),
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("name", &self.inner.name)
            .field("limit", &self.inner.config.limit)
            .field("per", &self.inner.config.per)
            .field("scope", &self.scope())
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A limiter named `name` admitting `limit` calls (at least 1) per `per`, in this process
    /// unless the builder is given a [store](RateLimiterBuilder::fleet); the rest of its
    /// settings are [`RateLimitConfig::new`]'s until [`config`](RateLimiterBuilder::config)
    /// replaces them.
    pub fn builder(name: impl Into<Arc<str>>, limit: u32, per: Duration) -> RateLimiterBuilder {
        Self::from_config(name, RateLimitConfig::new(limit, per))
    }

    /// A limiter named `name` with `config`: its rate and, for a fleet limiter, its fail
    /// modes, local rate and timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// use velocity_policy_runtime::limiter::{FailMode, RateLimitConfig, RateLimiter};
    ///
    /// const SIGNUPS: RateLimitConfig = RateLimitConfig::new(100, Duration::from_secs(60))
    ///     .with_on_timeout(FailMode::Closed)
    ///     .with_on_error(FailMode::Closed);
    /// let signups = RateLimiter::from_config("signups", SIGNUPS).build();
    /// assert_eq!(signups.config(), SIGNUPS);
    /// assert_eq!(signups.scope(), "in_process");
    /// ```
    pub fn from_config(name: impl Into<Arc<str>>, config: RateLimitConfig) -> RateLimiterBuilder {
        RateLimiterBuilder {
            name: name.into(),
            config,
            store: None,
        }
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Calls allowed per period.
    pub fn limit(&self) -> u32 {
        self.inner.config.limit
    }

    /// The period.
    pub fn per(&self) -> Duration {
        self.inner.config.per
    }

    /// Its settings (an in-process limiter has no store, and its fail modes, local rate and
    /// timeout never apply).
    pub fn config(&self) -> RateLimitConfig {
        self.inner.config
    }

    /// `in_process` or `fleet`.
    pub fn scope(&self) -> &'static str {
        match &self.inner.decides {
            Decides::InProcess { .. } => "in_process",
            Decides::Fleet(_) => "fleet",
        }
    }

    /// Admits one call, or refuses it with a [`ResilienceError`] of kind
    /// [`RateLimited`](crate::RefusalKind::RateLimited) carrying the wait that would admit it.
    ///
    /// In process it never waits: the future is ready at its first poll. A fleet limiter waits
    /// for its store at most its [timeout](crate::limiter::RedisRateLimiterBuilder::timeout)
    /// (50 ms by default), then its `on_timeout` or `on_error` decides.
    pub async fn acquire(&self) -> Result<(), ResilienceError> {
        match self.decide_now() {
            Some(decision) => decision,
            None => match &self.inner.decides {
                Decides::Fleet(fleet) => fleet.acquire().await,
                Decides::InProcess { .. } => Ok(()),
            },
        }
    }

    /// The decision, when it can be made without a round trip: always in process, never for a
    /// fleet limiter (`None`: ask [`acquire`](Self::acquire)).
    #[inline]
    pub fn decide_now(&self) -> Option<Result<(), ResilienceError>> {
        match &self.inner.decides {
            Decides::InProcess {
                rate,
                detail,
                admitted,
                refused,
                refusals,
            } => Some(match rate.check() {
                Ok(()) => {
                    admitted.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                }
                Err(wait) => {
                    refused.fetch_add(1, Ordering::Relaxed);
                    refusals.count("rate");
                    let refusal = ResilienceError::new(
                        self.inner.name.clone(),
                        RefusalReason::RateLimited {
                            retry_after: Some(wait),
                            detail: detail.clone(),
                        },
                    );
                    observe::refused(&refusal);
                    Err(refusal)
                }
            }),
            Decides::Fleet(_) => None,
        }
    }

    /// The fleet limiter behind this one, when it decides through the store.
    #[cfg(feature = "redis")]
    pub fn fleet(&self) -> Option<&RedisRateLimiter> {
        match &self.inner.decides {
            Decides::Fleet(fleet) => Some(fleet),
            Decides::InProcess { .. } => None,
        }
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> LimiterSnapshot {
        let inner = &*self.inner;
        match &inner.decides {
            Decides::InProcess {
                admitted, refused, ..
            } => LimiterSnapshot {
                name: inner.name.clone(),
                scope: "in_process",
                config: inner.config,
                admitted: admitted.load(Ordering::Relaxed),
                refused: refused.load(Ordering::Relaxed),
                failed_open: 0,
                failed_closed: 0,
                local_admitted: 0,
                local_refused: 0,
                store_calls: 0,
                probes: 0,
                store_resets: 0,
                degraded: false,
            },
            Decides::Fleet(fleet) => fleet.snapshot(),
        }
    }
}

impl super::LimiterSource for RateLimiter {
    fn limiter_snapshot(&self) -> LimiterSnapshot {
        self.snapshot()
    }
}

/// Builds a [`RateLimiter`]; see [`RateLimiter::builder`] and [`RateLimiter::from_config`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RateLimiterBuilder {
    name: Arc<str>,
    config: RateLimitConfig,
    /// The fleet's store, when it decides there (feature `redis`).
    store: Option<Store>,
}

impl RateLimiterBuilder {
    /// Every setting at once, the rate included: see [`RateLimitConfig`]. Its fail modes,
    /// local rate and timeout are a fleet limiter's; an in-process limiter has no store and
    /// ignores them.
    pub fn config(mut self, config: RateLimitConfig) -> Self {
        self.config = config;
        self
    }

    /// Decides across the fleet through `store` (feature `redis`), with this builder's fail
    /// modes and local rate, instead of in this process.
    #[cfg(feature = "redis")]
    pub fn fleet(mut self, store: crate::redis_store::RedisStore) -> Self {
        self.store = Some(store);
        self
    }

    /// Builds the limiter.
    pub fn build(self) -> RateLimiter {
        // Fields are public: a 0 set by hand is taken as 1, as the constructors take it.
        let config = self.config.with_rate(self.config.limit, self.config.per);
        let config = match config.local_rate {
            Some((limit, per)) => config.with_local_rate(limit, per),
            None => config,
        };
        if let Some(store) = self.store {
            return fleet::limiter(store, self.name.clone(), config, |fleet| RateLimiter {
                inner: Arc::new(Inner {
                    decides: Decides::Fleet(fleet),
                    name: self.name,
                    config,
                }),
            });
        }
        // Without a store there is nothing to time out or fail: one rate, on this instance.
        RateLimiter {
            inner: Arc::new(Inner {
                decides: Decides::InProcess {
                    rate: LocalRate::new(config.limit, config.per),
                    detail: Arc::from(format!(
                        "over {} per {} on this instance",
                        config.limit,
                        Human(config.per)
                    )),
                    admitted: AtomicU64::new(0),
                    refused: AtomicU64::new(0),
                    refusals: Refusals::new(
                        "rate_limiter",
                        &self.name,
                        RefusalKind::RateLimited,
                        &["rate"],
                    ),
                },
                name: self.name,
                config,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn admits_n_per_second_then_refuses_with_the_wait_then_refills() {
        let limiter = RateLimiter::builder("signups", 5, Duration::from_secs(1)).build();
        for _ in 0..5 {
            limiter.acquire().await.unwrap();
        }
        let refusal = limiter.acquire().await.unwrap_err();
        assert_eq!(refusal.kind(), RefusalKind::RateLimited);
        assert_eq!(refusal.name(), "signups");
        // One call every 200 ms: the next is admitted 200 ms after the burst.
        assert_eq!(refusal.retry_after(), Some(Duration::from_millis(200)));
        assert_eq!(
            refusal.to_string(),
            "rate limiter `signups` refused the call: over 5 per 1s on this instance; a slot frees in 200ms"
        );
        tokio::time::advance(Duration::from_millis(150)).await;
        let refusal = limiter.acquire().await.unwrap_err();
        assert_eq!(refusal.retry_after(), Some(Duration::from_millis(50)));
        tokio::time::advance(Duration::from_millis(50)).await;
        limiter.acquire().await.unwrap();
        assert!(limiter.acquire().await.is_err());
        // A whole period refills the whole burst, and no more.
        tokio::time::advance(Duration::from_secs(1)).await;
        for _ in 0..5 {
            limiter.acquire().await.unwrap();
        }
        assert!(limiter.acquire().await.is_err());
        let snapshot = limiter.snapshot();
        assert_eq!(
            (snapshot.admitted, snapshot.refused, snapshot.scope),
            (11, 4, "in_process")
        );
        assert_eq!(
            (snapshot.config.limit, snapshot.config.per),
            (5, Duration::from_secs(1))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_config_builds_the_limiter_its_rate_says_with_a_zero_taken_as_one() {
        let mut config = RateLimitConfig::new(3, Duration::from_secs(1))
            .with_on_error(super::super::FailMode::Closed);
        let limiter = RateLimiter::builder("api", 9, Duration::from_secs(9))
            .config(config)
            .build();
        assert_eq!(
            (limiter.limit(), limiter.per()),
            (3, Duration::from_secs(1))
        );
        assert_eq!(limiter.config(), config);
        for _ in 0..3 {
            limiter.acquire().await.unwrap();
        }
        assert!(limiter.acquire().await.is_err());
        // Fields are public: a rate of 0 set by hand is one call per period, as the builder's.
        config.limit = 0;
        config.local_rate = Some((0, Duration::from_secs(1)));
        let limiter = RateLimiter::from_config("zero", config).build();
        assert_eq!(limiter.limit(), 1);
        assert_eq!(
            limiter.config().local_rate,
            Some((1, Duration::from_secs(1)))
        );
        assert_eq!(limiter.snapshot().config, limiter.config());
    }

    #[cfg(feature = "serde")]
    #[tokio::test(start_paused = true)]
    async fn clones_share_one_state_and_the_refusal_serialises_its_wait_in_ms() {
        let limiter = RateLimiter::builder("api", 1, Duration::from_secs(2)).build();
        let clone = limiter.clone();
        limiter.decide_now().unwrap().unwrap();
        let refusal = clone.decide_now().unwrap().unwrap_err();
        let json = serde_json::to_value(&refusal).unwrap();
        assert_eq!(json["reason"], "rate_limited");
        assert_eq!(json["name"], "api");
        assert_eq!(json["retry_after_ms"], 2000.0);
        assert_eq!(limiter.snapshot().refused, 1);
    }
}
