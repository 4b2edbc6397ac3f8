//! Is the first attempt just slow? Hedging: a second attempt when the first has not answered
//! within the hedge delay, the first answer wins, the other is dropped.
//!
//! A tail of slow answers is often one slow replica or one long pause, not a slow request:
//! a second attempt started after the usual latency answers well before the first would
//! ("The Tail at Scale"; Finagle's `BackupRequestFilter`, tower's `hedge`). The rules here keep
//! that from turning into twice the load:
//!
//! - **Only idempotent work.** The operation is an [`Idempotent`], as for a retry: both
//!   attempts may run to the end on the dependency's side.
//! - **One deadline.** Every attempt, the first and its hedges, runs under the same
//!   [`Deadline`]; no hedge starts once the deadline is about to pass, and the hedge delay
//!   never extends it.
//! - **One budget.** Each hedge withdraws from a [`RetryAllowance`]: the retry policy's when
//!   the operation also retries ([`hedge_within_retry`]: one allowance for both, as Finagle
//!   and tower-resilience do), else its own. Under an outage, when every call is slow, the allowance runs out at its
//!   share of the traffic and the hedging stops: it cannot double the load.
//! - **A refusal is not hedged.** Each attempt goes through the breaker and the bulkhead like
//!   any attempt (in the expansion, the attempt's own steps); a first attempt refused ends the
//!   call as a refusal, and a hedge refused was never started on the dependency: it is counted
//!   (`refused`) and the call waits for the attempts that run.
//! - **First answer wins.** The first success is returned at once and every other attempt in
//!   flight is dropped (cancelled: its future is never polled again). A failure is the answer
//!   only once nothing else is in flight: a hedge racing a first attempt that failed can
//!   still answer.
//!
//! # The delay
//!
//! [`HedgeDelay::After`] is a fixed duration. [`HedgeDelay::Percentile`] follows the
//! operation's own latency: every call records how long it took (from its first attempt's start
//! to its answer) in a bounded, lock-free histogram of fixed buckets (eight per power of two
//! of microseconds, so a percentile is read at most 12.5% high; 240 buckets, about 1 KiB per
//! policy), halved whenever it holds 2 × [`HISTORY`] calls so it follows the recent traffic. The
//! percentile is recomputed every 16 calls and read from one atomic. Until
//! [`HedgeBuilder::min_samples`] calls were recorded there is no percentile and no hedge.
//!
//! `hdrhistogram` was the other candidate: precise, but recording takes `&mut`, so every call
//! would take one shared lock (or its `sync` feature's per-thread recorders and channel); the
//! fixed buckets here take one atomic add, which is what a hot path may do.
//!
//! # Costs
//!
//! A hedged call reads the clock twice (its start, for the delay's timer, and its end, for the
//! histogram when the delay is a percentile) and allocates nothing: the attempts in flight
//! (at most [`MAX_IN_FLIGHT`]) live in the call's own future. An operation without a hedge
//! pays nothing.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::{CallError, Deadline, Idempotent};
//! use velocity_policy_runtime::hedge::{Hedge, hedge_within};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let hedge = Hedge::builder("search").after(Duration::from_millis(50)).max(2).build();
//! let deadline = Deadline::after(Duration::from_secs(1));
//!
//! // The first attempt takes 400 ms, a hedge 10 ms: the hedge, started at 50 ms, answers.
//! let answer: Result<u32, CallError<std::io::Error>> = hedge_within(
//!     &deadline,
//!     &hedge,
//!     Idempotent::claim(|attempt: velocity_policy_runtime::retry::Attempt| async move {
//!         let took = if attempt.number == 1 { 400 } else { 10 };
//!         tokio::time::sleep(Duration::from_millis(took)).await;
//!         Ok(attempt.number)
//!     }),
//! )
//! .await;
//! assert_eq!(answer.unwrap(), 2);
//! assert_eq!(hedge.snapshot().won, 1);
//! # }
//! ```

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use crate::deadline::Deadline;
use crate::error::CallError;
use crate::instruments::HedgeMetrics;
use crate::observe;
use crate::retry::{Attempt, Idempotent, RetryAllowance, RetryPolicy, TIMER_TICK};

/// A hedging policy's settings and when a hedge starts: defined once, in
/// `velocity-policy-model`, for the `.policy` language, the attribute macros and this runtime.
pub use velocity_policy_model::hedge::{HedgeConfig, HedgeDelay};

/// Attempts in flight at once, the first included: the most [`HedgeBuilder::max`] takes
/// ([`HedgeConfig::MAX_IN_FLIGHT`]).
pub const MAX_IN_FLIGHT: u32 = HedgeConfig::MAX_IN_FLIGHT;

