//! A circuit breaker's settings: [`BreakerConfig`], with the rule that opens it
//! ([`OpenAfter`]) and what it shares between instances ([`Sharing`]).
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_model::{BreakerConfig, OpenAfter, Sharing};
//!
//! // `breaker search { open_after = 5 failures within 30s; cooldown = 20s; shared(trips_only) }`
//! const SEARCH: BreakerConfig = BreakerConfig::new(
//!     OpenAfter::failures(5, Duration::from_secs(30)),
//!     Duration::from_secs(20),
//! )
//! .with_sharing(Sharing::TripsOnly);
//! assert_eq!(SEARCH.max_retry_after, BreakerConfig::DEFAULT_MAX_RETRY_AFTER);
//! assert_eq!(SEARCH.open_after.window(), Duration::from_secs(30));
//! ```

use std::time::Duration;

use crate::setting::{Access, Range, Setting};

/// When a breaker opens on its own counting: `open_after = 5 failures within 30s` or
/// `open_after = 50% of at least 20 calls within 30s`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "rule", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum OpenAfter {
    /// Open when `count` failures fall inside a sliding `window`: exactly (the times of the
    /// last `count` failures are kept, and it opens when the oldest is younger than the
    /// window), for counts up to 1024; a higher count is counted in ten buckets of a tenth of
    /// the window, so a failure up to a tenth of the window older may still count.
    Failures {
        /// Failures that open the breaker (at least 1).
        count: u32,
        /// The sliding window they must fall inside.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "window_ms", serialize_with = "crate::json::millis")
        )]
        window: Duration,
    },
    /// Open when at least `ratio` of the calls inside `window` failed, once at least
    /// `min_calls` calls were seen there. Calls are counted in ten buckets of a tenth of the
    /// window (fixed memory whatever the traffic): a call younger than the window always
    /// counts, one older than the window plus a tenth of it never does.
    FailureRatio {
        /// The failing share of calls that opens the breaker, in `(0, 1]`.
        ratio: f64,
        /// Calls the window must hold before the ratio means anything.
        min_calls: u32,
        /// The sliding window.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "window_ms", serialize_with = "crate::json::millis")
        )]
        window: Duration,
    },
}

impl OpenAfter {
    /// [`OpenAfter::Failures`], with a count of 0 taken as 1.
    #[must_use]
    pub const fn failures(count: u32, window: Duration) -> Self {
        Self::Failures {
            count: if count == 0 { 1 } else { count },
            window,
        }
    }

    /// [`OpenAfter::FailureRatio`], with the ratio clamped into `(0, 1]` (NaN taken as 1) and
    /// a `min_calls` of 0 taken as 1.
    #[must_use]
    pub const fn ratio(ratio: f64, min_calls: u32, window: Duration) -> Self {
        let ratio = if ratio.is_nan() || ratio > 1.0 {
            1.0
        } else if ratio < f64::MIN_POSITIVE {
            f64::MIN_POSITIVE
        } else {
            ratio
        };
        Self::FailureRatio {
            ratio,
            min_calls: if min_calls == 0 { 1 } else { min_calls },
            window,
        }
    }

    /// The sliding window of the rule.
    #[must_use]
    pub const fn window(&self) -> Duration {
        match *self {
            Self::Failures { window, .. } | Self::FailureRatio { window, .. } => window,
        }
    }
}

/// What a shared store shares for a breaker (an in-process breaker shares nothing whatever
/// this says): `shared`, `shared(quorum = N)` or `shared(trips_only)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "sharing", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Sharing {
    /// Nothing: this instance's breaker is its own (the default).
    #[default]
    Local,
    /// Only explicit trips (a 429 or `Retry-After` is true for every instance); failures stay
    /// local, so one instance's own network trouble never opens the fleet's breaker.
    TripsOnly,
    /// Trips, and openings from failures once at least `quorum` distinct instances reported
    /// failures inside the window (`shared` is a quorum of 1).
    Openings {
        /// Distinct instances that must have reported failures.
        quorum: u32,
    },
}

/// A circuit breaker's settings: `breaker NAME { open_after = ...; cooldown = ...; shared;
/// max_retry_after = 5m }`, the `breaker(..)` argument of `#[resilient]`, the runtime's
/// `Breaker::builder(name).config(..)`, an override's numbers and the dashboard's `config`.
///
/// Build one in a `const` with [`BreakerConfig::new`] and the `with_` setters; fields are
/// public to read.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BreakerConfig {
    /// When it opens on its own counting (`open_after`).
    pub open_after: OpenAfter,
    /// How long an opening from counted failures lasts (`cooldown`).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "cooldown_ms", serialize_with = "crate::json::millis")
    )]
    pub cooldown: Duration,
    /// What a shared store shares (`shared`; default: nothing).
    pub sharing: Sharing,
    /// The longest opening a dependency's `Retry-After` may ask for (`max_retry_after`;
    /// default [`BreakerConfig::DEFAULT_MAX_RETRY_AFTER`]): a trip asking for more opens for
    /// this long, and a trip shared by another instance may not last longer.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "max_retry_after_ms", serialize_with = "crate::json::millis")
    )]
    pub max_retry_after: Duration,
    /// How long after an opening ends one failure reopens the breaker at once (`probation`;
    /// default `None`: one `open_after` window). A long counting window (ten minutes, to catch
    /// a slow drip) need not mean ten minutes in which any single failure reopens it; zero
    /// ends the probation with the opening.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "probation_ms", serialize_with = "crate::json::millis_opt")
    )]
    pub probation: Option<Duration>,
}

