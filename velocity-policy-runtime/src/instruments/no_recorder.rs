//! The handles without the `metrics` feature: empty, and every method does nothing, so a
//! mechanism records the same way whatever the features and the compiler drops the calls.
//! With the feature, `recorder.rs` has the same items.

use super::Labels;

/// Whether handles record anything: they do not.
pub(crate) const ON: bool = false;

/// A counter that counts nothing.
#[derive(Clone)]
pub(crate) struct Counter;

/// A gauge that shows nothing.
#[derive(Clone)]
pub(crate) struct Gauge;

/// A histogram that records nothing.
#[derive(Clone)]
pub(crate) struct Histogram;

impl Counter {
    #[inline]
    pub(crate) fn increment(&self) {}
}

impl Gauge {
    #[inline]
    pub(crate) fn add(&self, _change: f64) {}

    #[inline]
    pub(crate) fn set(&self, _value: f64) {}
}

impl Histogram {
    #[inline]
    pub(crate) fn record(&self, _value: f64) {}
}

/// Stands in for when a wait began: no clock is read, and nothing has elapsed.
#[derive(Clone, Copy, Default)]
pub(crate) struct Since {}

impl Since {
    #[inline]
    pub(crate) fn now() -> Self {
        Self {}
    }

    #[inline]
    pub(crate) fn elapsed(self) -> Option<std::time::Duration> {
        None
    }
}

pub(crate) fn counter(_name: &'static str, _pairs: Labels<'_>) -> Counter {
    Counter
}

pub(super) fn gauge(_name: &'static str, _pairs: Labels<'_>) -> Gauge {
    Gauge
}

pub(super) fn histogram(_name: &'static str, _pairs: Labels<'_>) -> Histogram {
    Histogram
}

/// No recorder can be installed: nobody listens, and no clock is read for a call.
pub(crate) fn recorder_installed() -> bool {
    false
}
