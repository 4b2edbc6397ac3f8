//! The fleet rate limiter: GCRA in one Lua round trip on the Redis server's clock while Redis
//! answers, and the limiter's own [`FailMode`]s, a per-instance [`LocalRate`] by default, when
//! it does not.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::Script;

use super::{FailMode, LimiterSnapshot, LimiterSource, LocalRate, RateLimitConfig};
use crate::error::{Human, RefusalKind, RefusalReason, ResilienceError};
use crate::instruments::Refusals;
use crate::observe;
use crate::redis_store::{RedisStore, describe, hash_tag, lock};
use crate::window::{Clock, saturating_nanos};

/// The fleet's limiter, as a [`RateLimiter`](super::RateLimiter) holds it.
pub(super) type Fleet = RedisRateLimiter;

/// Where a [`RateLimiterBuilder`](super::RateLimiterBuilder) decides across the fleet.
pub(super) type Store = RedisStore;

/// The fleet limiter named `name` deciding through `store` with `config` (its rate, fail
/// modes, local rate and timeout), handed to `made` (which puts it in a
/// [`RateLimiter`](super::RateLimiter): this module names nothing of `rate_limiter`).
pub(super) fn limiter<R>(
    store: Store,
    name: Arc<str>,
    config: RateLimitConfig,
    made: impl FnOnce(Fleet) -> R,
) -> R {
    made(
        store
            .rate_limiter(name, config.limit, config.per)
            .config(config)
            .build(),
    )
}

impl RedisStore {
    /// A fleet-wide rate limiter named `name`: `limit` calls per `per`, sharing this store's
    /// connection. When Redis times out or fails it decides from a per-instance rate (the
    /// same `limit` per `per` unless told otherwise), never waiting on Redis again until Redis
    /// is back; see [`RedisRateLimiterBuilder`].
    pub fn rate_limiter(
        &self,
        name: impl Into<Arc<str>>,
        limit: u32,
        per: Duration,
    ) -> RedisRateLimiterBuilder {
        RedisRateLimiterBuilder {
            store: self.clone(),
            name: name.into(),
            config: RateLimitConfig::new(limit, per),
            probe_every: Duration::from_secs(1),
        }
    }
}

/// Builds a [`RedisRateLimiter`]; see [`RedisStore::rate_limiter`].
///
/// During an outage the limiter does not ask Redis on every call: the first call that fails
/// (at most the [`timeout`](Self::timeout)) switches it to deciding locally, every call after
/// it is decided at once with no round trip, and a background probe (a `PING`, every
/// [`probe_every`](Self::probe_every) while calls come in) switches it back when Redis
/// answers again.
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RedisRateLimiterBuilder {
    store: RedisStore,
    name: Arc<str>,
    config: RateLimitConfig,
    probe_every: Duration,
}

impl RedisRateLimiterBuilder {
    /// Every setting but the probe's at once: its rate (replacing the one it was built with),
    /// fail modes, local rate and timeout.
    pub fn config(mut self, config: RateLimitConfig) -> Self {
        self.config = config;
        self
    }

    /// What to decide when Redis answers too slowly (default [`FailMode::Local`]).
    pub fn on_timeout(mut self, mode: FailMode) -> Self {
        self.config.on_timeout = mode;
        self
    }

    /// What to decide when Redis cannot be reached (default [`FailMode::Local`]).
    pub fn on_error(mut self, mode: FailMode) -> Self {
        self.config.on_error = mode;
        self
    }

