//! An operation's counts for the history without the `dashboard` feature: there is no
//! history, so nothing records and nothing is counted. With the feature, `stats.rs` has the
//! same items (and what the history reads of them).

#![allow(
    dead_code,
    reason = "read by the meter, which is compiled only with `metrics` or `dashboard`"
)]

use std::time::Duration;

use crate::instruments::CallOutcome;

/// Whether a sampler runs: none can without the dashboard.
#[inline]
pub(crate) fn recording() -> bool {
    false
}

/// Stands in for an operation's counts: nothing kept.
pub(crate) struct CallStats {}

impl CallStats {
    pub(crate) const fn new() -> Self {
        Self {}
    }

    #[inline]
    pub(crate) fn ended(&self, _outcome: CallOutcome, _took: Duration) {}
}
