//! The adaptive limit: a bulkhead whose slot count follows the dependency's measured latency.
//!
//! A fixed `max_concurrent` is right for one load and wrong for the next: when the dependency
//! can serve fewer calls at once (a node lost, a slower query plan), the calls past its
//! capacity wait *inside* it, every call gets slower, and the bulkhead still lets the same
//! number in. An adaptive bulkhead measures how long its admitted calls take and moves its
//! limit toward what the dependency actually serves, between a `min` and a `max` it never
//! leaves. Past the limit it behaves as every bulkhead does: a small queue, then refusals.
//!
//! # The algorithm: Vegas, from Netflix's concurrency-limits
//!
//! [`VegasLimit`](https://github.com/Netflix/concurrency-limits/blob/main/concurrency-limits-core/src/main/java/com/netflix/concurrency/limits/limit/VegasLimit.java)
//! (after TCP Vegas) estimates how many calls wait *inside* the dependency from the latency
//! with no load, `rtt_noload` (the least latency seen), and the latency now, `rtt`:
//!
//! ```text
//! queue = limit × (1 − rtt_noload / rtt)
//! ```
//!
//! A dependency that serves `C` calls at once, each in `S`, answers `L > C` concurrent calls
//! in `S × L / C`, so `queue = L − C`: exactly the calls past its capacity. Vegas grows the
//! limit while that queue is small and shrinks it while it is large. As in concurrency-limits'
//! `WindowedLimit`, a sample is a window's average latency, not one call's.
//!
//! What we changed, and why:
//!
//! - **Thresholds are fixed counts, not `log10(limit)`.** Vegas' `alpha = 3·log10(limit)` and
//!   `beta = 6·log10(limit)` let 3 to 6 calls wait inside the dependency; at a limit of 8 that
//!   is half its capacity again. A bulkhead's limits are small, so ours grows when the
//!   estimated queue is under half a call and shrinks when it is over two and a half: it
//!   settles at the capacity plus one or two.
//! - **Shrinking goes to the estimate, not one step.** Vegas subtracts `log10(limit)` per
//!   sample; from 34 to 9 that is some twenty windows. Ours sets the limit to
//!   `limit − queue + 1` (the capacity the latency implies, plus one), at most halving it per
//!   window so that one slow window (a pause, an outlier) cannot collapse it: the bound
//!   Gradient2 puts on its gradient.
//! - **Growing is `+√limit` per window** (at least one), between Vegas' `+log10` and its
//!   `+beta`: from 4 to 32 in under ten windows, overshooting a capacity by at most `√limit`
//!   before the next window takes it back.
//! - **Only calls admitted under the current limit count.** A window's average latency
//!   otherwise mixes calls admitted under the limit before: just after a raise it still
//!   reads low, just after a cut still high, and the limit overshoots both ways. Ours starts
//!   a window afresh at each change and drops the latencies of calls admitted before it.
//! - **Growing needs a window that used every slot** (Vegas: half of them). Otherwise the
//!   caller, not the dependency, limits the load, and the latency says nothing about more
//!   calls: a limit grown past what was used would let through a burst the dependency never
//!   showed it can take. For the same reason the queue estimate multiplies by the calls in
//!   flight at most (the window's peak), not by an unused limit.
//! - Kept from Vegas: the probe that forgets `rtt_noload` every `30 × limit` windows, so a
//!   dependency whose baseline latency rose for good is measured anew instead of being
//!   throttled to `min` forever.
//!
//! # Cost
//!
//! Off the hot path or O(1): the admitted path of an adaptive bulkhead reads the clock once
//! (the call's start, kept in its permit); the release reads it again and adds the call's
//! latency to the window with one atomic addition (count and sum in one word) and one atomic
//! maximum (the peak of calls in flight). The releaser that finds the window over takes a
//! flag (never waits for it: whoever loses goes on) and computes the new limit in a few
//! floating-point operations. No lock, no allocation; a fixed bulkhead does none of this.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::Bulkhead;
//! use velocity_policy_runtime::bulkhead::AdaptiveLimit;
//!
//! let api = Bulkhead::builder("api")
//!     .adaptive(AdaptiveLimit::new(4, 64))
//!     .max_queued(8)
//!     .build();
//! // It starts at `min` and grows while the dependency answers as fast as it does unloaded.
//! assert_eq!(api.max_concurrent(), 4);
//! let adaptive = api.snapshot().adaptive.unwrap();
//! assert_eq!((adaptive.min, adaptive.max), (4, 64));
//! ```

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::observe;

