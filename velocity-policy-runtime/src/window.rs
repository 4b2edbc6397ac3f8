//! Sliding windows, lock-free: [`Window`], two bucketed counters, and [`Ring`], the exact times
//! of the last few failures.
//!
//! Internal plumbing shared by the breaker (failures and calls) and the retry allowance
//! (retries and calls); it is not a mechanism of its own.
//!
//! A count breaker (`5 failures within 30s`) keeps a [`Ring`] of its last `count` failure
//! times and opens when the oldest of them is inside the window: exact, failures 31 s apart
//! never add up in a 30 s window. A ratio breaker and the retry allowance count every call, so
//! they use the bucketed [`Window`], with the slack below. The [`Window`] is cut into
//! [`BUCKETS`] buckets; each bucket packs its epoch and its count into one `AtomicU64`, so an
//! increment is one compare-and-swap and never loses a count to a concurrent rotation.
//!
//! Precision: an event younger than the window is always counted; an event older than
//! `window + window / BUCKETS` is never counted.
//!
//! The compare-and-swap buckets and the ring are model-checked with loom (the `loom` tests
//! below: `RUSTFLAGS="--cfg policy_loom" cargo test -p velocity-policy-runtime --lib loom`).
//!
//! Size: fixed. [`BUCKETS`] + 1 slots of two `AtomicU64`s, whatever the traffic and however
//! long the window: counting a call never allocates, and a window never grows.

#[cfg(policy_loom)]
use ::loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(policy_loom))]
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

/// Nanoseconds since a mechanism's creation, on tokio's clock (paused in tests): what its
/// atomics hold, converted from and to instants as tokio's own timer does
/// (`saturating_duration_since`).
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

    /// `at` as nanoseconds since the clock's base (0 before it).
    #[inline]
    pub(crate) fn nanos_at(&self, at: Instant) -> u64 {
        saturating_nanos(at.saturating_duration_since(self.base))
    }

    pub(crate) fn instant_at(&self, nanos: u64) -> Instant {
        let offset = Duration::from_nanos(nanos);
        self.base.checked_add(offset).unwrap_or(self.base)
    }
}

/// `d` in nanoseconds, saturating at `u64::MAX` (about 584 years): the one conversion every
/// mechanism uses.
#[inline]
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
    /// The epoch most recently computed: an event inside it takes it with two
    /// multiplications instead of a 64-bit division. A hint only, checked before use.
    recent_epoch: AtomicU64,
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
            recent_epoch: AtomicU64::new(0),
            slots: Default::default(),
        }
    }

    #[inline]
    fn epoch(&self, now_nanos: u64) -> u64 {
        let recent = self.recent_epoch.load(Ordering::Relaxed);
        // `recent` was once `now / bucket_nanos` for some `now`: the product cannot overflow.
        let start = recent.wrapping_mul(self.bucket_nanos);
        if now_nanos >= start && now_nanos - start < self.bucket_nanos {
            return recent;
        }
        let epoch = now_nanos / self.bucket_nanos;
        self.recent_epoch.store(epoch, Ordering::Relaxed);
        epoch
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
    #[inline]
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

/// The largest failure count kept as exact times; a count breaker with a higher threshold
/// counts in a bucketed [`Window`] (slack: one bucket, a tenth of the window).
pub(crate) const MAX_RING: u32 = 1024;

/// The times of the last `len` failures, for a count breaker's exact window: one `AtomicU64`
/// per failure of the threshold, allocated once when the breaker is built.
///
/// Concurrent failures each take their own slot (a `fetch_add` on the sequence), so none is
/// lost; a failure whose slot write races the decision of another is seen by the next one.
#[derive(Debug)]
pub(crate) struct Ring {
    /// Nanoseconds on the breaker's clock, plus 1 (0: empty).
    times: Box<[AtomicU64]>,
    next: AtomicU64,
}

impl Ring {
    pub(crate) fn new(len: u32) -> Self {
        Self {
            times: (0..len.max(1)).map(|_| AtomicU64::new(0)).collect(),
            next: AtomicU64::new(0),
        }
    }

    fn inside(time: u64, now_nanos: u64, window_nanos: u64) -> bool {
        time != 0 && now_nanos.saturating_sub(time - 1) < window_nanos
    }

    /// Records a failure at `now_nanos`; true when it completes `len` failures inside the
    /// window ending now (the oldest of the last `len` is younger than the window).
    pub(crate) fn record(&self, now_nanos: u64, window_nanos: u64) -> bool {
        let len = self.times.len() as u64;
        let seq = self.next.fetch_add(1, Ordering::AcqRel);
        // `len` is at most MAX_RING: the index is in range.
        self.times[(seq % len) as usize].store(now_nanos.saturating_add(1), Ordering::Release);
        // The slot after this one is the oldest of the last `len` (this one when `len` is 1).
        let oldest = self.times[((seq + 1) % len) as usize].load(Ordering::Acquire);
        Self::inside(oldest, now_nanos, window_nanos)
    }

    /// How many of the last `len` failures are inside the window ending at `now_nanos`.
    pub(crate) fn count(&self, now_nanos: u64, window_nanos: u64) -> u64 {
        self.times
            .iter()
            .filter(|time| Self::inside(time.load(Ordering::Acquire), now_nanos, window_nanos))
            .count() as u64
    }

    /// Forgets every failure (a breaker that opened starts counting afresh).
    pub(crate) fn clear(&self) {
        for time in &*self.times {
            time.store(0, Ordering::Release);
        }
    }
}

#[cfg(all(test, not(policy_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_ring_is_exact_at_the_window_edge() {
        let window = 30_000 * MS;
        let ring = Ring::new(3);
        assert!(!ring.record(0, window));
        assert!(!ring.record(10_000 * MS, window));
        // The oldest is 30 s old: not inside a 30 s window.
        assert!(!ring.record(30_000 * MS, window));
        assert_eq!(ring.count(30_000 * MS, window), 2);
        // 10 s, 30 s and 39.999 s: all inside.
        assert!(ring.record(39_999 * MS, window));
        ring.clear();
        assert_eq!(ring.count(39_999 * MS, window), 0);
        let one = Ring::new(1);
        assert!(one.record(5, window));
    }

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

    /// A tally on a clock whose base is the process clock's 0: moments are its nanoseconds.
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

