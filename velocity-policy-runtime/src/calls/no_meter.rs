//! The measure of a call without `metrics` and `dashboard`: nobody listens, so nothing is
//! kept and nothing is read (no clock, no thread-local). With either feature, `meter.rs` has
//! the same items.

use std::task::Poll;

use super::{CallOutput, Calls};
use crate::error::RefusalKind;

#[inline]
pub(crate) fn refused(_kind: RefusalKind) {}

#[inline]
pub(crate) fn expired() {}

#[inline]
pub(crate) fn retried() {}

/// Stands in for an operation's measure: nothing to keep.
pub(crate) struct Measure {}

impl Measure {
    pub(crate) const fn new() -> Self {
        Self {}
    }
}

/// Stands in for a call's measure: nothing to keep.
#[derive(Default)]
pub(crate) struct Meter {}

/// Nothing saved.
pub(crate) struct Saved {}

impl Meter {
    #[inline]
    pub(crate) fn before(&mut self, calls: &Calls) -> Saved {
        // The operation's measure is as empty as the call's: nothing to read in it.
        let Measure {} = &calls.measure;
        Saved {}
    }

    /// The span's `error.type` for a call that failed: `_OTHER`, the function's own error as
    /// far as anyone can tell without `metrics`.
    #[inline]
    pub(crate) fn after<O: CallOutput>(
        &mut self,
        _calls: &Calls,
        _saved: Saved,
        _poll: &Poll<O>,
    ) -> &'static str {
        "_OTHER"
    }
}
