//! A rate limiter's settings: [`RateLimitConfig`], its rate and what it decides when the
//! fleet's store fails ([`FailMode`]).
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_model::{FailMode, RateLimitConfig};
//!
//! // `ratelimit signups { 100 per 1m; on_timeout = closed; on_error = local; local_rate = 20 per 1m }`
//! const SIGNUPS: RateLimitConfig = RateLimitConfig::new(100, Duration::from_secs(60))
//!     .with_on_timeout(FailMode::Closed)
//!     .with_on_error(FailMode::Local)
//!     .with_local_rate(20, Duration::from_secs(60));
//! assert_eq!(SIGNUPS.local_rate_or_rate(), (20, Duration::from_secs(60)));
//! assert_eq!(SIGNUPS.timeout, RateLimitConfig::DEFAULT_TIMEOUT);
//!
//! // `ratelimit api { 10 per 1s }`: both fail modes left to the default, this instance's own
//! // rate, which is the fleet's.
//! const API: RateLimitConfig = RateLimitConfig::new(10, Duration::from_secs(1));
//! assert_eq!(API.on_timeout, FailMode::Local);
//! assert_eq!(API.local_rate_or_rate(), (10, Duration::from_secs(1)));
//! ```

use std::time::Duration;

use crate::FailMode;

/// A rate limiter's settings: `ratelimit NAME { 100 per 1m; on_timeout = closed; on_error =
/// local; local_rate = 20 per 1m }`, the expansion's limiter, the runtime's
/// `RateLimiter::from_config(name, ..)` (or `RateLimiterBuilder::config(..)`) and the
/// dashboard's `config`.
///
/// `limit` calls per `per`, in one instance, or across the fleet when the runtime has a
/// store for its limiters; the fail modes, the local rate and the timeout matter only then.
/// It has no default: a rate is always chosen. Build one in a `const` with
/// [`RateLimitConfig::new`] and the `with_` setters; fields are public to read.
///
/// It has no table of optional numbers ([`Setting`](crate::Setting)): its fail modes are
/// words, its local rate is a rate, and its timeout is not written in the language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RateLimitConfig {
    /// Calls allowed per period (`100 per 1m`'s `100`; at least 1): also the burst, all of
    /// it admitted at once after a quiet period.
    pub limit: u32,
    /// The period (`100 per 1m`'s `1m`).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "per_ms", serialize_with = "crate::json::millis")
    )]
    pub per: Duration,
    /// What a fleet limiter decides when its store answers too slowly (`on_timeout`; default
    /// [`RateLimitConfig::DEFAULT_FAIL_MODE`]).
    pub on_timeout: FailMode,
    /// What a fleet limiter decides when its store cannot be reached (`on_error`; default
    /// [`RateLimitConfig::DEFAULT_FAIL_MODE`]).
    pub on_error: FailMode,
    /// The rate, `(limit, per)`, this instance enforces alone while the store fails, for
    /// [`FailMode::Local`] (`local_rate`; default `None`: the fleet's rate, so `n` instances
    /// admit up to `n` times it in an outage).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::rate_opt"))]
    pub local_rate: Option<(u32, Duration)>,
    /// How long a fleet limiter's decision may wait for its store before `on_timeout` decides
    /// (default [`RateLimitConfig::DEFAULT_TIMEOUT`]; not written in the language).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "timeout_ms", serialize_with = "crate::json::millis")
    )]
    pub timeout: Duration,
}

impl RateLimitConfig {
    /// What a fail mode is when none is chosen: [`FailMode::Local`], this instance's own rate.
    pub const DEFAULT_FAIL_MODE: FailMode = FailMode::Local;

    /// How long a decision waits for the store unless told otherwise: 50 ms.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);

    /// `limit` calls (0 is taken as 1) per `per`; both fail modes
    /// [`DEFAULT_FAIL_MODE`](Self::DEFAULT_FAIL_MODE), the local rate the fleet's, the store
    /// waited for at most [`DEFAULT_TIMEOUT`](Self::DEFAULT_TIMEOUT).
    #[must_use]
    pub const fn new(limit: u32, per: Duration) -> Self {
        Self {
            limit: if limit == 0 { 1 } else { limit },
            per,
            on_timeout: Self::DEFAULT_FAIL_MODE,
            on_error: Self::DEFAULT_FAIL_MODE,
            local_rate: None,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }

    /// With `limit` calls (0 is taken as 1) per `per`.
    #[must_use]
    pub const fn with_rate(mut self, limit: u32, per: Duration) -> Self {
        self.limit = if limit == 0 { 1 } else { limit };
        self.per = per;
        self
    }

    /// Deciding `mode` when the store answers too slowly.
    #[must_use]
    pub const fn with_on_timeout(mut self, mode: FailMode) -> Self {
        self.on_timeout = mode;
        self
    }

    /// Deciding `mode` when the store cannot be reached.
    #[must_use]
    pub const fn with_on_error(mut self, mode: FailMode) -> Self {
        self.on_error = mode;
        self
    }

    /// Enforcing `limit` calls (0 is taken as 1) per `per` on this instance alone while the
    /// store fails, instead of the fleet's rate.
    #[must_use]
    pub const fn with_local_rate(mut self, limit: u32, per: Duration) -> Self {
        self.local_rate = Some((if limit == 0 { 1 } else { limit }, per));
        self
    }

    /// Waiting for the store at most `timeout` before `on_timeout` decides.
    #[must_use]
    pub const fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The rate this instance enforces alone while the store fails:
    /// [`local_rate`](Self::local_rate), or the fleet's rate when it is not set.
    #[must_use]
    pub const fn local_rate_or_rate(&self) -> (u32, Duration) {
        match self.local_rate {
            Some(rate) => rate,
            None => (self.limit, self.per),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_limit_is_taken_as_one_and_the_local_rate_defaults_to_the_rate() {
        let config = RateLimitConfig::new(0, Duration::from_secs(1));
        assert_eq!(config.limit, 1);
        assert_eq!(config.local_rate_or_rate(), (1, Duration::from_secs(1)));
        let local = config.with_local_rate(0, Duration::from_secs(2));
        assert_eq!(local.local_rate, Some((1, Duration::from_secs(2))));
        assert_eq!(
            config.with_rate(5, Duration::from_secs(3)),
            RateLimitConfig::new(5, Duration::from_secs(3))
        );
    }

    #[test]
    fn the_fail_modes_and_the_timeout_have_their_defaults_until_set() {
        let config = RateLimitConfig::new(10, Duration::from_secs(1));
        assert_eq!(
            (config.on_timeout, config.on_error, config.timeout),
            (FailMode::Local, FailMode::Local, Duration::from_millis(50))
        );
        let set = config
            .with_on_timeout(FailMode::Closed)
            .with_on_error(FailMode::Open)
            .with_timeout(Duration::from_millis(20));
        assert_eq!(
            (set.on_timeout, set.on_error, set.timeout),
            (FailMode::Closed, FailMode::Open, Duration::from_millis(20))
        );
    }
}