/// Model checks: every interleaving of two threads, as loom explores them (loom's atomics
/// stand in for std's under `--cfg policy_loom`).
#[cfg(all(test, policy_loom))]
mod loom {
    use std::sync::Arc;

    use super::*;

    const BUCKET: u64 = 100_000_000;

    fn window() -> Window {
        Window::new(Duration::from_nanos(BUCKETS * BUCKET))
    }

    #[test]
    fn concurrent_bumps_in_one_bucket_lose_nothing() {
        ::loom::model(|| {
            let window = Arc::new(window());
            let other = Arc::clone(&window);
            let thread = ::loom::thread::spawn(move || other.record_hit(5));
            window.record_call(7);
            thread.join().expect("the other thread");
            assert_eq!(window.counts(9), Counts { hits: 1, calls: 2 });
        });
    }

    #[test]
    fn a_rotation_racing_a_late_bump_keeps_the_newer_epoch() {
        ::loom::model(|| {
            let window = Arc::new(window());
            let other = Arc::clone(&window);
            // Epochs 0 and SLOTS share a slot: one thread is a whole window behind the other.
            let late = SLOTS as u64 * BUCKET;
            let thread = ::loom::thread::spawn(move || other.record_call(late));
            window.record_call(1);
            thread.join().expect("the other thread");
            let word = window.slot(SLOTS as u64).calls.load(Ordering::Acquire);
            let (epoch, count) = unpack(word);
            // The slot ends on the newer epoch whatever the order: the old event is either
            // counted there (it came second) or rotated away (it came first), never kept alone.
            assert_eq!(epoch, SLOTS as u64);
            assert!((1..=2).contains(&count), "count {count}");
            assert!(window.counts(late).calls >= 1);
        });
    }

    #[test]
    fn concurrent_failures_each_take_a_slot_of_the_ring() {
        ::loom::model(|| {
            let ring = Arc::new(Ring::new(2));
            let other = Arc::clone(&ring);
            let thread = ::loom::thread::spawn(move || other.record(10, 1_000));
            ring.record(20, 1_000);
            thread.join().expect("the other thread");
            assert_eq!(ring.count(30, 1_000), 2, "neither failure was lost");
            // A third failure sees both (the decision the doc promises to the next one).
            assert!(ring.record(40, 1_000));
        });
    }
}
