//! A mechanism's optional numbers, described once: [`Setting`], one row of a table kept beside
//! each configuration type ([`BreakerConfig::SETTINGS`](crate::BreakerConfig::SETTINGS), ...).
//!
//! A row says everything a front end or a back end needs to know of one optional number with
//! a default (a duration, a count or a share): its key, as the `.policy` language and the
//! attributes write it; how to read it from a configuration and write it into one; the
//! `const fn with_...` builder the attribute macros emit for it; an example value; whether
//! an override may move it under a running service, and whether only down; and its [`Range`], the values accepted
//! with the stable code and help a refused one is reported with. The language's lowering, the
//! attributes' arguments, the macros' emission, the overrides and the validator's range rule
//! are generic over the table, so a new number of this kind is its field, its builder and its
//! row, here. Numbers with structure (a breaker's `open_after`, a retry's `backoff`, a
//! bulkhead's `adaptive(..)`) are read by hand, and so are the rules that weigh one number
//! against another (an `attempt_timeout` above the deadline).
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_model::{BreakerConfig, HedgeConfig, Number, Setting};
//!
//! let probation = Setting::find(BreakerConfig::SETTINGS, "probation").unwrap();
//! assert_eq!(probation.builder, "with_probation");
//! let mut config = BreakerConfig::DEFAULT;
//! // Not set: one window of the rule is in force.
//! assert_eq!(probation.get(&config), Some(Number::Duration(Duration::from_secs(30))));
//! assert!(probation.set(&mut config, Number::Duration(Duration::from_secs(5))));
//! assert_eq!(config.probation, Some(Duration::from_secs(5)));
//! // A count is not a probation: refused, the configuration unchanged.
//! assert!(!probation.set(&mut config, Number::Count(5)));
//!
//! // A hedge's `max` is 2 to 3 attempts in flight; the validator refuses 5 with the row's code.
//! let max = Setting::find(HedgeConfig::SETTINGS, "max").unwrap();
//! assert!(max.range.admits(Number::Count(2)));
//! assert!(!max.range.admits(Number::Count(5)));
//! assert_eq!(max.range.code(), Some("policy::hedge-max-out-of-range"));
//! ```

use std::cmp::Ordering;
use std::fmt;
use std::time::Duration;

/// What kind of number a [`Setting`] holds, which says how it is written: `30s`, `4`, `0.5`
/// (`"30s"`, `4`, `0.5` in an attribute).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A duration.
    Duration,
    /// A whole number from 0 to `u32::MAX`.
    Count,
    /// A share: a plain number or a percentage.
    Share,
}

/// One setting's value, of its [`Unit`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// A duration.
    Duration(Duration),
    /// A count.
    Count(u32),
    /// A share.
    Share(f64),
}

/// Values of the same unit compare; values of different units do not.
impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        match (self, other) {
            (Self::Duration(a), Self::Duration(b)) => a.partial_cmp(b),
            (Self::Count(a), Self::Count(b)) => a.partial_cmp(b),
            (Self::Share(a), Self::Share(b)) => a.partial_cmp(b),
            _ => None,
        }
    }
}

impl Number {
    /// The unit of this value.
    #[must_use]
    pub const fn unit(&self) -> Unit {
        match self {
            Self::Duration(_) => Unit::Duration,
            Self::Count(_) => Unit::Count,
            Self::Share(_) => Unit::Share,
        }
    }
}

/// The values a [`Setting`] accepts, and how a front end reports one it refuses: with a stable
/// code and a help that says what the number means and what to write.
///
/// Read by the one validator, which every front end asks: the `.policy` files, the attributes
/// (lowered to the same model) and the overrides (merged into it) are refused alike, with the
/// same code and help. A value with a sign or a unit of its own is refused earlier, where it is
/// read (a negative duration, a count past `u32::MAX`). A rule that weighs one number against
/// another (`max_queued` against `max_concurrent`) is not a range: it is the validator's.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Range {
    /// Every value of its unit (a `probation` of zero ends the probation with the opening).
    Any,
    /// Every duration but zero, which can never be met: refused as
    /// [`Range::POSITIVE_CODE`], as every zero duration of the language is, with the message
    /// "`KEY` must be longer than zero, found `0s`".
    Positive,
    /// From `least` to `most`, both included, in the setting's unit: a value outside is
    /// refused with `code` and the message "KIND `NAME` has `KEY = VALUE`, outside LEAST to
    /// MOST".
    Within {
        /// The smallest value accepted.
        least: Number,
        /// The largest value accepted.
        most: Number,
        /// The stable code of a value outside: `policy::hedge-max-out-of-range`.
        code: &'static str,
        /// The help printed with it; `{least}` and `{most}` stand for the bounds, written as
        /// the language writes them.
        help: &'static str,
    },
}

impl Range {
    /// The code of a zero refused by [`Range::Positive`].
    pub const POSITIVE_CODE: &'static str = "policy::duration-not-positive";

    /// Whether `value` is accepted (a value of another unit is not).
    #[must_use]
    pub fn admits(&self, value: Number) -> bool {
        match self {
            Self::Any => true,
            Self::Positive => matches!(value, Number::Duration(d) if !d.is_zero()),
            Self::Within { least, most, .. } => {
                value.partial_cmp(least).is_some_and(Ordering::is_ge)
                    && value.partial_cmp(most).is_some_and(Ordering::is_le)
            }
        }
    }