impl BreakerConfig {
    /// Its optional numbers, each described once (see [`Setting`]): `max_retry_after` and
    /// `probation`. `open_after`, `cooldown` and `shared` have structure, and are read by hand.
    pub const SETTINGS: &'static [Setting<Self>] = &[
        Setting {
            key: "max_retry_after",
            builder: "with_max_retry_after",
            example: "5m",
            overridable: true,
            // How long a `Retry-After` may keep the breaker open.
            override_at_most_compiled: true,
            range: Range::Positive,
            access: Access::Duration {
                get: |c| Some(c.max_retry_after),
                set: |c, d| c.max_retry_after = d,
            },
        },
        Setting {
            key: "probation",
            builder: "with_probation",
            example: "5s",
            overridable: true,
            override_at_most_compiled: false,
            // Zero ends the probation with the opening.
            range: Range::Any,
            access: Access::Duration {
                get: |c| Some(c.probation_or_window()),
                set: |c, d| c.probation = Some(d),
            },
        },
    ];

    /// The longest `Retry-After` a breaker accepts unless told otherwise: 5 minutes.
    pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(5 * 60);

    /// 5 failures within 30 s open the breaker for 20 s; nothing shared; a `Retry-After` is
    /// honoured up to 5 minutes.
    pub const DEFAULT: Self = Self::new(
        OpenAfter::failures(5, Duration::from_secs(30)),
        Duration::from_secs(20),
    );

    /// A breaker that opens by `open_after` for `cooldown`, shares nothing and honours a
    /// `Retry-After` up to [`DEFAULT_MAX_RETRY_AFTER`](Self::DEFAULT_MAX_RETRY_AFTER).
    #[must_use]
    pub const fn new(open_after: OpenAfter, cooldown: Duration) -> Self {
        Self {
            open_after,
            cooldown,
            sharing: Sharing::Local,
            max_retry_after: Self::DEFAULT_MAX_RETRY_AFTER,
            probation: None,
        }
    }

    /// With the rule `open_after`.
    #[must_use]
    pub const fn with_open_after(mut self, open_after: OpenAfter) -> Self {
        self.open_after = open_after;
        self
    }

    /// With an opening from counted failures lasting `cooldown`.
    #[must_use]
    pub const fn with_cooldown(mut self, cooldown: Duration) -> Self {
        self.cooldown = cooldown;
        self
    }

    /// Sharing `sharing` through a shared store.
    #[must_use]
    pub const fn with_sharing(mut self, sharing: Sharing) -> Self {
        self.sharing = sharing;
        self
    }

    /// Honouring a `Retry-After` up to `max`.
    #[must_use]
    pub const fn with_max_retry_after(mut self, max: Duration) -> Self {
        self.max_retry_after = max;
        self
    }

    /// With a probation of `probation` after each opening, instead of one window.
    #[must_use]
    pub const fn with_probation(mut self, probation: Duration) -> Self {
        self.probation = Some(probation);
        self
    }

    /// The probation after an opening: [`probation`](Self::probation), or one window of the
    /// rule when it is not set.
    #[must_use]
    pub const fn probation_or_window(&self) -> Duration {
        match self.probation {
            Some(probation) => probation,
            None => self.open_after.window(),
        }
    }

    /// The longest an opening may last here: the cooldown for an opening from counted
    /// failures (`trip == false`), [`max_retry_after`](Self::max_retry_after) for a trip. A
    /// shared store drops an opening from another instance that asks for longer.
    #[must_use]
    pub const fn longest_opening(&self, trip: bool) -> Duration {
        if trip {
            self.max_retry_after
        } else {
            self.cooldown
        }
    }
}

impl Default for BreakerConfig {
    /// [`BreakerConfig::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_constructors_keep_their_numbers_in_range() {
        assert_eq!(
            OpenAfter::failures(0, Duration::from_secs(1)),
            OpenAfter::Failures {
                count: 1,
                window: Duration::from_secs(1)
            }
        );
        for (given, kept) in [
            (f64::NAN, 1.0),
            (2.0, 1.0),
            (0.0, f64::MIN_POSITIVE),
            (0.5, 0.5),
        ] {
            let OpenAfter::FailureRatio {
                ratio, min_calls, ..
            } = OpenAfter::ratio(given, 0, Duration::from_secs(1))
            else {
                panic!("a ratio rule");
            };
            assert_eq!((ratio, min_calls), (kept, 1), "ratio {given}");
        }
    }

    #[test]
    fn a_trip_is_bounded_by_max_retry_after_and_an_opening_by_the_cooldown() {
        const C: BreakerConfig = BreakerConfig::DEFAULT
            .with_cooldown(Duration::from_secs(7))
            .with_max_retry_after(Duration::from_secs(60));
        assert_eq!(C.longest_opening(false), Duration::from_secs(7));
        assert_eq!(C.longest_opening(true), Duration::from_secs(60));
        assert_eq!(BreakerConfig::default(), BreakerConfig::DEFAULT);
    }

    #[test]
    fn the_probation_is_one_window_unless_set() {
        let config = BreakerConfig::new(
            OpenAfter::failures(5, Duration::from_secs(600)),
            Duration::from_secs(20),
        );
        assert_eq!(config.probation_or_window(), Duration::from_secs(600));
        let set = config.with_probation(Duration::from_secs(15));
        assert_eq!(set.probation, Some(Duration::from_secs(15)));
        assert_eq!(set.probation_or_window(), Duration::from_secs(15));
    }
}
