//! One annotated operation's calls: its name, the callers it was seen called by, its metric
//! handles (feature `metrics`) and its counts for the dashboard's history (feature
//! `dashboard`), in the `static` the expansion keeps per annotated function.
//!
//! The record, and the meter that measures each call into it: what fills it is the
//! operation's [`Traced`](crate::__macro_support::Traced) call (which notes each new caller in
//! the [registry](crate::registry) and measures the call), with what the mechanisms note of the
//! call being polled ([`observe`](crate::observe) hands it to the meter); what reads it is the
//! registry's observed tree and the dashboard's [history](crate::history). It names none of
//! them, so all can name it.

use std::fmt;

// A call's measure, for its metrics and the dashboard's history: with either feature the
// meter; with neither, a stand-in of the same names that keeps and reads nothing. Chosen here,
// once.
#[cfg_attr(
    not(any(feature = "metrics", feature = "dashboard")),
    path = "calls/no_meter.rs"
)]
pub(crate) mod meter;

// The history's counts of each operation (feature `dashboard`), or a stand-in without it.
#[cfg_attr(not(feature = "dashboard"), path = "calls/no_stats.rs")]
pub(crate) mod stats;

/// What an annotated call returns: a `Result`, whose `Ok` is the `ok` outcome of its metrics.
pub trait CallOutput {
    /// Whether the call succeeded.
    fn succeeded(&self) -> bool;
}

impl<T, E> CallOutput for Result<T, E> {
    #[inline]
    fn succeeded(&self) -> bool {
        self.is_ok()
    }
}

/// Callers remembered per operation, each in a slot filled once: a call from one of them costs
/// a load and a comparison per slot; past them, a call from another caller looks its edge up
/// in the registry (under a read lock, allocating nothing once the edge is known).
const PARENT_SLOTS: usize = 8;

/// One annotated operation's calls: its name, the callers it was seen called by (the edges of
/// the [observed tree](crate::registry::CallsSnapshot)), with the `metrics` feature its metric
/// handles, registered at its first call and kept, and with the `dashboard` feature its counts
/// and latencies for the dashboard's history. The expansion keeps one in a `static` per
/// annotated function and hands it to every call's `Traced`.
pub struct Calls {
    operation: &'static str,
    parents: [std::sync::OnceLock<&'static str>; PARENT_SLOTS],
    /// Its metric handles and its counts for the history (empty without `metrics` and
    /// `dashboard`).
    pub(crate) measure: meter::Measure,
}

/// Whether two callers are the same: the same `static` string, or equal text.
#[inline]
fn same(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b) || a == b
}

impl Calls {
    /// The calls of the operation `operation`.
    pub const fn new(operation: &'static str) -> Self {
        Self {
            operation,
            parents: [const { std::sync::OnceLock::new() }; PARENT_SLOTS],
            measure: meter::Measure::new(),
        }
    }

    /// The operation's name.
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    /// Whether the registry is to hear of a call from `parent` (an operation, or an entry
    /// point's caller): no when a slot remembers it; yes the first time (a free slot is
    /// claimed for it) and for every call past the slots.
    #[inline]
    pub(crate) fn new_caller(&self, parent: &'static str) -> bool {
        for slot in &self.parents {
            match slot.get() {
                Some(known) if same(known, parent) => return false,
                Some(_) => {}
                None => return self.first_from(parent),
            }
        }
        true
    }

    /// The first call seen from `parent`: a slot claimed (yes, the registry is to hear of it),
    /// unless another thread remembered the same caller meanwhile.
    #[cold]
    #[inline(never)]
    fn first_from(&self, parent: &'static str) -> bool {
        for slot in &self.parents {
            match slot.get() {
                Some(known) if same(known, parent) => return false,
                Some(_) => continue,
                None => {}
            }
            if slot.set(parent).is_ok() || slot.get().is_some_and(|known| same(known, parent)) {
                return true;
            }
        }
        true
    }
}

impl fmt::Debug for Calls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Calls")
            .field("operation", &self.operation)
            .finish_non_exhaustive()
    }
}
