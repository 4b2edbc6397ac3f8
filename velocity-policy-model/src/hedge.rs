//! A hedging policy's settings: [`HedgeConfig`], with when a hedge starts ([`HedgeDelay`]).
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_model::{AllowanceConfig, HedgeConfig, HedgeDelay};
//!
//! // `hedge fanout { after = p95; max = 3; min_delay = 5ms; allowance = 10% + 5/s }`
//! const FANOUT: HedgeConfig = HedgeConfig::new(HedgeDelay::Percentile(95.0))
//!     .with_max(3)
//!     .with_min_delay(Duration::from_millis(5))
//!     .with_allowance(AllowanceConfig::new(0.1, 5));
//! assert_eq!(FANOUT.max, 3);
//!
//! // `hedge quick { after = 25ms }`: one hedge at most.
//! const QUICK: HedgeConfig = HedgeConfig::new(HedgeDelay::After(Duration::from_millis(25)));
//! assert_eq!(QUICK.max, 2);
//! ```

use std::time::Duration;

use crate::retry::AllowanceConfig;
use crate::setting::{Access, Number, Range, Setting};

/// When a hedge starts: `after = 50ms` or `after = p95`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum HedgeDelay {
    /// After a fixed time without an answer (`after = 50ms`).
    After(#[cfg_attr(feature = "serde", serde(serialize_with = "crate::json::millis"))] Duration),
    /// After the operation's own latency at this percentile (`95.0` for `after = p95`; the
    /// language takes whole percentiles from 1 to 99), as the runtime records it.
    Percentile(f64),
}

impl HedgeDelay {
    /// [`HedgeDelay::Percentile`], clamped to `[0, 100]` (NaN counts as 100: never).
    #[must_use]
    pub const fn percentile(percentile: f64) -> Self {
        Self::Percentile(if percentile.is_nan() || percentile > 100.0 {
            100.0
        } else if percentile < 0.0 {
            0.0
        } else {
            percentile
        })
    }

    /// The fixed delay, or `None` for a percentile (known only at run time).
    #[must_use]
    pub const fn fixed(&self) -> Option<Duration> {
        match *self {
            Self::After(after) => Some(after),
            Self::Percentile(_) => None,
        }
    }
}

/// A hedging policy's settings: `hedge NAME { after = p95; max = 2; allowance = 10% + 5/s }`,
/// the `hedge(..)` argument of `#[resilient]` and the runtime's
/// `Hedge::builder(name).config(..)`.
///
/// Build one in a `const` with [`HedgeConfig::new`] and the `with_` setters; fields are
/// public to read.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct HedgeConfig {
    /// When a hedge starts (`after`; default 50 ms).
    pub after: HedgeDelay,
    /// Attempts in flight at most, the first included (`max`; default 2, one hedge; from 1,
    /// which never hedges, to [`HedgeConfig::MAX_IN_FLIGHT`]).
    pub max: u32,
    /// The share of traffic its hedges may add when the operation does not retry (`allowance`;
    /// default `None`: [`AllowanceConfig::DEFAULT`]). With a retry policy, hedges draw from the
    /// retry's allowance: one budget for both.
    pub allowance: Option<AllowanceConfig>,
    /// The shortest a hedge waits (`min_delay`; default zero: no floor). A percentile delay
    /// follows the operation's latency down: where most calls answer in a millisecond (a cache
    /// in front), a p95 of a millisecond would hedge nearly every call that misses it, at once,
    /// doubling the load the tail already strains. A fixed `after` below it waits this long.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "min_delay_ms", serialize_with = "crate::json::millis")
    )]
    pub min_delay: Duration,
    /// Calls recorded before a percentile delay hedges at all (default 20; not written in the
    /// language).
    pub min_samples: u64,
}

impl HedgeConfig {
    /// The most attempts in flight a hedge may have, the first included.
    pub const MAX_IN_FLIGHT: u32 = 3;