    /// How long a decision may wait for Redis (default 50 ms). The store's own
    /// [`timeout`](crate::redis_store::RedisStoreBuilder::timeout) bounds its connection too, so a decision
    /// waits at most the shorter of the two; either is an `on_timeout` decision.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config.timeout = timeout;
        self
    }

    /// The rate this instance enforces alone while Redis fails, for [`FailMode::Local`]
    /// (default: the fleet's rate, so `n` instances admit up to `n` times it in an outage).
    pub fn local_rate(mut self, limit: u32, per: Duration) -> Self {
        self.config = self.config.with_local_rate(limit, per);
        self
    }

    /// How often, while Redis fails and calls come in, a background probe checks whether it
    /// is back (default 1 s).
    pub fn probe_every(mut self, every: Duration) -> Self {
        self.probe_every = every.max(Duration::from_millis(1));
        self
    }

    /// Builds the limiter.
    pub fn build(self) -> RedisRateLimiter {
        // Fields are public: a 0 set by hand is taken as 1, as the constructors take it.
        let config = self.config.with_rate(self.config.limit, self.config.per);
        let config = match config.local_rate {
            Some((limit, per)) => config.with_local_rate(limit, per),
            None => config,
        };
        let period = saturating_nanos(config.per) / 1_000;
        let interval = (period / u64::from(config.limit)).max(1);
        let (local_limit, local_per) = config.local_rate_or_rate();
        RedisRateLimiter {
            inner: Arc::new(Inner {
                refusals: Refusals::new(
                    "rate_limiter",
                    &self.name,
                    RefusalKind::RateLimited,
                    &["rate"],
                ),
                key: format!("{}:ratelimit:{}", self.store.prefix(), hash_tag(&self.name)),
                detail: Arc::from(format!("over {} per {}", config.limit, Human(config.per))),
                local_detail: Arc::from(format!(
                    "over this instance's own {local_limit} per {} while the fleet's store is unavailable",
                    Human(local_per)
                )),
                interval_us: interval,
                tolerance_us: period.saturating_sub(interval),
                store: self.store,
                name: self.name,
                config,
                local: LocalRate::new(local_limit, local_per),
                probe_every: self.probe_every,
                gcra: Script::new(include_str!("lua/gcra.lua")),
                clock: Clock::new(),
                retry_at: AtomicU64::new(0),
                degraded_by: AtomicU8::new(Failure::Error as u8),
                probing: AtomicBool::new(false),
                last_loud_reset: std::sync::Mutex::new(None),
                stats: LimiterStats::default(),
            }),
        }
    }
}

#[derive(Debug, Default)]
struct LimiterStats {
    admitted: AtomicU64,
    refused: AtomicU64,
    failed_open: AtomicU64,
    failed_closed: AtomicU64,
    local_admitted: AtomicU64,
    local_refused: AtomicU64,
    store_calls: AtomicU64,
    probes: AtomicU64,
    resets: AtomicU64,
}

/// How the store failed: the two separate decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Failure {
    Timeout = 1,
    Error = 2,
}

impl Failure {
    fn from_u8(n: u8) -> Self {
        if n == Self::Timeout as u8 {
            Self::Timeout
        } else {
            Self::Error
        }
    }

    fn what(self) -> &'static str {
        match self {
            Self::Timeout => "the limiter's store timed out",
            Self::Error => "the limiter's store failed",
        }
    }

    fn reason(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Error => "error",
        }
    }
}

struct Inner {
    store: RedisStore,
    name: Arc<str>,
    key: String,
    detail: Arc<str>,
    local_detail: Arc<str>,
    /// Its settings, as built (the rate and the local rate at least 1).
    config: RateLimitConfig,
    interval_us: u64,
    tolerance_us: u64,
    local: LocalRate,
    probe_every: Duration,
    gcra: Script,
    clock: Clock,
    /// 0 while Redis decides; otherwise when (on `clock`) the next probe may start.
    retry_at: AtomicU64,
    /// The [`Failure`] that made the limiter decide locally.
    degraded_by: AtomicU8,
    probing: AtomicBool,
    /// When a reset of a corrupt state was last logged at WARN.
    last_loud_reset: std::sync::Mutex<Option<std::time::Instant>>,
    /// `policy_refusals_total` for this limiter (feature `metrics`).
    refusals: Refusals,
    stats: LimiterStats,
}

/// A fleet-wide rate limiter: GCRA in one Lua round trip on the Redis server's clock.
///
/// Its store's timeouts and errors are two separate decisions, each a [`FailMode`]
/// (a per-instance [`LocalRate`] by default); see the [`limiter`](crate::limiter) module.
/// Cloning is cheap and clones share state.
#[derive(Clone)]
pub struct RedisRateLimiter {
    inner: Arc<Inner>,
}

impl fmt::Debug for RedisRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &*self.inner;
        f.debug_struct("RedisRateLimiter")
            .field("name", &inner.name)
            .field("rate", &inner.detail)
            .field("on_timeout", &inner.config.on_timeout)
            .field("on_error", &inner.config.on_error)
            .field("local", &inner.local)
            .finish_non_exhaustive()
    }
}

