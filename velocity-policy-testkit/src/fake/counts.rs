//! What a fake dependency counts: calls per outcome, in flight, and the most at once.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a fake dependency saw, read at one moment
/// ([`FakeDependency::counts`](super::FakeDependency::counts)).
///
/// `calls` counts every call as it starts; `ok`, `failed` and `rate_limited` count the calls
/// that ended that way, and `cancelled` the calls dropped before they answered (a deadline or
/// a timeout stopped waiting for them). So once nothing is in flight,
/// `calls == ok + failed + rate_limited + cancelled`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Calls started.
    pub calls: u64,
    /// Calls answered.
    pub ok: u64,
    /// Calls failed (down: a 503).
    pub failed: u64,
    /// Calls refused with a `Retry-After` (a 429).
    pub rate_limited: u64,
    /// Calls dropped by their caller before they answered.
    pub cancelled: u64,
    /// Calls in flight now.
    pub in_flight: u64,
    /// The most calls in flight at once.
    pub max_in_flight: u64,
}

/// How one call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Failed,
    RateLimited,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    calls: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    rate_limited: AtomicU64,
    cancelled: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

impl Counters {
    /// A call starts: counted, and in flight until the returned guard is dropped.
    pub(crate) fn enter(&self) -> InFlight<'_> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let now = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        self.max_in_flight.fetch_max(now, Ordering::AcqRel);
        InFlight {
            counters: self,
            finished: false,
        }
    }

    pub(crate) fn snapshot(&self) -> Counts {
        Counts {
            calls: self.calls.load(Ordering::Relaxed),
            ok: self.ok.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            rate_limited: self.rate_limited.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Acquire),
            max_in_flight: self.max_in_flight.load(Ordering::Acquire),
        }
    }

    pub(crate) fn reset(&self) {
        for counter in [
            &self.calls,
            &self.ok,
            &self.failed,
            &self.rate_limited,
            &self.cancelled,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        self.take_max_in_flight();
    }

    pub(crate) fn take_max_in_flight(&self) -> u64 {
        let now = self.in_flight.load(Ordering::Acquire);
        self.max_in_flight.swap(now, Ordering::AcqRel)
    }
}

/// A call in flight: counted as cancelled if dropped before [`InFlight::finish`].
#[derive(Debug)]
pub(crate) struct InFlight<'a> {
    counters: &'a Counters,
    finished: bool,
}

impl InFlight<'_> {
    pub(crate) fn finish(&mut self, outcome: Outcome) {
        let counter = match outcome {
            Outcome::Ok => &self.counters.ok,
            Outcome::Failed => &self.counters.failed,
            Outcome::RateLimited => &self.counters.rate_limited,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.finished = true;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.counters.cancelled.fetch_add(1, Ordering::Relaxed);
        }
        self.counters.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
