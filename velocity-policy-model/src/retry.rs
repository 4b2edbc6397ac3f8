//! A retry policy's settings: [`RetryConfig`], with the pause between attempts ([`Backoff`])
//! and the share of traffic its retries may add ([`AllowanceConfig`]).
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_model::{AllowanceConfig, Backoff, RetryConfig};
//!
//! // `retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s);
//! //                    attempt_timeout = 500ms; allowance = 20% + 10/s }`
//! const TRANSIENT: RetryConfig = RetryConfig::new(3)
//!     .with_backoff(Backoff::full_jitter(Duration::from_millis(50), Duration::from_secs(1)))
//!     .with_attempt_timeout(Duration::from_millis(500))
//!     .with_allowance(AllowanceConfig::new(0.2, 10));
//! assert_eq!(TRANSIENT.backoff.max_delay_after(2), Duration::from_millis(100));
//! assert_eq!(TRANSIENT.allowance_or_default(), AllowanceConfig::DEFAULT);
//! ```

use std::time::Duration;

use crate::setting::{Access, Range, Setting};

/// How long to wait between attempts: `backoff = full_jitter(base = 50ms, cap = 1s)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Backoff {
    /// Before retry `n` (0 for the first retry), wait a uniform draw in
    /// `[0, min(cap, base × 2ⁿ))`: clients that failed together do not retry together.
    FullJitter {
        /// The first pause's ceiling (`base`).
        #[cfg_attr(
            feature = "serde",
            serde(rename = "base_ms", serialize_with = "crate::json::millis")
        )]
        base: Duration,
        /// The largest pause's ceiling (`cap`, at least `base`).
        #[cfg_attr(
            feature = "serde",
            serde(rename = "cap_ms", serialize_with = "crate::json::millis")
        )]
        cap: Duration,
    },
}

impl Backoff {
    /// Full jitter from 50 ms, capped at 1 s.
    pub const DEFAULT: Self = Self::full_jitter(Duration::from_millis(50), Duration::from_secs(1));

    /// [`Backoff::FullJitter`] from `base`, capped at `cap` (a cap below the base is taken as
    /// the base; the language refuses it with an error).
    #[must_use]
    pub const fn full_jitter(base: Duration, cap: Duration) -> Self {
        let cap = if cap.as_nanos() < base.as_nanos() {
            base
        } else {
            cap
        };
        Self::FullJitter { base, cap }
    }

    /// The first pause's ceiling.
    #[must_use]
    pub const fn base(&self) -> Duration {
        match *self {
            Self::FullJitter { base, .. } => base,
        }
    }

    /// The largest pause's ceiling.
    #[must_use]
    pub const fn cap(&self) -> Duration {
        match *self {
            Self::FullJitter { cap, .. } => cap,
        }
    }

    /// The longest pause after attempt `attempt` (1-based) failed: `min(cap, base ×
    /// 2^(attempt-1))`.
    #[must_use]
    pub fn max_delay_after(&self, attempt: u32) -> Duration {
        match *self {
            Self::FullJitter { base, cap } => {
                let doublings = attempt.saturating_sub(1).min(31);
                base.saturating_mul(1u32 << doublings).min(cap)
            }
        }
    }
}

impl Default for Backoff {
    /// [`Backoff::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// How much retry traffic may add across requests: `allowance = 20% + 10/s`. Retries in the
/// last [`window`](Self::window) stay below `ratio × calls + floor_per_second × window`: the
/// SRE book's retry budget (tower's `TpsBudget`, Finagle's `RetryBudget`). A hedge draws from
/// the same kind of allowance.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct AllowanceConfig {
    /// The share of recent calls retries may add (`20%`; at least 0).
    pub ratio: f64,
    /// Retries always allowed per second, whatever the ratio says (`+ 10/s`; 0 when not
    /// written in the language).
    pub floor_per_second: u32,
    /// The window calls and retries are counted in (default
    /// [`AllowanceConfig::DEFAULT_WINDOW`]; not written in the language).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "window_ms", serialize_with = "crate::json::millis")
    )]
    pub window: Duration,
}

impl AllowanceConfig {
    /// The window calls and retries are counted in unless set: 10 s. Long enough to smooth a
    /// burst, short enough that an outage's retries stop adding up soon after.
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);

    /// Retries may add 20% of the calls of the last 10 s, plus 10 per second.
    pub const DEFAULT: Self = Self::new(0.2, 10);

    /// Retries may add `ratio` of the recent calls plus `floor_per_second` per second, over
    /// [`DEFAULT_WINDOW`](Self::DEFAULT_WINDOW). A negative or NaN ratio counts as 0.
    #[must_use]
    pub const fn new(ratio: f64, floor_per_second: u32) -> Self {
        Self {
            ratio: if ratio.is_nan() || ratio < 0.0 {
                0.0
            } else {
                ratio
            },
            floor_per_second,
            window: Self::DEFAULT_WINDOW,
        }
    }

    /// Counted over `window` instead.
    #[must_use]
    pub const fn with_window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }
}