/// The window's completed calls live in the high bits of one word, their latencies' sum (in
/// microseconds) in the low bits, so one addition records a call.
const COUNT_SHIFT: u32 = 44;
const SUM_MASK: u64 = (1 << COUNT_SHIFT) - 1;
/// A window closes at this many calls even before its time is up (the count has 20 bits).
const MAX_SAMPLES: u64 = 1 << 19;
/// Fewer calls than this in a window say too little to move the limit: the window goes on.
const MIN_SAMPLES: u64 = 10;
/// One call's latency counts at most this much (about 4.6 hours), so the sum cannot spill
/// into the count.
const MAX_SAMPLE_US: u64 = SUM_MASK / MAX_SAMPLES;

/// Grow below this estimated queue, shrink above `SHRINK_ABOVE` (calls waiting inside the
/// dependency).
const GROW_BELOW: f64 = 0.5;
const SHRINK_ABOVE: f64 = 2.5;
/// The queue a shrink leaves: the implied capacity plus one call.
const HEADROOM: f64 = 1.0;
/// Vegas' probe: `rtt_noload` is measured anew every `PROBE_PER_SLOT × limit` windows.
const PROBE_PER_SLOT: u64 = 30;

/// The bounds and pace of an adaptive limit (see the [module docs](self)): a bulkhead's
/// setting, defined once in `velocity-policy-model`.
pub use velocity_policy_model::AdaptiveLimit;

/// What an adaptive bulkhead measured, in its [`BulkheadSnapshot`](super::BulkheadSnapshot).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct AdaptiveSnapshot {
    /// The fewest slots.
    pub min: u32,
    /// The most slots.
    pub max: u32,
    /// The limit's estimate, of which the slot count is the whole part.
    pub estimate: f64,
    /// The least window latency seen since the last probe (`rtt_noload`), in milliseconds;
    /// `None` before the first window.
    pub latency_noload_ms: Option<f64>,
    /// The last window's average latency, in milliseconds.
    pub latency_recent_ms: Option<f64>,
    /// Calls the last window's latency says were waiting inside the dependency.
    pub queue_estimate: f64,
    /// Windows measured.
    pub windows: u64,
}

/// An f64 kept in an atomic word; written by the window's closer only.
struct AtomicF64(AtomicU64);

impl AtomicF64 {
    fn new(value: f64) -> Self {
        Self(AtomicU64::new(value.to_bits()))
    }
    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
    fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::Relaxed);
    }
}

/// An adaptive bulkhead's measurements, inside its shared state.
pub(super) struct Adaptation {
    config: AdaptiveLimit,
    epoch: Instant,
    /// Completed calls (high bits) and their latencies' sum in µs (low bits) this window.
    window: AtomicU64,
    /// The most calls in flight at a release this window.
    peak: AtomicU32,
    /// When this window ends, in µs since `epoch`.
    window_ends: AtomicU64,
    /// Taken by the releaser that closes the window.
    closing: AtomicBool,
    /// When the slot count last changed, in µs since `epoch`: only calls admitted since say
    /// what the new count does.
    changed: AtomicU64,
    // Written by the closer only; read by snapshots.
    estimate: AtomicF64,
    /// `rtt_noload` in µs; NaN before the first window and after a probe.
    noload: AtomicF64,
    recent: AtomicF64,
    queue: AtomicF64,
    windows: AtomicU64,
    /// The slot count the last `bulkhead_limit` event reported.
    reported: AtomicU32,
}

impl fmt::Debug for Adaptation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Adaptation")
            .field("config", &self.config)
            .field("estimate", &self.estimate.get())
            .finish_non_exhaustive()
    }
}

impl Adaptation {
    pub(super) fn new(config: AdaptiveLimit) -> Self {
        let window_us = micros(config.window);
        Self {
            config,
            epoch: Instant::now(),
            window: AtomicU64::new(0),
            peak: AtomicU32::new(0),
            window_ends: AtomicU64::new(window_us),
            closing: AtomicBool::new(false),
            changed: AtomicU64::new(0),
            estimate: AtomicF64::new(f64::from(config.min)),
            noload: AtomicF64::new(f64::NAN),
            recent: AtomicF64::new(f64::NAN),
            queue: AtomicF64::new(0.0),
            windows: AtomicU64::new(0),
            reported: AtomicU32::new(config.min),
        }
    }

    pub(super) fn config(&self) -> AdaptiveLimit {
        self.config
    }

    /// Now, in µs since the bulkhead was built: a call's start, kept in its permit.
    #[inline]
    pub(super) fn now(&self) -> u64 {
        micros(self.epoch.elapsed())
    }

