//! Calls in flight per request criticality, and each level's recent peak: what a bulkhead
//! keeps free for the levels above a sheddable request. Plain atomics beside tokio's
//! semaphore (which does the admitting): counters, not a lock, so they are model-checked with
//! loom below (`RUSTFLAGS="--cfg policy_loom" cargo test -p velocity-policy-runtime --lib levels::loom`).

#[cfg(policy_loom)]
use ::loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
#[cfg(not(policy_loom))]
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::criticality::Criticality;

/// A call, in the units a level's peak is kept in.
const CALL: u32 = 256;

/// The decay of a level's peak toward what it holds now, per release of that level (and per
/// sheddable admission, for the levels above it): a 128th of a call, so at a few hundred calls
/// a second a peak remembers the last second or two.
const PEAK_STEP: u32 = 2;

/// Calls in flight per [`Criticality`], and each level's recent peak: what the levels above a
/// sheddable request are measured to need. Nothing is counted until a call other than
/// `critical` comes: a bulkhead whose calls are all `critical` reads one flag per admission.
#[derive(Debug, Default)]
pub(super) struct Levels {
    mixed: AtomicBool,
    in_flight: [AtomicU32; 4],
    /// The recent peak of calls in flight, in [`CALL`]s.
    peak: [AtomicU32; 4],
}

impl Levels {
    /// Whether a call of `level` is counted (and from now on every call, once one is not
    /// `critical`).
    #[inline]
    pub(super) fn counts(&self, level: Criticality) -> bool {
        if self.mixed.load(Ordering::Relaxed) {
            return true;
        }
        if level == Criticality::Critical {
            return false;
        }
        self.mixed.store(true, Ordering::Relaxed);
        true
    }

    /// A call of `level` took a slot: its rank, for the permit.
    pub(super) fn admitted(&self, level: Criticality) -> u8 {
        let rank = level.rank();
        let now = self.in_flight[rank].fetch_add(1, Ordering::Relaxed) + 1;
        self.peak[rank].fetch_max(now.saturating_mul(CALL), Ordering::Relaxed);
        rank as u8
    }

    /// A call counted at `rank` gave its slot back.
    pub(super) fn released(&self, rank: u8) {
        let rank = usize::from(rank);
        if let (Some(in_flight), Some(_)) = (self.in_flight.get(rank), self.peak.get(rank)) {
            in_flight.fetch_sub(1, Ordering::Relaxed);
            self.decay(rank);
        }
    }

    /// Moves the peak of `rank` one step toward what it holds now.
    fn decay(&self, rank: usize) {
        let floor = self.in_flight[rank]
            .load(Ordering::Relaxed)
            .saturating_mul(CALL);
        let _ = self.peak[rank].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |peak| {
            (peak > floor).then(|| peak.saturating_sub(PEAK_STEP).max(floor))
        });
    }

    /// The slots the levels above `level` need beyond what they hold: each one's recent peak
    /// (rounded up), less its calls in flight.
    pub(super) fn kept_above(&self, level: Criticality) -> u32 {
        (level.rank() + 1..4)
            .map(|rank| {
                self.decay(rank);
                let need = self.peak[rank].load(Ordering::Relaxed).div_ceil(CALL);
                need.saturating_sub(self.in_flight[rank].load(Ordering::Relaxed))
            })
            .sum()
    }
}

#[cfg(all(test, not(policy_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_critical_only_bulkhead_counts_nothing() {
        let levels = Levels::default();
        assert!(!levels.counts(Criticality::Critical));
        assert!(levels.counts(Criticality::Sheddable));
        assert!(
            levels.counts(Criticality::Critical),
            "mixed from the first sheddable call on"
        );
    }

    #[test]
    fn a_level_keeps_its_recent_peak_above_a_sheddable_request() {
        let levels = Levels::default();
        let ranks: Vec<u8> = (0..3)
            .map(|_| levels.admitted(Criticality::Critical))
            .collect();
        for rank in ranks {
            levels.released(rank);
        }
        // Three critical calls were in flight a moment ago: three slots are kept for them.
        assert_eq!(levels.kept_above(Criticality::Sheddable), 3);
        // The peak decays, a little per look, to what the level holds now.
        for _ in 0..(3 * CALL / PEAK_STEP) {
            levels.kept_above(Criticality::Sheddable);
        }
        assert_eq!(levels.kept_above(Criticality::Sheddable), 0);
    }
}

/// Model checks: every interleaving of two threads' admissions and releases, as loom explores
/// them (loom's atomics stand in for std's under `--cfg policy_loom`).
#[cfg(all(test, policy_loom))]
mod loom {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn concurrent_admissions_and_releases_leave_nothing_in_flight() {
        ::loom::model(|| {
            let levels = Arc::new(Levels::default());
            let other = Arc::clone(&levels);
            let thread = ::loom::thread::spawn(move || {
                if other.counts(Criticality::Critical) {
                    let rank = other.admitted(Criticality::Critical);
                    other.released(rank);
                }
            });
            assert!(levels.counts(Criticality::Sheddable));
            let rank = levels.admitted(Criticality::Sheddable);
            let kept = levels.kept_above(Criticality::Sheddable);
            assert!(
                kept <= 1,
                "at most the one critical call is kept for: {kept}"
            );
            levels.released(rank);
            thread.join().expect("the other thread");
            for level in [Criticality::Critical, Criticality::Sheddable] {
                assert_eq!(levels.in_flight[level.rank()].load(Ordering::Relaxed), 0);
            }
            // The sheddable call's peak was recorded, and its release decayed it by one step.
            assert_eq!(
                levels.peak[Criticality::Sheddable.rank()].load(Ordering::Relaxed),
                CALL - PEAK_STEP
            );
        });
    }

    #[test]
    fn two_sheddable_calls_both_count_and_the_peak_sees_both_or_one_at_a_time() {
        ::loom::model(|| {
            let levels = Arc::new(Levels::default());
            let other = Arc::clone(&levels);
            let thread = ::loom::thread::spawn(move || {
                let rank = other.admitted(Criticality::Sheddable);
                other.released(rank);
            });
            let rank = levels.admitted(Criticality::Sheddable);
            levels.released(rank);
            thread.join().expect("the other thread");
            let rank = Criticality::Sheddable.rank();
            assert_eq!(levels.in_flight[rank].load(Ordering::Relaxed), 0);
            let peak = levels.peak[rank].load(Ordering::Relaxed);
            // Each admission raised the peak to at least one call; each release decayed it by
            // one step at most.
            assert!(
                peak >= CALL - 2 * PEAK_STEP && peak <= 2 * CALL,
                "peak {peak}"
            );
        });
    }
}