impl Default for AllowanceConfig {
    /// [`AllowanceConfig::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A retry policy's settings: `retry NAME { attempts = 3; backoff = full_jitter(base = 50ms,
/// cap = 1s); attempt_timeout = 500ms; allowance = 20% + 10/s }`, the `retry(..)` argument of
/// `#[resilient]`, the runtime's `RetryPolicy::builder(name).config(..)` and an override's
/// numbers.
///
/// Build one in a `const` with [`RetryConfig::new`] and the `with_` setters; fields are
/// public to read.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RetryConfig {
    /// Attempts in all, the first included (`attempts`, at least 1; default 3).
    pub attempts: u32,
    /// The pause between attempts (`backoff`; default [`Backoff::DEFAULT`]).
    pub backoff: Backoff,
    /// Each attempt's own timeout, a child of the request's deadline (`attempt_timeout`;
    /// default none: an attempt may take what the deadline has left). Expiring it is
    /// retryable.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "attempt_timeout_ms",
            serialize_with = "crate::json::millis_opt"
        )
    )]
    pub attempt_timeout: Option<Duration>,
    /// The share of traffic its retries may add (`allowance`; default `None`:
    /// [`AllowanceConfig::DEFAULT`]).
    pub allowance: Option<AllowanceConfig>,
}

impl RetryConfig {
    /// Its optional numbers, each described once (see [`Setting`]): `attempt_timeout`.
    /// `attempts`, `backoff` and `allowance` are read by hand.
    pub const SETTINGS: &'static [Setting<Self>] = &[Setting {
        key: "attempt_timeout",
        builder: "with_attempt_timeout",
        example: "500ms",
        overridable: true,
        override_at_most_compiled: false,
        range: Range::Positive,
        access: Access::Duration {
            get: |c| c.attempt_timeout,
            set: |c, d| c.attempt_timeout = Some(d),
        },
    }];

    /// 3 attempts, full jitter from 50 ms capped at 1 s, no attempt timeout, the default
    /// allowance.
    pub const DEFAULT: Self = Self::new(3);

    /// `attempts` in all (at least 1), with the default backoff, no attempt timeout and the
    /// default allowance.
    #[must_use]
    pub const fn new(attempts: u32) -> Self {
        Self {
            attempts: if attempts == 0 { 1 } else { attempts },
            backoff: Backoff::DEFAULT,
            attempt_timeout: None,
            allowance: None,
        }
    }

    /// With `attempts` in all (at least 1).
    #[must_use]
    pub const fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = if attempts == 0 { 1 } else { attempts };
        self
    }

    /// With `backoff` between attempts.
    #[must_use]
    pub const fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// With each attempt bounded by `timeout`.
    #[must_use]
    pub const fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = Some(timeout);
        self
    }

    /// With retries drawing from an allowance of its own, `allowance`.
    #[must_use]
    pub const fn with_allowance(mut self, allowance: AllowanceConfig) -> Self {
        self.allowance = Some(allowance);
        self
    }

    /// Its allowance: [`allowance`](Self::allowance), or [`AllowanceConfig::DEFAULT`] when
    /// not set.
    #[must_use]
    pub const fn allowance_or_default(&self) -> AllowanceConfig {
        match self.allowance {
            Some(allowance) => allowance,
            None => AllowanceConfig::DEFAULT,
        }
    }
}

impl Default for RetryConfig {
    /// [`RetryConfig::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_kept_in_range() {
        assert_eq!(RetryConfig::new(0).attempts, 1);
        assert_eq!(RetryConfig::DEFAULT.with_attempts(0).attempts, 1);
        let backoff = Backoff::full_jitter(Duration::from_secs(2), Duration::from_secs(1));
        assert_eq!(
            (backoff.base(), backoff.cap()),
            (Duration::from_secs(2), Duration::from_secs(2))
        );
        assert_eq!(AllowanceConfig::new(f64::NAN, 1).ratio, 0.0);
        assert_eq!(AllowanceConfig::new(-0.5, 1).ratio, 0.0);
        assert_eq!(AllowanceConfig::new(0.3, 1).ratio, 0.3);
    }

    #[test]
    fn the_longest_pause_doubles_up_to_the_cap() {
        let backoff = Backoff::DEFAULT;
        let pauses: Vec<_> = (1..=6).map(|k| backoff.max_delay_after(k)).collect();
        assert_eq!(
            pauses,
            [50, 100, 200, 400, 800, 1000].map(Duration::from_millis)
        );
        assert_eq!(backoff.max_delay_after(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn the_defaults_are_three_attempts_and_twenty_percent_plus_ten_per_second() {
        let config = RetryConfig::default();
        assert_eq!(config.attempts, 3);
        assert_eq!(config.backoff, Backoff::DEFAULT);
        assert_eq!(config.attempt_timeout, None);
        assert_eq!(config.allowance_or_default(), AllowanceConfig::DEFAULT);
        let own =
            config.with_allowance(AllowanceConfig::new(0.1, 0).with_window(Duration::from_secs(1)));
        assert_eq!(own.allowance_or_default().window, Duration::from_secs(1));
        assert_eq!(AllowanceConfig::DEFAULT.floor_per_second, 10);
    }
}