/// Calls the percentile's histogram keeps in view: it is halved whenever it holds twice this.
pub const HISTORY: u64 = 1024;

/// The delay as the dashboard shows it: `50ms` or `p95`.
fn delay_text(delay: HedgeDelay) -> String {
    match delay {
        HedgeDelay::After(d) => crate::error::Human(d).to_string(),
        HedgeDelay::Percentile(p) => format!("p{p}"),
    }
}

#[derive(Debug, Default)]
struct Stats {
    calls: AtomicU64,
    started: AtomicU64,
    won: AtomicU64,
    lost: AtomicU64,
    refused: AtomicU64,
    stopped_by_budget: AtomicU64,
    stopped_by_deadline: AtomicU64,
}

/// A named hedging policy: the delay, how many attempts may be in flight, and the allowance
/// its hedges draw from.
pub struct Hedge {
    name: Arc<str>,
    config: HedgeConfig,
    allowance: Arc<RetryAllowance>,
    latency: Latency,
    stats: Stats,
    metrics: HedgeMetrics,
}

impl fmt::Debug for Hedge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hedge")
            .field("name", &self.name)
            .field("config", &self.config)
            .field("allowance", &self.allowance)
            .finish()
    }
}

/// Builds a [`Hedge`]; see [`Hedge::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct HedgeBuilder {
    name: Arc<str>,
    config: HedgeConfig,
    allowance: Option<Arc<RetryAllowance>>,
}

impl HedgeBuilder {
    /// Every setting at once (see [`HedgeConfig`]); the setters below change one each. Its
    /// allowance is the hedge's own unless [`allowance`](Self::allowance) shares one.
    pub fn config(mut self, config: HedgeConfig) -> Self {
        self.config = config;
        self
    }

    /// A hedge after a fixed `delay` without an answer.
    pub fn after(mut self, delay: Duration) -> Self {
        self.config = self.config.with_after(HedgeDelay::After(delay));
        self
    }

    /// A hedge after the operation's latency at `percentile` (`95.0` for p95; clamped to
    /// `[0, 100]`, NaN counts as 100: never).
    pub fn percentile(mut self, percentile: f64) -> Self {
        self.config = self.config.with_after(HedgeDelay::percentile(percentile));
        self
    }

    /// The delay, either kind.
    pub fn delay(mut self, delay: HedgeDelay) -> Self {
        self.config = self.config.with_after(delay);
        self
    }

    /// Attempts in flight at most, the first included: 2 (the default) is one hedge. Clamped
    /// to `[1, MAX_IN_FLIGHT]`; 1 never hedges.
    pub fn max(mut self, max: u32) -> Self {
        self.config = self.config.with_max(max);
        self
    }

    /// The allowance hedges withdraw from when the operation does not retry, instead of one
    /// of the hedge's own (made from the config's [`allowance`](HedgeConfig::allowance), or
    /// [`RetryAllowance::default`]); with a retry policy, [`hedge_within_retry`] draws from
    /// the policy's instead.
    pub fn allowance(mut self, allowance: Arc<RetryAllowance>) -> Self {
        self.allowance = Some(allowance);
        self
    }

    /// Calls recorded before a percentile delay hedges at all (20 unless told).
    pub fn min_samples(mut self, min_samples: u64) -> Self {
        self.config = self.config.with_min_samples(min_samples);
        self
    }

    /// Builds the policy.
    pub fn build(self) -> Hedge {
        let config = self.config;
        Hedge {
            metrics: HedgeMetrics::new(&self.name),
            name: self.name,
            allowance: self.allowance.unwrap_or_else(|| {
                Arc::new(RetryAllowance::from_config(
                    config.allowance.unwrap_or_default(),
                ))
            }),
            config,
            latency: Latency::new(),
            stats: Stats::default(),
        }
    }
}

/// A point-in-time view of a hedging policy, for dashboards.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct HedgeSnapshot {
    /// The policy's name.
    pub name: Arc<str>,
    /// The delay as configured: `50ms` or `p95`.
    pub after: String,
    /// The delay a call would wait now, in milliseconds; `None` while a percentile has too few
    /// calls recorded.
    pub delay_ms: Option<f64>,
    /// Attempts in flight at most, the first included.
    pub max: u32,
    /// Calls hedged or not.
    pub calls: u64,
    /// Hedges started.
    pub started: u64,
    /// Hedges whose answer was the call's.
    pub won: u64,
    /// Hedges dropped because another attempt answered first (or the call ended).
    pub lost: u64,
    /// Hedges the breaker or the bulkhead refused (never started on the dependency).
    pub refused: u64,
    /// Hedges not started because the allowance was exhausted.
    pub stopped_by_budget: u64,
    /// Hedges not started because the deadline was about to pass.
    pub stopped_by_deadline: u64,
}