    /// A call that started at `started` ended, with `in_flight` calls (itself included)
    /// holding slots just before. Returns the slot count decided when this call closed a
    /// window.
    #[inline]
    pub(super) fn completed(&self, started: u64, in_flight: u32, slots: u32) -> Option<u32> {
        if started < self.changed.load(Ordering::Relaxed) {
            // Admitted under the count before: its latency is about that one.
            return None;
        }
        let now = self.now();
        let latency = now.saturating_sub(started).min(MAX_SAMPLE_US);
        let before = self
            .window
            .fetch_add((1 << COUNT_SHIFT) | latency, Ordering::Relaxed);
        self.peak.fetch_max(in_flight, Ordering::Relaxed);
        let samples = (before >> COUNT_SHIFT) + 1;
        let over = now >= self.window_ends.load(Ordering::Relaxed) || samples >= MAX_SAMPLES;
        if !over || samples < MIN_SAMPLES {
            return None;
        }
        if self.closing.swap(true, Ordering::Acquire) {
            // Another release is closing this window; this call counts in the next.
            return None;
        }
        let decision = self.close(now, slots);
        self.closing.store(false, Ordering::Release);
        decision
    }

    /// Closes the window: Vegas' estimate of the queue inside the dependency, and the limit it
    /// implies.
    #[cold]
    fn close(&self, now: u64, slots: u32) -> Option<u32> {
        let taken = self.window.swap(0, Ordering::AcqRel);
        let peak = self.peak.swap(0, Ordering::Relaxed);
        self.window_ends
            .store(now + micros(self.config.window), Ordering::Relaxed);
        let samples = taken >> COUNT_SHIFT;
        if samples == 0 {
            return None;
        }
        let windows = self.windows.fetch_add(1, Ordering::Relaxed) + 1;
        let rtt = ((taken & SUM_MASK) as f64 / samples as f64).max(1.0);
        self.recent.set(rtt);

        let mut estimate = self.estimate.get();
        if estimate.floor() as u32 != slots {
            // Resized by hand since (a policy reload): go on from there.
            estimate = f64::from(slots);
        }
        let probe = windows.is_multiple_of(PROBE_PER_SLOT * u64::from(slots));
        let noload = match self.noload.get() {
            seen if seen.is_nan() || probe || rtt < seen => rtt,
            seen => seen,
        };
        self.noload.set(noload);

        // The calls in flight: the limit when every slot was used, fewer when not.
        let limit = f64::from(slots.min(peak.max(1)));
        let queue = limit * (1.0 - noload / rtt);
        self.queue.set(queue);
        // Only a window that used every slot says the limit is what holds the load back.
        let app_limited = peak < slots;
        let next = if queue > SHRINK_ABOVE {
            (limit - queue + HEADROOM).max(estimate / 2.0)
        } else if queue < GROW_BELOW && !app_limited {
            estimate + estimate.sqrt().max(1.0)
        } else {
            estimate
        };
        let next = next.clamp(f64::from(self.config.min), f64::from(self.config.max));
        self.estimate.set(next);
        Some(next.floor() as u32)
    }

    /// The slot count changed (by a window's decision or by hand): the window starts again,
    /// with the calls admitted from now on.
    pub(super) fn restart(&self) {
        let now = self.now();
        self.changed.store(now, Ordering::Relaxed);
        self.window.store(0, Ordering::Relaxed);
        self.peak.store(0, Ordering::Relaxed);
        self.window_ends
            .store(now + micros(self.config.window), Ordering::Relaxed);
    }

    /// Tells of a new slot count when it moved materially from the last one told (by a
    /// quarter, and at least two slots): a limit settling at a capacity moves by one now and
    /// then, which is not news.
    pub(super) fn report(&self, name: &str, slots: u32) {
        let told = self.reported.load(Ordering::Relaxed);
        let material = (told / 4).max(2);
        if slots.abs_diff(told) < material {
            return;
        }
        self.reported.store(slots, Ordering::Relaxed);
        observe::bulkhead_limit_changed(
            name,
            told,
            slots,
            ms_f64(self.noload.get()),
            ms_f64(self.recent.get()),
            self.queue.get(),
        );
    }

    pub(super) fn snapshot(&self) -> AdaptiveSnapshot {
        AdaptiveSnapshot {
            min: self.config.min,
            max: self.config.max,
            estimate: self.estimate.get(),
            latency_noload_ms: ms_f64(self.noload.get()),
            latency_recent_ms: ms_f64(self.recent.get()),
            queue_estimate: self.queue.get(),
            windows: self.windows.load(Ordering::Relaxed),
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// µs to ms, `None` for a value not measured yet.
fn ms_f64(us: f64) -> Option<f64> {
    (!us.is_nan()).then_some(us / 1000.0)
}