impl RedisRateLimiter {
    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Admits one call, or refuses with a [`ResilienceError`] of kind
    /// [`RateLimited`](crate::RefusalKind::RateLimited). When Redis times out or fails, the
    /// configured [`FailMode`] decides, and keeps deciding without a round trip until a
    /// background probe finds Redis again.
    pub async fn acquire(&self) -> Result<(), ResilienceError> {
        let inner = &*self.inner;
        let retry_at = inner.retry_at.load(Ordering::Acquire);
        if retry_at != 0 {
            if inner.clock.now_nanos() >= retry_at && !inner.probing.swap(true, Ordering::AcqRel) {
                inner.stats.probes.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(probe(Arc::downgrade(&self.inner)));
            }
            return inner.fail(Failure::from_u8(inner.degraded_by.load(Ordering::Acquire)));
        }
        inner.stats.store_calls.fetch_add(1, Ordering::Relaxed);
        let mut conn = inner.store.conn().clone();
        let mut call = inner.gcra.prepare_invoke();
        call.key(&inner.key)
            .arg(inner.interval_us)
            .arg(inner.tolerance_us);
        let reply = tokio::time::timeout(
            inner.config.timeout,
            call.invoke_async::<(i64, i64, i64)>(&mut conn),
        )
        .await;
        if let Ok(Ok((_, _, 1))) = reply {
            inner.corrupt_state_reset();
        }
        match reply {
            Ok(Ok((1, _, _))) => {
                inner.store.recovered();
                inner.stats.admitted.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Ok(Ok((_, wait_us, _))) => {
                inner.store.recovered();
                inner.stats.refused.fetch_add(1, Ordering::Relaxed);
                // The script never asks for more than the period; neither does this, whatever
                // the reply says.
                let wait = Duration::from_micros(wait_us.unsigned_abs()).min(inner.config.per);
                let refusal = ResilienceError::new(
                    inner.name.clone(),
                    RefusalReason::RateLimited {
                        retry_after: Some(wait),
                        detail: inner.detail.clone(),
                    },
                );
                observe::refused(&refusal);
                inner.refusals.count("rate");
                Err(refusal)
            }
            Ok(Err(error)) => {
                inner.store.unhealthy(&describe(&error));
                // The connection's own response timeout (the store's) is a timeout too.
                let failure = if error.is_timeout() {
                    Failure::Timeout
                } else {
                    Failure::Error
                };
                inner.degrade(failure);
                inner.fail(failure)
            }
            Err(_) => {
                inner.store.unhealthy("timed out");
                inner.degrade(Failure::Timeout);
                inner.fail(Failure::Timeout)
            }
        }
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> LimiterSnapshot {
        let s = &self.inner.stats;
        LimiterSnapshot {
            name: self.inner.name.clone(),
            scope: "fleet",
            config: self.inner.config,
            admitted: s.admitted.load(Ordering::Relaxed),
            refused: s.refused.load(Ordering::Relaxed),
            failed_open: s.failed_open.load(Ordering::Relaxed),
            failed_closed: s.failed_closed.load(Ordering::Relaxed),
            local_admitted: s.local_admitted.load(Ordering::Relaxed),
            local_refused: s.local_refused.load(Ordering::Relaxed),
            store_calls: s.store_calls.load(Ordering::Relaxed),
            probes: s.probes.load(Ordering::Relaxed),
            store_resets: s.resets.load(Ordering::Relaxed),
            degraded: self.inner.retry_at.load(Ordering::Relaxed) != 0,
        }
    }
}

impl Inner {
    /// Counts a corrupt state the script found and reset (a value that was not a number, or
    /// further ahead than one period), and logs it: WARN for the first and then at most once a
    /// minute, DEBUG otherwise, so a writer repeating it cannot flood the logs.
    fn corrupt_state_reset(&self) {
        let resets = self.stats.resets.fetch_add(1, Ordering::Relaxed) + 1;
        let loud = {
            let mut last = lock(&self.last_loud_reset);
            let loud = last.is_none_or(|at| at.elapsed() >= Duration::from_secs(60));
            if loud {
                *last = Some(std::time::Instant::now());
            }
            loud
        };
        macro_rules! event {
            ($level:ident) => {
                tracing::$level!(
                    target: "policy",
                    mechanism = "rate_limiter",
                    kind = "limiter_state_reset",
                    name = &*self.name,
                    reason = "corrupt_state",
                    resets,
                    "rate limiter `{}` found its state in redis corrupt (not a number, or beyond one period ahead) and reset it",
                    self.name
                )
            };
        }
        if loud {
            event!(warn);
        } else {
            event!(debug);
        }
    }

    /// Stops asking Redis until a probe after `probe_every` finds it again; logs the switch
    /// once.
    fn degrade(&self, failure: Failure) {
        self.degraded_by.store(failure as u8, Ordering::Release);
        let retry_at = self
            .clock
            .now_nanos()
            .saturating_add(saturating_nanos(self.probe_every))
            .max(1);
        if self.retry_at.swap(retry_at, Ordering::AcqRel) == 0 {
            let mode = match failure {
                Failure::Timeout => self.config.on_timeout,
                Failure::Error => self.config.on_error,
            };
            tracing::warn!(
                target: "policy",
                mechanism = "rate_limiter",
                kind = "limiter_degraded",
                name = &*self.name,
                reason = failure.reason(),
                mode = %mode,
                "rate limiter `{}` decides without redis ({}): {}",
                self.name,
                failure.what(),
                match mode {
                    FailMode::Open => "admitting every call",
                    FailMode::Closed => "refusing every call",
                    FailMode::Local => "this instance enforces its own rate",
                }
            );
        }
    }

    fn recovered(&self) {
        if self.retry_at.swap(0, Ordering::AcqRel) != 0 {
            tracing::info!(
                target: "policy",
                mechanism = "rate_limiter",
                kind = "limiter_recovered",
                name = &*self.name,
                reason = "reachable",
                "rate limiter `{}` decides with redis again",
                self.name
            );
        }
    }

    fn fail(&self, failure: Failure) -> Result<(), ResilienceError> {
        let mode = match failure {
            Failure::Timeout => self.config.on_timeout,
            Failure::Error => self.config.on_error,
        };
        let what = failure.what();
        let refusal = |retry_after, detail| {
            let refusal = ResilienceError::new(
                self.name.clone(),
                RefusalReason::RateLimited {
                    retry_after,
                    detail,
                },
            );
            observe::refused(&refusal);
            self.refusals.count("rate");
            Err(refusal)
        };
        match mode {
            FailMode::Open => {
                self.stats.failed_open.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    target: "policy",
                    mechanism = "rate_limiter",
                    kind = "limiter_failed_open",
                    name = &*self.name,
                    reason = failure.reason(),
                    "rate limiter `{}` admits the call: {what} and it fails open",
                    self.name
                );
                Ok(())
            }
            FailMode::Closed => {
                self.stats.failed_closed.fetch_add(1, Ordering::Relaxed);
                refusal(None, Arc::from(format!("{what} and it fails closed")))
            }
            FailMode::Local => match self.local.check() {
                Ok(()) => {
                    self.stats.local_admitted.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                }
                Err(wait) => {
                    self.stats.local_refused.fetch_add(1, Ordering::Relaxed);
                    refusal(Some(wait), self.local_detail.clone())
                }
            },
        }
    }
}

/// Checks, off every caller's path, whether Redis answers again.
async fn probe(inner: Weak<Inner>) {
    let Some(inner) = inner.upgrade() else {
        return;
    };
    let mut conn = inner.store.conn().clone();
    let reply = tokio::time::timeout(
        inner.config.timeout,
        redis::cmd("PING").query_async::<String>(&mut conn),
    )
    .await;
    match reply {
        Ok(Ok(_)) => {
            inner.store.recovered();
            inner.recovered();
        }
        Ok(Err(error)) if error.is_timeout() => inner.degrade(Failure::Timeout),
        Ok(Err(_)) => inner.degrade(Failure::Error),
        Err(_) => inner.degrade(Failure::Timeout),
    }
    inner.probing.store(false, Ordering::Release);
}

impl LimiterSource for RedisRateLimiter {
    fn limiter_snapshot(&self) -> LimiterSnapshot {
        self.snapshot()
    }
}
