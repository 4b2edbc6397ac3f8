//! A sliding window of two counters, lock-free and exact.
//!
//! Internal plumbing shared by the breaker (failures and calls) and the retry allowance
//! (retries and calls); it is not a mechanism of its own. The window is cut into
//! [`BUCKETS`] buckets; each bucket packs its epoch and its count into one `AtomicU64`, so an
//! increment is one compare-and-swap and never loses a count to a concurrent rotation.
//!
//! Precision: an event younger than the window is always counted; an event older than
//! `window + window / BUCKETS` is never counted.
//!
//! Size: fixed. [`BUCKETS`] + 1 slots of two `AtomicU64`s, whatever the traffic and however long
//! the window: counting a call never allocates, and a window never grows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Buckets per window. The array holds one more, for the bucket being filled.
pub(crate) const BUCKETS: u64 = 10;
const SLOTS: usize = BUCKETS as usize + 1;
/// The smallest bucket: windows under 10 ms are counted in 1 ms buckets.
const MIN_BUCKET_NANOS: u64 = 1_000_000;
const COUNT_BITS: u32 = 24;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const EPOCH_MASK: u64 = (1 << (64 - COUNT_BITS)) - 1;

/// Nanoseconds since a mechanism's creation, on tokio's clock (paused in tests).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    base: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            base: Instant::now(),
        }
    }

    /// Now, as nanoseconds since the clock's base. Never 0 after the first nanosecond; callers
    /// that use 0 as "unset" add 1 where it matters.
    pub(crate) fn now_nanos(&self) -> u64 {
        self.nanos_at(Instant::now())
    }

    pub(crate) fn nanos_at(&self, at: Instant) -> u64 {
        saturating_nanos(at.saturating_duration_since(self.base))
    }

    pub(crate) fn instant_at(&self, nanos: u64) -> Instant {
        self.base + Duration::from_nanos(nanos)
    }
}

pub(crate) fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Debug, Default)]
struct Slot {
    hits: AtomicU64,
    calls: AtomicU64,
}

/// Two counters, `hits` (failures, retries) and `calls`, over a sliding window.
#[derive(Debug)]
pub(crate) struct Window {
    bucket_nanos: u64,
    slots: [Slot; SLOTS],
}

/// Sums over the window at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Counts {
    pub(crate) hits: u64,
    pub(crate) calls: u64,
}

fn pack(epoch: u64, count: u64) -> u64 {
    ((epoch & EPOCH_MASK) << COUNT_BITS) | count.min(COUNT_MASK)
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> COUNT_BITS, word & COUNT_MASK)
}

fn bump(word: &AtomicU64, epoch: u64) {
    let epoch = epoch & EPOCH_MASK;
    let mut current = word.load(Ordering::Relaxed);
    loop {
        let (e, c) = unpack(current);
        let later = e != epoch && e.wrapping_sub(epoch) & EPOCH_MASK <= EPOCH_MASK / 2;
        let next = if e == epoch || later {
            // The current bucket; or a thread with a later clock already moved this slot on,
            // and the event is counted there rather than lost.
            pack(e, c + 1)
        } else {
            // The slot holds an older epoch: start it afresh.
            pack(epoch, 1)
        };
        match word.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return,
            Err(actual) => current = actual,
        }
    }
}

impl Window {
    pub(crate) fn new(window: Duration) -> Self {
        let bucket_nanos = (saturating_nanos(window) / BUCKETS).max(MIN_BUCKET_NANOS);
        Self {
            bucket_nanos,
            slots: Default::default(),
        }
    }

    fn epoch(&self, now_nanos: u64) -> u64 {
        now_nanos / self.bucket_nanos
    }

    fn slot(&self, epoch: u64) -> &Slot {
        // SLOTS is small; the modulo keeps the index in range.
        &self.slots[(epoch % SLOTS as u64) as usize]
    }

    /// Counts one call that was also a hit.
    pub(crate) fn record_hit(&self, now_nanos: u64) {
        let epoch = self.epoch(now_nanos);
        let slot = self.slot(epoch);
        bump(&slot.hits, epoch);
        bump(&slot.calls, epoch);
    }

    /// Counts one hit without counting a call (the retry allowance's withdrawals).
    pub(crate) fn record_hit_only(&self, now_nanos: u64) {
        let epoch = self.epoch(now_nanos);
        bump(&self.slot(epoch).hits, epoch);
    }

    /// Counts one call that was not a hit.
    pub(crate) fn record_call(&self, now_nanos: u64) {
        let epoch = self.epoch(now_nanos);
        bump(&self.slot(epoch).calls, epoch);
    }

    /// The sums over the window ending at `now_nanos`.
    pub(crate) fn counts(&self, now_nanos: u64) -> Counts {
        let current = self.epoch(now_nanos) & EPOCH_MASK;
        let mut counts = Counts::default();
        let fresh = |word: &AtomicU64| {
            let (e, c) = unpack(word.load(Ordering::Acquire));
            let age = current.wrapping_sub(e) & EPOCH_MASK;
            // Age BUCKETS is the oldest full bucket still inside the window; a slot "from the
            // future" (a thread with a later clock) counts as current.
            if age <= BUCKETS || age > EPOCH_MASK / 2 {
                c
            } else {
                0
            }
        };
        for slot in &self.slots {
            counts.hits += fresh(&slot.hits);
            counts.calls += fresh(&slot.calls);
        }
        counts
    }

    /// Forgets everything counted so far (a breaker that opened starts its next window empty).
    pub(crate) fn clear(&self) {
        for slot in &self.slots {
            slot.hits.store(0, Ordering::Release);
            slot.calls.store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn counts_inside_the_window_and_forgets_after_it() {
        let w = Window::new(Duration::from_secs(10));
        w.record_hit(0);
        w.record_hit(5_000 * MS);
        w.record_call(5_000 * MS);
        assert_eq!(w.counts(9_999 * MS), Counts { hits: 2, calls: 3 });
        // The first event is older than window + one bucket: forgotten.
        assert_eq!(w.counts(11_000 * MS), Counts { hits: 1, calls: 2 });
        assert_eq!(w.counts(16_000 * MS), Counts::default());
    }

    #[test]
    fn an_event_younger_than_the_window_is_always_counted() {
        let w = Window::new(Duration::from_secs(10));
        for start in (0..20_000).step_by(137) {
            let w2 = Window::new(Duration::from_secs(10));
            w2.record_hit(start * MS);
            assert_eq!(w2.counts((start + 9_999) * MS).hits, 1, "start {start}");
        }
        w.clear();
    }

    #[test]
    fn clear_forgets() {
        let w = Window::new(Duration::from_secs(1));
        w.record_hit(10);
        w.clear();
        assert_eq!(w.counts(20), Counts::default());
    }

    #[test]
    fn concurrent_bumps_are_exact() {
        let w = std::sync::Arc::new(Window::new(Duration::from_secs(60)));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let w = w.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        // Threads with slightly different clocks, crossing bucket edges.
                        w.record_hit((i + t * 3) * MS / 10);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(w.counts(1_000 * MS).hits, 40_000);
    }
}