impl Hedge {
    /// A builder: a hedge after 50 ms, `max` 2, the default allowance, 20 calls before a
    /// percentile hedges.
    pub fn builder(name: impl Into<Arc<str>>) -> HedgeBuilder {
        HedgeBuilder {
            name: name.into(),
            config: HedgeConfig::DEFAULT,
            allowance: None,
        }
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The delay as configured.
    pub fn configured_delay(&self) -> HedgeDelay {
        self.config.after
    }

    /// Its settings (its allowance's numbers are [`allowance`](Self::allowance)'s).
    pub fn config(&self) -> HedgeConfig {
        self.config
    }

    /// Attempts in flight at most, the first included.
    pub fn max(&self) -> u32 {
        self.config.max
    }

    /// The allowance its hedges draw from.
    pub fn allowance(&self) -> &Arc<RetryAllowance> {
        &self.allowance
    }

    /// How long a call waits now before its first hedge: the fixed delay, or the recorded
    /// percentile; `None` while a percentile has fewer than `min_samples` calls recorded.
    pub fn delay(&self) -> Option<Duration> {
        match self.config.after {
            HedgeDelay::After(d) => Some(d),
            HedgeDelay::Percentile(_) if self.latency.recorded() < self.config.min_samples => None,
            HedgeDelay::Percentile(_) => Some(self.latency.cached()),
        }
    }

    /// Records one call's latency for a percentile delay (a fixed delay records nothing). The
    /// hedged call records its own; this is for latencies measured elsewhere.
    pub fn record(&self, latency: Duration) {
        if let HedgeDelay::Percentile(p) = self.config.after {
            self.latency.record(latency, p);
        }
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> HedgeSnapshot {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        HedgeSnapshot {
            name: self.name.clone(),
            after: delay_text(self.config.after),
            delay_ms: self.delay().map(|d| d.as_secs_f64() * 1000.0),
            max: self.config.max,
            calls: load(&self.stats.calls),
            started: load(&self.stats.started),
            won: load(&self.stats.won),
            lost: load(&self.stats.lost),
            refused: load(&self.stats.refused),
            stopped_by_budget: load(&self.stats.stopped_by_budget),
            stopped_by_deadline: load(&self.stats.stopped_by_deadline),
        }
    }

    fn count(&self, counter: &AtomicU64, n: u64) {
        if n > 0 {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Runs `op`, and a hedge of it each time the attempts in flight have not answered within the
/// hedge's delay, up to its `max` in flight; the first success wins and the rest are dropped.
///
/// Each attempt is told its number (1 for the first, 2 for the first hedge) and `deadline`,
/// which every attempt shares; the operation bounds itself under it (with [`Deadline::run`],
/// as the expansion does), and goes through its breaker and bulkhead itself: an attempt that
/// returns [`CallError::Refused`] never ran. Counts one call in the hedge's allowance; inside a
/// retry loop, which counted the call already, use [`hedge_within_retry`].
pub fn hedge_within<T, E, F, Fut>(
    deadline: &Deadline,
    hedge: &Hedge,
    op: Idempotent<F>,
) -> impl Future<Output = Result<T, CallError<E>>>
where
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, CallError<E>>>,
{
    hedge_loop(deadline, hedge, op, Budget::Own)
}

/// [`hedge_within`] for one attempt of a retry loop ([`retry_within_self_bounded`]) under
/// `retry`: the hedges withdraw from the retry policy's allowance, one budget for both, and
/// the call, counted there by the loop, is not counted again.
///
/// [`retry_within_self_bounded`]: crate::retry::retry_within_self_bounded
pub fn hedge_within_retry<T, E, F, Fut>(
    deadline: &Deadline,
    hedge: &Hedge,
    retry: &RetryPolicy,
    op: Idempotent<F>,
) -> impl Future<Output = Result<T, CallError<E>>>
where
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, CallError<E>>>,
{
    hedge_loop(deadline, hedge, op, Budget::Retry(retry.allowance()))
}

/// Whose allowance the hedges withdraw from.
enum Budget<'a> {
    /// The hedge's own: the call is counted in it.
    Own,
    /// A retry loop's, which counted the call.
    Retry(&'a RetryAllowance),
}

/// What became of one call's hedges, counted once at its end.
#[derive(Default)]
struct Tally {
    started: u64,
    refused: u64,
    /// The hedge whose answer is the call's, by its attempt number.
    winner: Option<u32>,
}

async fn hedge_loop<T, E, F, Fut>(
    deadline: &Deadline,
    hedge: &Hedge,
    op: Idempotent<F>,
    budget: Budget<'_>,
) -> Result<T, CallError<E>>
where
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, CallError<E>>>,
{
    let mut op = op.op;
    // One clock read: the call's start, for the allowance's deposit, the hedge's timer and
    // the latency recorded.
    let start = Instant::now();
    let allowance = match budget {
        Budget::Own => {
            hedge.allowance.deposit_as_of(start);
            &*hedge.allowance
        }
        Budget::Retry(allowance) => allowance,
    };
    hedge.stats.calls.fetch_add(1, Ordering::Relaxed);
    let delay = hedge.delay().filter(|_| hedge.config.max > 1);
    let mut first = pin!(Some(op(Attempt {
        number: 1,
        deadline: *deadline,
    })));
    let mut second = pin!(None::<Fut>);
    let mut third = pin!(None::<Fut>);
    // When the next hedge is due: never when the delay would end past the deadline.
    let next_at = |now: Instant| {
        delay
            .filter(|d| *d + TIMER_TICK < deadline.instant().saturating_duration_since(now))
            .map(|d| now + d)
    };
    let mut due = next_at(start);
    // The timer is made only once the attempts did not answer on their first poll: a call
    // answered at once arms none.
    let mut timer = pin!(None::<tokio::time::Sleep>);
    let mut tally = Tally::default();
    let mut number = 1;
    let mut in_flight = 1u32;
    let mut failure: Option<CallError<E>> = None;
    let outcome = poll_fn(|cx| {
        loop {
            let mut started_one = false;
            let slots: [Pin<&mut Option<Fut>>; 3] =
                [first.as_mut(), second.as_mut(), third.as_mut()];
            for (index, mut slot) in slots.into_iter().enumerate() {
                let Some(fut) = slot.as_mut().as_pin_mut() else {
                    continue;
                };
                let Poll::Ready(outcome) = fut.poll(cx) else {
                    continue;
                };
                slot.set(None);
                in_flight -= 1;
                match outcome {
                    Ok(value) => {
                        // Slots hold attempts 1, 2 and 3 in order.
                        tally.winner = (index > 0).then(|| index as u32 + 1);
                        return Poll::Ready(Ok(value));
                    }
                    Err(CallError::Refused(refusal)) if index > 0 => {
                        // The hedge never ran: not an answer, only counted.
                        tally.refused += 1;
                        observe::hedge_refused(&hedge.name, &refusal);
                        failure.get_or_insert(CallError::Refused(refusal));
                    }
                    Err(error) => {
                        // A failure answers only when nothing else could.
                        if failure
                            .as_ref()
                            .is_none_or(|f| matches!(f, CallError::Refused(_)))
                        {
                            failure = Some(error);
                        }
                    }
                }
            }
            if in_flight == 0 {
                due = None;
                if let Some(error) = failure.take() {
                    return Poll::Ready(Err(error));
                }
            }
            let fired = match (due, timer.as_mut().as_pin_mut()) {
                (None, _) => false,
                (Some(at), None) => {
                    timer.set(Some(tokio::time::sleep_until(at)));
                    timer
                        .as_mut()
                        .as_pin_mut()
                        .is_some_and(|sleep| sleep.poll(cx).is_ready())
                }
                (Some(_), Some(sleep)) => sleep.poll(cx).is_ready(),
            };
            if fired {
                due = None;
                if number < hedge.config.max {
                    if deadline.remaining() <= TIMER_TICK {
                        hedge.count(&hedge.stats.stopped_by_deadline, 1);
                        observe::hedge_stopped(&hedge.name, "deadline", number);
                        hedge.metrics.stopped("deadline");
                    } else if !allowance.try_withdraw() {
                        hedge.count(&hedge.stats.stopped_by_budget, 1);
                        observe::hedge_stopped(&hedge.name, "budget", number);
                        hedge.metrics.stopped("budget");
                    } else {
                        number += 1;
                        let attempt = Attempt {
                            number,
                            deadline: *deadline,
                        };
                        let mut slot = if number == 2 {
                            second.as_mut()
                        } else {
                            third.as_mut()
                        };
                        slot.set(Some(op(attempt)));
                        in_flight += 1;
                        tally.started += 1;
                        observe::hedge(&hedge.name, number, delay.unwrap_or_default());
                        hedge.metrics.started();
                        started_one = true;
                        if number < hedge.config.max
                            && let Some(at) = next_at(Instant::now())
                            && let Some(sleep) = timer.as_mut().as_pin_mut()
                        {
                            sleep.reset(at);
                            due = Some(at);
                        }
                    }
                }
            }
            if !started_one {
                return Poll::Pending;
            }
            // Poll the hedge just started, so it registers its wake-up.
        }
    })
    .await;
    // Whatever is still in flight is dropped with this frame: the hedges that lost.
    let lost = tally.started - tally.refused - u64::from(tally.winner.is_some());
    hedge.count(&hedge.stats.started, tally.started);
    hedge.count(&hedge.stats.refused, tally.refused);
    hedge.count(&hedge.stats.lost, lost);
    if let Some(winner) = tally.winner {
        hedge.count(&hedge.stats.won, 1);
        hedge.metrics.won();
        observe::hedge_won(&hedge.name, winner);
    }
    if lost > 0 {
        hedge.metrics.lost(lost);
        observe::hedge_lost(&hedge.name, lost);
    }
    // A refusal took no time of the dependency's, and an expiry under the caller's budget says
    // how long the caller waited, not how long the dependency takes: neither moves the
    // percentile (a client sending short deadlines would otherwise pull the hedge delay down).
    let says_nothing = match &outcome {
        Err(CallError::Refused(_)) => true,
        Err(CallError::DeadlineExceeded(expired)) => expired.is_callers(),
        _ => false,
    };
    if !says_nothing {
        hedge.record(start.elapsed());
    }
    outcome
}

/// Sub-buckets per power of two: a bucket is at most 1/8 of its value wide.
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets: values below 8 µs one each, then eight per power of two up to 2³² µs (71 min).
const BUCKETS: usize = (SUB as usize) * (32 - SUB_BITS as usize + 1);

/// Latencies in fixed, logarithmic buckets of microseconds, each an atomic counter.
struct Latency {
    buckets: Box<[AtomicU32]>,
    /// Calls recorded since the last halving (about the buckets' sum).
    recorded: AtomicU64,
    /// Calls recorded ever, for `min_samples`.
    ever: AtomicU64,
    /// The percentile as of the last recomputation, in nanoseconds.
    cached: AtomicU64,
}

impl Latency {
    fn new() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU32::new(0)).collect(),
            recorded: AtomicU64::new(0),
            ever: AtomicU64::new(0),
            cached: AtomicU64::new(0),
        }
    }

    fn recorded(&self) -> u64 {
        self.ever.load(Ordering::Relaxed)
    }

    fn cached(&self) -> Duration {
        Duration::from_nanos(self.cached.load(Ordering::Relaxed))
    }

    fn record(&self, latency: Duration, percentile: f64) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        if let Some(bucket) = self.buckets.get(bucket_of(micros)) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        let ever = self.ever.fetch_add(1, Ordering::Relaxed) + 1;
        let recorded = self.recorded.fetch_add(1, Ordering::Relaxed) + 1;
        if recorded >= 2 * HISTORY
            && self
                .recorded
                .compare_exchange(recorded, recorded / 2, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // Older calls count half: the percentile follows the recent traffic.
            for bucket in self.buckets.iter() {
                let _ = bucket.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n / 2));
            }
        }
        if ever <= 16 || ever.is_multiple_of(16) {
            self.cached
                .store(self.percentile_nanos(percentile), Ordering::Relaxed);
        }
    }

    /// The upper bound of the bucket holding the `percentile`th call, in nanoseconds.
    fn percentile_nanos(&self, percentile: f64) -> u64 {
        let count = |b: &AtomicU32| u64::from(b.load(Ordering::Relaxed));
        let total: u64 = self.buckets.iter().map(count).sum();
        if total == 0 {
            return 0;
        }
        let rank = ((percentile / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (index, bucket) in self.buckets.iter().enumerate() {
            seen += count(bucket);
            if seen >= rank {
                return upper_of(index).saturating_mul(1000);
            }
        }
        upper_of(BUCKETS - 1).saturating_mul(1000)
    }
}

/// The bucket of a latency of `micros`.
fn bucket_of(micros: u64) -> usize {
    let v = micros.min(u64::from(u32::MAX));
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros();
    let sub = (v >> (exp - SUB_BITS)) & (SUB - 1);
    ((exp - SUB_BITS + 1) as usize) * SUB as usize + sub as usize
}

/// The first latency (µs) past bucket `index`.
fn upper_of(index: usize) -> u64 {
    let index = index as u64;
    if index < SUB {
        return index + 1;
    }
    let exp = index / SUB + u64::from(SUB_BITS) - 1;
    let sub = index % SUB;
    (SUB + sub + 1) << (exp - u64::from(SUB_BITS))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::error::{RefusalReason, ResilienceError};
    use crate::retry::AllowanceConfig;

    #[tokio::test(start_paused = true)]
    async fn a_config_builds_the_same_hedge_as_its_setters_with_an_allowance_of_its_own() {
        const FIVE_PER_SECOND: AllowanceConfig = AllowanceConfig::new(0.0, 5);
        let by_config = Hedge::builder("by-config")
            .config(
                HedgeConfig::new(HedgeDelay::Percentile(90.0))
                    .with_max(3)
                    .with_min_samples(4)
                    .with_allowance(FIVE_PER_SECOND),
            )
            .build();
        let by_setters = Hedge::builder("by-setters")
            .percentile(90.0)
            .max(3)
            .min_samples(4)
            .build();
        assert_eq!(by_config.configured_delay(), by_setters.configured_delay());
        assert_eq!(by_config.max(), 3);
        assert_eq!(by_config.snapshot().after, "p90");
        // Four samples, then the percentile hedges.
        for _ in 0..3 {
            by_config.record(Duration::from_millis(10));
        }
        assert_eq!(by_config.delay(), None);
        by_config.record(Duration::from_millis(10));
        assert!(by_config.delay().is_some());
        // 5 per second over the default 10 s window: 50 hedges, then none.
        let granted = (0..80)
            .filter(|_| by_config.allowance().try_withdraw())
            .count();
        assert_eq!(granted, 50);
        assert_eq!(by_config.allowance().config(), FIVE_PER_SECOND);
        // Without one, the default allowance's numbers.
        assert_eq!(by_setters.allowance().config(), AllowanceConfig::DEFAULT);
        assert_eq!(
            Hedge::builder("fixed")
                .after(Duration::from_millis(40))
                .build()
                .snapshot()
                .after,
            "40ms"
        );
    }

    #[test]
    fn buckets_cover_their_values_within_an_eighth() {
        for micros in [0, 1, 7, 8, 9, 15, 16, 100, 1_000, 50_000, 1 << 31, u64::MAX] {
            let index = bucket_of(micros);
            assert!(index < BUCKETS, "{micros} -> {index}");
            let upper = upper_of(index);
            let v = micros.min(u64::from(u32::MAX));
            assert!(upper > v, "{micros}: bucket {index} ends at {upper}");
            assert!(
                (upper - v) as f64 <= (v as f64 / 8.0).max(1.0),
                "{micros}: {upper}"
            );
        }
    }

    /// Counts the attempts alive (made and not yet dropped).
    struct Alive(Arc<AtomicUsize>);
    impl Alive {
        fn new(count: &Arc<AtomicUsize>) -> Self {
            count.fetch_add(1, Ordering::SeqCst);
            Self(count.clone())
        }
    }
    impl Drop for Alive {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    type Outcome = Result<u32, CallError<std::io::Error>>;

    /// An attempt that answers `number` after `took[number - 1]` ms, counting itself alive.
    fn slow(
        took: &'static [u64],
        alive: &Arc<AtomicUsize>,
        started: &Arc<AtomicUsize>,
    ) -> impl FnMut(Attempt) -> Pin<Box<dyn Future<Output = Outcome>>> {
        let (alive, started) = (alive.clone(), started.clone());
        move |attempt| {
            started.fetch_add(1, Ordering::SeqCst);
            let guard = Alive::new(&alive);
            let ms = took[attempt.number as usize - 1];
            Box::pin(async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(attempt.number)
            })
        }
    }

    fn counters() -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
        (Arc::default(), Arc::default())
    }

    #[tokio::test(start_paused = true)]
    async fn a_hedge_starts_after_the_delay_and_the_first_answer_wins() {
        let hedge = Hedge::builder("h").after(Duration::from_millis(50)).build();
        let deadline = Deadline::after(Duration::from_secs(2));
        let (alive, started) = counters();
        let call = hedge_within(
            &deadline,
            &hedge,
            Idempotent::claim(slow(&[400, 30], &alive, &started)),
        );
        let mut call = Box::pin(call);
        let at = Instant::now();
        tokio::select! {
            _ = &mut call => panic!("answered early"),
            () = tokio::time::sleep(Duration::from_millis(49)) => {}
        }
        assert_eq!(
            started.load(Ordering::SeqCst),
            1,
            "no hedge before the delay"
        );
        tokio::select! {
            _ = &mut call => panic!("answered early"),
            () = tokio::time::sleep(Duration::from_millis(2)) => {}
        }
        assert_eq!(
            started.load(Ordering::SeqCst),
            2,
            "the hedge started at 50 ms"
        );
        assert_eq!(alive.load(Ordering::SeqCst), 2);
        assert_eq!(call.await.unwrap(), 2, "the hedge answered first");
        assert_eq!(at.elapsed(), Duration::from_millis(80));
        assert_eq!(
            alive.load(Ordering::SeqCst),
            0,
            "the first attempt was dropped"
        );
        let s = hedge.snapshot();
        assert_eq!((s.calls, s.started, s.won, s.lost), (1, 1, 1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_attempt_answering_first_cancels_the_hedge() {
        let hedge = Hedge::builder("h").after(Duration::from_millis(50)).build();
        let deadline = Deadline::after(Duration::from_secs(2));
        let (alive, started) = counters();
        let at = Instant::now();
        let answer = hedge_within(
            &deadline,
            &hedge,
            Idempotent::claim(slow(&[70, 500], &alive, &started)),
        )
        .await;
        assert_eq!(answer.unwrap(), 1);
        assert_eq!(at.elapsed(), Duration::from_millis(70));
        assert_eq!(started.load(Ordering::SeqCst), 2);
        assert_eq!(alive.load(Ordering::SeqCst), 0, "the hedge was dropped");
        let s = hedge.snapshot();
        assert_eq!((s.started, s.won, s.lost), (1, 0, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fast_answer_starts_no_hedge() {
        let hedge = Hedge::builder("h").after(Duration::from_millis(50)).build();
        let deadline = Deadline::after(Duration::from_secs(2));
        let (alive, started) = counters();
        let answer = hedge_within(
            &deadline,
            &hedge,
            Idempotent::claim(slow(&[20, 20], &alive, &started)),
        )
        .await;
        assert_eq!(answer.unwrap(), 1);
        assert_eq!(started.load(Ordering::SeqCst), 1);
        assert_eq!(hedge.snapshot().started, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn max_three_starts_a_second_hedge_one_delay_later() {
        let hedge = Hedge::builder("h")
            .after(Duration::from_millis(50))
            .max(3)
            .build();
        let deadline = Deadline::after(Duration::from_secs(2));
        let (alive, started) = counters();
        let at = Instant::now();
        let answer = hedge_within(
            &deadline,
            &hedge,
            Idempotent::claim(slow(&[500, 500, 10], &alive, &started)),
        )
        .await;
        assert_eq!(answer.unwrap(), 3);
        assert_eq!(at.elapsed(), Duration::from_millis(110));
        assert_eq!(alive.load(Ordering::SeqCst), 0);
        let s = hedge.snapshot();
        assert_eq!((s.started, s.won, s.lost), (2, 1, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn an_exhausted_allowance_stops_hedging() {
        // No floor, 0% of calls: no hedge is ever allowed.
        let allowance = Arc::new(RetryAllowance::new(Duration::from_secs(10), 0, 0.0));
        let hedge = Hedge::builder("h")
            .after(Duration::from_millis(50))
            .allowance(allowance.clone())
            .build();
        let deadline = Deadline::after(Duration::from_secs(2));
        let (alive, started) = counters();
        let answer = hedge_within(
            &deadline,
            &hedge,
            Idempotent::claim(slow(&[300, 10], &alive, &started)),
        )
        .await;
        assert_eq!(answer.unwrap(), 1, "the first attempt's answer, late");
        assert_eq!(started.load(Ordering::SeqCst), 1, "no hedge");
        let s = hedge.snapshot();
        assert_eq!((s.started, s.stopped_by_budget), (0, 1));
        assert_eq!(allowance.snapshot().calls, 1, "the call was counted");
    }

    #[tokio::test(start_paused = true)]
    async fn hedges_and_retries_share_one_allowance() {
        // One retry or hedge per 1 s window, and nothing per call.
        let allowance = Arc::new(RetryAllowance::new(Duration::from_secs(1), 1, 0.0));
        let retry = RetryPolicy::builder("r")
            .allowance(allowance.clone())
            .build();
        let hedge = Hedge::builder("h").after(Duration::from_millis(50)).build();
        assert!(allowance.try_withdraw(), "a retry took the only unit");
        let deadline = Deadline::after(Duration::from_secs(2));
        let (alive, started) = counters();
        let answer = hedge_within_retry(
            &deadline,
            &hedge,
            &retry,
            Idempotent::claim(slow(&[300, 10], &alive, &started)),
        )
        .await;
        assert_eq!(answer.unwrap(), 1);
        assert_eq!(hedge.snapshot().stopped_by_budget, 1);
        assert_eq!(
            allowance.snapshot().calls,
            0,
            "inside a retry: not counted again"
        );
        assert_eq!(
            hedge.allowance().snapshot().calls,
            0,
            "nor in the hedge's own"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_hedge_starts_when_the_delay_ends_past_the_deadline() {
        let hedge = Hedge::builder("h").after(Duration::from_millis(50)).build();
        let deadline = Deadline::after(Duration::from_millis(40));
        let (alive, started) = counters();
        let answer = hedge_within(
            &deadline,
            &hedge,
            Idempotent::claim(slow(&[30, 10], &alive, &started)),
        )
        .await;
        assert_eq!(answer.unwrap(), 1);
        assert_eq!(started.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_hedge_is_not_an_answer_and_a_refused_first_attempt_is_not_hedged() {
        let hedge = Hedge::builder("h").after(Duration::from_millis(50)).build();
        let deadline = Deadline::after(Duration::from_secs(2));
        let refusal = || {
            CallError::Refused(ResilienceError::new(
                "dep",
                RefusalReason::BulkheadFull {
                    max_concurrent: 1,
                    max_queued: 0,
                },
            ))
        };
        // The hedge is refused (its bulkhead is full): the first attempt's answer stands.
        let answer: Outcome = hedge_within(
            &deadline,
            &hedge,
            Idempotent::claim(|attempt: Attempt| async move {
                if attempt.number == 2 {
                    return Err(refusal());
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok(1)
            }),
        )
        .await;
        assert_eq!(answer.unwrap(), 1);
        let s = hedge.snapshot();
        assert_eq!((s.started, s.refused, s.won, s.lost), (1, 1, 0, 0));

        // The first attempt refused: the call is refused at once, no hedge.
        let made = AtomicUsize::new(0);
        let answer: Outcome = hedge_within(
            &deadline,
            &hedge,
            Idempotent::claim(|_: Attempt| {
                made.fetch_add(1, Ordering::SeqCst);
                async { Err(refusal()) }
            }),
        )
        .await;
        assert!(matches!(answer, Err(CallError::Refused(_))));
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert_eq!(hedge.snapshot().started, 1, "no hedge of a refusal");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_waits_for_the_hedge_in_flight() {
        let hedge = Hedge::builder("h").after(Duration::from_millis(50)).build();
        let deadline = Deadline::after(Duration::from_secs(2));
        let answer: Outcome = hedge_within(
            &deadline,
            &hedge,
            Idempotent::claim(|attempt: Attempt| async move {
                if attempt.number == 1 {
                    tokio::time::sleep(Duration::from_millis(60)).await;
                    return Err(CallError::Failed(
                        std::io::ErrorKind::ConnectionReset.into(),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(40)).await;
                Ok(2)
            }),
        )
        .await;
        assert_eq!(answer.unwrap(), 2);
        assert_eq!(hedge.snapshot().won, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_percentile_delay_follows_the_recorded_latency() {
        let hedge = Hedge::builder("h").percentile(95.0).min_samples(20).build();
        assert_eq!(hedge.delay(), None, "no data, no hedge");
        for _ in 0..19 {
            hedge.record(Duration::from_millis(10));
        }
        assert_eq!(hedge.delay(), None, "19 of 20 calls");
        hedge.record(Duration::from_millis(10));
        let delay = hedge.delay().unwrap();
        assert!(
            delay >= Duration::from_millis(10) && delay <= Duration::from_micros(11_250),
            "{delay:?}"
        );
        // 10% of calls take 100 ms: p95 is among them.
        for i in 0..300 {
            let ms = if i % 10 == 0 { 100 } else { 10 };
            hedge.record(Duration::from_millis(ms));
        }
        let delay = hedge.delay().unwrap();
        assert!(
            delay >= Duration::from_millis(100) && delay <= Duration::from_micros(112_500),
            "{delay:?}"
        );
        // Then the tail goes away: the halvings let the fast calls take over.
        for _ in 0..(4 * HISTORY) {
            hedge.record(Duration::from_millis(10));
        }
        let delay = hedge.delay().unwrap();
        assert!(delay <= Duration::from_micros(11_250), "{delay:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_hedged_call_records_its_latency_and_hedges_at_the_percentile() {
        let hedge = Hedge::builder("h").percentile(50.0).min_samples(3).build();
        let deadline = Deadline::after(Duration::from_secs(5));
        let (alive, started) = counters();
        for _ in 0..3 {
            let answer = hedge_within(
                &deadline,
                &hedge,
                Idempotent::claim(slow(&[20, 20], &alive, &started)),
            )
            .await;
            assert_eq!(answer.unwrap(), 1);
        }
        assert_eq!(
            hedge.snapshot().started,
            0,
            "no percentile before three calls"
        );
        let delay = hedge.delay().unwrap();
        assert!(delay >= Duration::from_millis(20), "{delay:?}");
        let at = Instant::now();
        let answer = hedge_within(
            &deadline,
            &hedge,
            Idempotent::claim(slow(&[1000, 5], &alive, &started)),
        )
        .await;
        assert_eq!(answer.unwrap(), 2);
        // The timer fires on tokio's millisecond grid, up to a tick after the delay.
        let took = at.elapsed();
        assert!(
            took >= delay + Duration::from_millis(5) && took <= delay + Duration::from_millis(6),
            "{took:?} after a delay of {delay:?}"
        );
    }
}