    /// Its optional numbers, each described once (see [`Setting`]): `max`, `min_delay`. `after` and
    /// `allowance` are read by hand.
    pub const SETTINGS: &'static [Setting<Self>] = &[
        Setting {
            key: "max",
            builder: "with_max",
            example: "2",
            overridable: false,
            override_at_most_compiled: false,
            range: Range::Within {
                least: Number::Count(2),
                most: Number::Count(Self::MAX_IN_FLIGHT),
                code: "policy::hedge-max-out-of-range",
                help: "`max` counts the attempts in flight, the first included: `max = 2` is one hedge, and at most {most} attempts may run at once",
            },
            access: Access::Count {
                get: |c| Some(c.max),
                set: |c, n| c.max = n,
            },
        },
        Setting {
            key: "min_delay",
            builder: "with_min_delay",
            example: "20ms",
            overridable: false,
            override_at_most_compiled: false,
            // Zero, the default, leaves the percentile alone.
            range: Range::Any,
            access: Access::Duration {
                get: |c| Some(c.min_delay),
                set: |c, d| c.min_delay = d,
            },
        },
    ];

    /// A hedge after 50 ms, at most 2 attempts in flight, the default allowance, 20 calls
    /// before a percentile hedges.
    pub const DEFAULT: Self = Self::new(HedgeDelay::After(Duration::from_millis(50)));

    /// A hedge `after`, at most 2 attempts in flight (one hedge), the default allowance.
    #[must_use]
    pub const fn new(after: HedgeDelay) -> Self {
        Self {
            after,
            max: 2,
            allowance: None,
            min_delay: Duration::ZERO,
            min_samples: 20,
        }
    }

    /// Starting hedges `after`.
    #[must_use]
    pub const fn with_after(mut self, after: HedgeDelay) -> Self {
        self.after = after;
        self
    }

    /// With `max` attempts in flight at most, clamped to `[1, MAX_IN_FLIGHT]`.
    #[must_use]
    pub const fn with_max(mut self, max: u32) -> Self {
        self.max = if max == 0 {
            1
        } else if max > Self::MAX_IN_FLIGHT {
            Self::MAX_IN_FLIGHT
        } else {
            max
        };
        self
    }

    /// With hedges drawing from an allowance of their own, `allowance`, when the operation
    /// does not retry.
    #[must_use]
    pub const fn with_allowance(mut self, allowance: AllowanceConfig) -> Self {
        self.allowance = Some(allowance);
        self
    }

    /// Never hedging sooner than `min_delay` after an attempt started.
    #[must_use]
    pub const fn with_min_delay(mut self, min_delay: Duration) -> Self {
        self.min_delay = min_delay;
        self
    }

    /// With `min_samples` calls recorded before a percentile delay hedges.
    #[must_use]
    pub const fn with_min_samples(mut self, min_samples: u64) -> Self {
        self.min_samples = min_samples;
        self
    }
}

impl Default for HedgeConfig {
    /// [`HedgeConfig::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_and_percentile_are_kept_in_range() {
        assert_eq!(HedgeConfig::DEFAULT.with_max(0).max, 1);
        assert_eq!(
            HedgeConfig::DEFAULT.with_max(9).max,
            HedgeConfig::MAX_IN_FLIGHT
        );
        assert_eq!(
            HedgeDelay::percentile(f64::NAN),
            HedgeDelay::Percentile(100.0)
        );
        assert_eq!(HedgeDelay::percentile(-1.0), HedgeDelay::Percentile(0.0));
        assert_eq!(HedgeDelay::percentile(95.0), HedgeDelay::Percentile(95.0));
    }

    #[test]
    fn only_a_fixed_delay_is_known_before_run_time() {
        let fixed = HedgeDelay::After(Duration::from_millis(25));
        assert_eq!(fixed.fixed(), Some(Duration::from_millis(25)));
        assert_eq!(HedgeDelay::Percentile(95.0).fixed(), None);
        assert_eq!(
            HedgeConfig::default().after,
            HedgeDelay::After(Duration::from_millis(50))
        );
        assert_eq!(HedgeConfig::default().min_samples, 20);
        assert_eq!(HedgeConfig::default().min_delay, Duration::ZERO);
    }
}
