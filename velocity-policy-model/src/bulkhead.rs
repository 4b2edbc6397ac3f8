//! A bulkhead's settings: [`BulkheadConfig`], with the bounds of an adaptive slot count
//! ([`AdaptiveLimit`]).
//!
//! ```
//! use velocity_policy_model::{AdaptiveLimit, BulkheadConfig};
//!
//! // `bulkhead search { max_concurrent = 4; max_queued = 2 }`
//! const SEARCH: BulkheadConfig = BulkheadConfig::new(4).with_max_queued(2);
//! assert_eq!((SEARCH.max_concurrent, SEARCH.max_queued), (4, 2));
//!
//! // `bulkhead partner { adaptive(min = 4, max = 64) }`: starts at 4 slots.
//! const PARTNER: BulkheadConfig = BulkheadConfig::adaptive(AdaptiveLimit::new(4, 64));
//! assert_eq!(PARTNER.starting_slots(), 4);
//! ```

use std::time::Duration;

use crate::setting::{Access, Range, Setting};

/// The bounds and pace of an adaptive slot count (`adaptive(min = 4, max = 64)`): it follows
/// the dependency's measured latency, never below `min` nor above `max`, starting at `min`.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_model::AdaptiveLimit;
///
/// let limit = AdaptiveLimit::new(4, 64).window(Duration::from_millis(250));
/// assert_eq!((limit.min(), limit.max()), (4, 64));
/// assert_eq!(limit.window_length(), Duration::from_millis(250));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[must_use]
#[non_exhaustive]
pub struct AdaptiveLimit {
    /// The fewest slots (`min`, at least 1): where it starts.
    pub min: u32,
    /// The most slots (`max`, at least `min`).
    pub max: u32,
    /// How long the latency is averaged before the limit moves (default
    /// [`AdaptiveLimit::DEFAULT_WINDOW`]; not written in the language).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "window_ms", serialize_with = "crate::json::millis")
    )]
    pub window: Duration,
}

impl AdaptiveLimit {
    /// How long a measurement window lasts unless set: a tenth of a second.
    pub const DEFAULT_WINDOW: Duration = Duration::from_millis(100);

    /// A limit that moves between `min` and `max` slots (`min` at least 1, `max` at least
    /// `min`; the language and the attributes refuse other values with an error, this
    /// clamps them). It starts at `min`.
    pub const fn new(min: u32, max: u32) -> Self {
        let min = if min == 0 { 1 } else { min };
        Self {
            min,
            max: if max < min { min } else { max },
            window: Self::DEFAULT_WINDOW,
        }
    }

    /// How long the latency is averaged before the limit moves (at least a millisecond).
    /// A window with fewer than ten completed calls goes on until it has them.
    pub const fn window(mut self, window: Duration) -> Self {
        const LEAST: Duration = Duration::from_millis(1);
        self.window = if window.as_nanos() < LEAST.as_nanos() {
            LEAST
        } else {
            window
        };
        self
    }

    /// The fewest slots.
    #[must_use]
    pub const fn min(&self) -> u32 {
        self.min
    }

    /// The most slots.
    #[must_use]
    pub const fn max(&self) -> u32 {
        self.max
    }

    /// The measurement window.
    #[must_use]
    pub const fn window_length(&self) -> Duration {
        self.window
    }
}

/// A bulkhead's settings: `bulkhead NAME { max_concurrent = 4; max_queued = 2 }` (or
/// `adaptive(min = 4, max = 64)` instead of `max_concurrent`), the `bulkhead(..)` argument of
/// `#[resilient]`, the runtime's `Bulkhead::builder(name).config(..)` and an override's numbers.
///
/// Build one in a `const` with [`BulkheadConfig::new`] (or [`adaptive`](Self::adaptive)) and
/// the `with_` setters; fields are public to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BulkheadConfig {
    /// Slots: calls that may run at once (`max_concurrent`, at least 1; default 10). For an
    /// adaptive bulkhead, its `max`.
    pub max_concurrent: u32,
    /// Queue places: callers that may wait for a slot, each at most until its deadline
    /// (`max_queued`, default 0). Keep it small: it absorbs a burst, it does not store a
    /// backlog.
    pub max_queued: u32,
    /// Slots that follow the dependency's measured latency between bounds (`adaptive(..)`),
    /// instead of a fixed count; `None` for a fixed one.
    pub adaptive: Option<AdaptiveLimit>,
}

