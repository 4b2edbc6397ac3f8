//! An operation's deadline settings: [`DeadlineConfig`].
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_model::DeadlineConfig;
//!
//! // `operation search: critical { deadline = 2s; min_budget = 50ms }`
//! const SEARCH: DeadlineConfig =
//!     DeadlineConfig::new(Duration::from_secs(2)).with_min_budget(Duration::from_millis(50));
//! assert_eq!(SEARCH.deadline, Duration::from_secs(2));
//!
//! // No deadline written anywhere: a day, the longest budget there is.
//! assert_eq!(DeadlineConfig::DEFAULT.deadline, DeadlineConfig::MAX_BUDGET);
//! ```

use std::time::Duration;

/// An operation's deadline settings: `operation NAME { deadline = 2s; min_budget = 50ms }` (the
/// deadline tightened by the `request` stanza's for critical work), the `deadline` and
/// `min_budget` arguments of the attributes, the runtime's `OperationDeadline` and an
/// override's numbers.
///
/// Build one in a `const` with [`DeadlineConfig::new`] and the `with_` setters; fields are
/// public to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct DeadlineConfig {
    /// The budget each call starts with (`deadline`; default [`DeadlineConfig::MAX_BUDGET`]:
    /// no deadline of its own; a longer one is taken as that when a call starts). A caller's
    /// shorter deadline still governs.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "deadline_ms", serialize_with = "crate::json::millis")
    )]
    pub deadline: Duration,
    /// The least budget worth starting with (`min_budget`; default zero): a call that arrives
    /// with less left is refused at once, before it takes a slot or reaches the dependency.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "min_budget_ms", serialize_with = "crate::json::millis")
    )]
    pub min_budget: Duration,
}

impl DeadlineConfig {
    /// The longest budget a deadline may have: a day. A call given longer gets this.
    pub const MAX_BUDGET: Duration = Duration::from_secs(24 * 60 * 60);

    /// No deadline of its own ([`MAX_BUDGET`](Self::MAX_BUDGET)), no minimum budget.
    pub const DEFAULT: Self = Self::new(Self::MAX_BUDGET);

    /// Each call gets `deadline` (at most [`MAX_BUDGET`](Self::MAX_BUDGET) when it starts);
    /// no minimum budget.
    #[must_use]
    pub const fn new(deadline: Duration) -> Self {
        Self {
            deadline,
            min_budget: Duration::ZERO,
        }
    }

    /// With each call getting `deadline`.
    #[must_use]
    pub const fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// With calls that arrive with less than `min_budget` left refused at once.
    #[must_use]
    pub const fn with_min_budget(mut self, min_budget: Duration) -> Self {
        self.min_budget = min_budget;
        self
    }
}

impl Default for DeadlineConfig {
    /// [`DeadlineConfig::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_keeps_its_min_budget() {
        let config = DeadlineConfig::default()
            .with_min_budget(Duration::from_millis(50))
            .with_deadline(Duration::from_secs(2));
        assert_eq!(
            (config.deadline, config.min_budget),
            (Duration::from_secs(2), Duration::from_millis(50))
        );
        assert_eq!(DeadlineConfig::DEFAULT.min_budget, Duration::ZERO);
    }
}
