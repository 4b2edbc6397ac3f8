//! A shedder's settings: [`SheddingConfig`], the loads at which optional work is shed.
//!
//! ```
//! use velocity_policy_model::{SheddingConfig, WorkClass};
//!
//! // `shedding { deferred at load 0.6; background at load 0.3 }`
//! const SHEDDING: SheddingConfig = SheddingConfig::new(0.6, 0.3);
//! assert_eq!(SHEDDING.for_class(WorkClass::Deferred), Some(0.6));
//! assert_eq!(SHEDDING.for_class(WorkClass::Critical), None);
//! ```

use crate::WorkClass;

/// A shedder's settings: `shedding { deferred at load 0.5; background at load 0.25 }` (an
/// operation's `shed_at` replaces its own class's), the expansion's shedder and an override's
/// numbers. Loads are shares of the compartment's capacity in use, 0 to 1.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SheddingConfig {
    /// Deferred work is shed at or above this load (`deferred at load`; default 0.5).
    pub deferred: f64,
    /// Background work is shed at or above this load (`background at load`; default 0.25, at
    /// most `deferred`: background work goes first).
    pub background: f64,
}

impl SheddingConfig {
    /// Deferred work shed from half load, background work from a quarter.
    pub const DEFAULT: Self = Self::new(0.5, 0.25);

    /// Deferred work shed from load `deferred`, background work from load `background`.
    #[must_use]
    pub const fn new(deferred: f64, background: f64) -> Self {
        Self {
            deferred,
            background,
        }
    }

    /// The threshold for `class`; `None` for critical work, which is never shed for load.
    #[must_use]
    pub const fn for_class(&self, class: WorkClass) -> Option<f64> {
        match class {
            WorkClass::Critical => None,
            WorkClass::Deferred => Some(self.deferred),
            WorkClass::Background => Some(self.background),
        }
    }
}

impl Default for SheddingConfig {
    /// [`SheddingConfig::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn critical_work_has_no_threshold_and_the_defaults_shed_background_first() {
        let config = SheddingConfig::default();
        assert_eq!(config.for_class(WorkClass::Critical), None);
        assert_eq!(config.for_class(WorkClass::Deferred), Some(0.5));
        assert_eq!(config.for_class(WorkClass::Background), Some(0.25));
    }
}
