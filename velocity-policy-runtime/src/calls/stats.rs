//! An operation's counts for the dashboard's history (feature `dashboard`): its calls, how
//! they ended, its latencies in buckets, added to as each call ends while the history records.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::RefusalKind;
use crate::instruments::CallOutcome;

/// Every refusal kind, a drill's included: one counter and one column each.
pub(crate) const REFUSAL_KINDS: [RefusalKind; 6] = [
    RefusalKind::BreakerOpen,
    RefusalKind::BulkheadFull,
    RefusalKind::Shed,
    RefusalKind::InsufficientBudget,
    RefusalKind::RateLimited,
    RefusalKind::Injected,
];

/// Latency buckets: bucket `i` holds calls up to `FIRST × 2^((i + 1) / 3)`, from 100µs to about
/// four minutes (the last holds everything longer).
pub(crate) const BUCKETS: usize = 64;
const FIRST: Duration = Duration::from_micros(100);

static RECORDING: AtomicBool = AtomicBool::new(false);

/// Whether a sampler runs (then every annotated call is measured for it).
#[inline]
pub(crate) fn recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// From now on, every annotated call is measured for the history (its sampler started).
pub(crate) fn record() {
    RECORDING.store(true, Ordering::Relaxed);
}

pub(crate) fn bucket_of(took: Duration) -> usize {
    if took <= FIRST {
        return 0;
    }
    let ratio = took.as_secs_f64() / FIRST.as_secs_f64();
    // 3 × log2: a third of a doubling per bucket.
    let index = (3.0 * ratio.log2()).floor();
    if index.is_finite() && index >= 0.0 {
        (index as usize).min(BUCKETS - 1)
    } else {
        0
    }
}

/// The longest latency bucket `i` holds, in milliseconds.
pub(crate) fn bucket_upper_ms(i: usize) -> f64 {
    let exponent = (i as f64 + 1.0) / 3.0;
    FIRST.as_secs_f64() * 1000.0 * exponent.exp2()
}

/// One operation's calls, counted as they end (the [`Calls`](super::Calls) static of its
/// function holds it).
pub(crate) struct CallStats {
    calls: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    expired: AtomicU64,
    refused: [AtomicU64; REFUSAL_KINDS.len()],
    latency: [AtomicU64; BUCKETS],
}

/// What a [`CallStats`] held at one moment.
#[derive(Clone)]
pub(crate) struct CallCounts {
    pub(crate) calls: u64,
    pub(crate) ok: u64,
    pub(crate) failed: u64,
    pub(crate) expired: u64,
    pub(crate) refused: [u64; REFUSAL_KINDS.len()],
    pub(crate) latency: [u64; BUCKETS],
}

impl CallStats {
    pub(crate) const fn new() -> Self {
        Self {
            calls: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            refused: [const { AtomicU64::new(0) }; REFUSAL_KINDS.len()],
            latency: [const { AtomicU64::new(0) }; BUCKETS],
        }
    }

    /// One call ended with `outcome` after `took`.
    #[inline]
    pub(crate) fn ended(&self, outcome: CallOutcome, took: Duration) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let counter = match outcome {
            CallOutcome::Ok => &self.ok,
            CallOutcome::Failed => &self.failed,
            CallOutcome::Expired => &self.expired,
            CallOutcome::Refused(kind) => {
                let index = REFUSAL_KINDS.iter().position(|k| *k == kind).unwrap_or(0);
                &self.refused[index]
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.latency[bucket_of(took)].fetch_add(1, Ordering::Relaxed);
    }

    /// What it holds now.
    pub(crate) fn counts(&self) -> CallCounts {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CallCounts {
            calls: load(&self.calls),
            ok: load(&self.ok),
            failed: load(&self.failed),
            expired: load(&self.expired),
            refused: std::array::from_fn(|i| load(&self.refused[i])),
            latency: std::array::from_fn(|i| load(&self.latency[i])),
        }
    }
}