    /// The stable code a refused value is reported with; `None` when every value is accepted.
    #[must_use]
    pub const fn code(&self) -> Option<&'static str> {
        match self {
            Self::Any => None,
            Self::Positive => Some(Self::POSITIVE_CODE),
            Self::Within { code, .. } => Some(code),
        }
    }

    /// A value it refuses, for tests and examples: zero for a positive duration, the value
    /// just past `most` (or else just below `least`) for a range; `None` when every value is
    /// accepted.
    #[must_use]
    pub fn outside(&self) -> Option<Number> {
        match *self {
            Self::Any => None,
            Self::Positive => Some(Number::Duration(Duration::ZERO)),
            Self::Within { least, most, .. } => {
                let above = match most {
                    Number::Duration(d) => d
                        .checked_add(Duration::from_millis(1))
                        .map(Number::Duration),
                    Number::Count(n) => n.checked_add(1).map(Number::Count),
                    Number::Share(share) => Some(Number::Share(share + 0.01)),
                };
                let below = match least {
                    Number::Duration(d) => d
                        .checked_sub(Duration::from_millis(1))
                        .map(Number::Duration),
                    Number::Count(n) => n.checked_sub(1).map(Number::Count),
                    Number::Share(share) => Some(Number::Share(share - 0.01)),
                };
                above.or(below).filter(|value| !self.admits(*value))
            }
        }
    }
}

/// How a [`Setting`] of a configuration `C` is read and written, by its unit.
///
/// `get` gives the value in force (a default included; `None` when nothing is in force, as
/// for a retry with no attempt timeout); `set` writes a value as given, unclamped (a front end
/// keeps what was written, for the validator to judge).
pub enum Access<C> {
    /// A duration.
    Duration {
        /// The value in force.
        get: fn(&C) -> Option<Duration>,
        /// Writes it.
        set: fn(&mut C, Duration),
    },
    /// A count.
    Count {
        /// The value in force.
        get: fn(&C) -> Option<u32>,
        /// Writes it.
        set: fn(&mut C, u32),
    },
    /// A share.
    Share {
        /// The value in force.
        get: fn(&C) -> Option<f64>,
        /// Writes it.
        set: fn(&mut C, f64),
    },
}

impl<C> Clone for Access<C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for Access<C> {}

impl<C> fmt::Debug for Access<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Duration { .. } => "Access::Duration",
            Self::Count { .. } => "Access::Count",
            Self::Share { .. } => "Access::Share",
        })
    }
}

/// One optional number of a mechanism's configuration `C`, with a default: see the
/// [module](self).
#[non_exhaustive]
pub struct Setting<C> {
    /// The key, as the language and the attributes write it: `probation`.
    pub key: &'static str,
    /// The name of `C`'s `const fn` that sets it (`with_probation`), which the attribute
    /// macros emit.
    pub builder: &'static str,
    /// A value of it, as the language writes it (`5s`), for examples and tests.
    pub example: &'static str,
    /// Whether an override may move it under a running service.
    pub overridable: bool,
    /// Whether an override may only lower it: by default from a quarter of the compiled value
    /// up to that value, never above (the crate's `envelope` may widen it). For what keeps a
    /// breaker open, where a longer value keeps the dependency refused longer.
    pub override_at_most_compiled: bool,
    /// The values it accepts, and the code and help a refused one is reported with.
    pub range: Range,
    /// How it is read and written.
    pub access: Access<C>,
}

impl<C> Clone for Setting<C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for Setting<C> {}

impl<C> fmt::Debug for Setting<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Setting")
            .field("key", &self.key)
            .field("unit", &self.unit())
            .field("builder", &self.builder)
            .field("example", &self.example)
            .field("overridable", &self.overridable)
            .field("override_at_most_compiled", &self.override_at_most_compiled)
            .field("range", &self.range)
            .finish_non_exhaustive()
    }
}

impl<C> Setting<C> {
    /// The row of `table` whose key is `key`.
    #[must_use]
    pub fn find<'t>(table: &'t [Self], key: &str) -> Option<&'t Self> {
        table.iter().find(|setting| setting.key == key)
    }

    /// The keys of `table`, in its order.
    pub fn keys(table: &[Self]) -> impl Iterator<Item = &'static str> + Clone + '_ {
        table.iter().map(|setting| setting.key)
    }

    /// A mechanism's keys in the order its messages list them: `before` (the keys written by
    /// hand, such as `open_after`), the rows of `table`, then `after`. The `.policy` lowering
    /// and the attribute arguments both list them so.
    #[must_use]
    pub fn keys_between(
        before: &[&'static str],
        table: &[Self],
        after: &[&'static str],
    ) -> Vec<&'static str> {
        let mut keys = before.to_vec();
        keys.extend(Self::keys(table));
        keys.extend_from_slice(after);
        keys
    }

    /// Its unit.
    #[must_use]
    pub const fn unit(&self) -> Unit {
        match self.access {
            Access::Duration { .. } => Unit::Duration,
            Access::Count { .. } => Unit::Count,
            Access::Share { .. } => Unit::Share,
        }
    }

    /// Its value in force in `config`; `None` when none is.
    #[must_use]
    pub fn get(&self, config: &C) -> Option<Number> {
        match self.access {
            Access::Duration { get, .. } => get(config).map(Number::Duration),
            Access::Count { get, .. } => get(config).map(Number::Count),
            Access::Share { get, .. } => get(config).map(Number::Share),
        }
    }

    /// Writes `value` into `config`, as given; `false` (and `config` unchanged) when it is not
    /// of this setting's unit.
    pub fn set(&self, config: &mut C, value: Number) -> bool {
        match (self.access, value) {
            (Access::Duration { set, .. }, Number::Duration(d)) => set(config, d),
            (Access::Count { set, .. }, Number::Count(n)) => set(config, n),
            (Access::Share { set, .. }, Number::Share(share)) => set(config, share),
            _ => return false,
        }
        true
    }
}