impl BulkheadConfig {
    /// Its optional numbers, each described once (see [`Setting`]): `max_queued`.
    /// `max_concurrent` and `adaptive(..)` are the slots, read by hand.
    pub const SETTINGS: &'static [Setting<Self>] = &[Setting {
        key: "max_queued",
        builder: "with_max_queued",
        example: "2",
        // A bulkhead's queue is built once; an override resizes its slots only.
        overridable: false,
        override_at_most_compiled: false,
        // Weighed against the slots by the validator (`policy::queue-stores-backlog`).
        range: Range::Any,
        access: Access::Count {
            get: |c| Some(c.max_queued),
            set: |c, n| c.max_queued = n,
        },
    }];

    /// 10 slots, no queue.
    pub const DEFAULT: Self = Self::new(10);

    /// `max_concurrent` fixed slots (at least 1), no queue.
    #[must_use]
    pub const fn new(max_concurrent: u32) -> Self {
        Self {
            max_concurrent: if max_concurrent == 0 {
                1
            } else {
                max_concurrent
            },
            max_queued: 0,
            adaptive: None,
        }
    }

    /// Slots between `limit`'s bounds, starting at its `min`; no queue.
    #[must_use]
    pub const fn adaptive(limit: AdaptiveLimit) -> Self {
        Self::new(limit.max).with_adaptive(limit)
    }

    /// With `max_concurrent` fixed slots (at least 1), no longer adaptive.
    #[must_use]
    pub const fn with_max_concurrent(mut self, max_concurrent: u32) -> Self {
        self.max_concurrent = if max_concurrent == 0 {
            1
        } else {
            max_concurrent
        };
        self.adaptive = None;
        self
    }

    /// With slots between `limit`'s bounds.
    #[must_use]
    pub const fn with_adaptive(mut self, limit: AdaptiveLimit) -> Self {
        self.max_concurrent = limit.max;
        self.adaptive = Some(limit);
        self
    }

    /// With `max_queued` queue places.
    #[must_use]
    pub const fn with_max_queued(mut self, max_queued: u32) -> Self {
        self.max_queued = max_queued;
        self
    }

    /// The slots it starts with: an adaptive bulkhead's `min`, or the fixed count.
    #[must_use]
    pub const fn starting_slots(&self) -> u32 {
        match self.adaptive {
            Some(limit) => limit.min,
            None => self.max_concurrent,
        }
    }
}

impl Default for BulkheadConfig {
    /// [`BulkheadConfig::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_kept_in_range_and_adaptive_replaces_the_fixed_count() {
        assert_eq!(BulkheadConfig::new(0).max_concurrent, 1);
        let limit = AdaptiveLimit::new(0, 0);
        assert_eq!((limit.min(), limit.max()), (1, 1));
        assert_eq!(
            AdaptiveLimit::new(2, 8)
                .window(Duration::ZERO)
                .window_length(),
            Duration::from_millis(1)
        );
        let adaptive = BulkheadConfig::new(3).with_adaptive(AdaptiveLimit::new(2, 8));
        assert_eq!((adaptive.max_concurrent, adaptive.starting_slots()), (8, 2));
        let fixed = adaptive.with_max_concurrent(5);
        assert_eq!((fixed.adaptive, fixed.starting_slots()), (None, 5));
        assert_eq!(BulkheadConfig::default().with_max_queued(2).max_queued, 2);
    }
}
