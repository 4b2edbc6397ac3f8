//! Keep CPU work off the async workers, and prove each boundary by measurement.
//!
//! In a tokio service the "main thread" is the async worker: a poll that computes
//! for 50 ms stalls every other task on that worker. The hierarchy becomes:
//!
//! ```text
//! cheap work                               → inline, on the async worker
//! noticeable CPU work                      → IsolatedPool on tokio's blocking threads
//! sustained compute with proven benefit    → IsolatedPool on a dedicated pool (feature `rayon`)
//! ```
//!
//! Each step is justified by measurement, not expectation: [`PollBudget`] reports polls that
//! run longer than a budget (cheap enough to leave on in production), and
//! [`measure_crossover`] times the same function inline and isolated, hand-off included
//! (moving the input in and the result out), to show where isolation starts to pay.
//!
//! An [`IsolatedPool`] is a bulkhead for CPU: its own concurrency limit and queue; past both,
//! work is refused ([`ResilienceError`](crate::ResilienceError), kind `BulkheadFull`). The caller waits at most until
//! its current deadline. A deadline bounds the **wait**, not the work: work already handed to a
//! thread runs to completion, holding its slot, and its outcome (or panic) is logged when
//! nobody waits for it any more.
//!
//! ```
//! use velocity_policy_runtime::isolate::IsolatedPool;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let pool = IsolatedPool::builder("embeddings").max_concurrent(2).max_queued(4).build();
//! let text = "a document to embed".to_owned();
//! let sum = pool.run(move || text.bytes().map(u64::from).sum::<u64>()).await.unwrap();
//! assert_eq!(sum, 1792);
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;

use crate::bulkhead::Bulkhead;
use crate::deadline::Deadline;
use crate::error::{CallError, Human};

/// Isolated work panicked; the panic was caught and logged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the isolated work `{name}` panicked: {message}")]
pub struct Panicked {
    name: Arc<str>,
    message: String,
}

impl Panicked {
    /// The panic's message, when it had one.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The three ways isolated work can fail to answer: refused (the pool was full), stopped
/// waiting (the deadline passed; the work runs on), or it panicked.
pub type IsolateError = CallError<Panicked>;

/// Where isolated work runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum PoolKind {
    /// Tokio's blocking pool (`spawn_blocking`), bounded here by the pool's slots.
    #[default]
    Blocking,
    /// A dedicated rayon pool with one thread per slot (feature `rayon`), for sustained compute
    /// that should not compete with tokio's blocking I/O threads. Without the feature,
    /// `#[isolate(pool = "rayon")]` does not compile (the error says to turn the feature on),
    /// and a pool built by hand with this kind runs its work on tokio's blocking pool and says
    /// so in a log event.
    Rayon,
}

// The dedicated pool's threads (feature `rayon`), or a stand-in that has none. Chosen here, once.
#[cfg_attr(not(feature = "rayon"), path = "isolate/no_rayon.rs")]
pub(crate) mod dedicated;

#[derive(Debug, Default)]
struct Stats {
    finished: AtomicU64,
    panicked: AtomicU64,
    unwaited: AtomicU64,
}

struct Inner {
    name: Arc<str>,
    slots: Bulkhead,
    kind: PoolKind,
    dedicated: dedicated::Dedicated,
    stats: Stats,
}

/// A bounded pool for CPU work: a bulkhead for the compute, with its own slots and queue.
/// Cloning is cheap and clones share the pool.
#[derive(Clone)]
pub struct IsolatedPool {
    inner: Arc<Inner>,
}

impl fmt::Debug for IsolatedPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IsolatedPool")
            .field("name", &self.inner.name)
            .field("kind", &self.inner.kind)
            .field("slots", &self.inner.slots)
            .finish()
    }
}

/// Builds an [`IsolatedPool`]; see [`IsolatedPool::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct IsolatedPoolBuilder {
    name: Arc<str>,
    max_concurrent: u32,
    max_queued: u32,
    kind: PoolKind,
}

impl IsolatedPoolBuilder {
    /// Work that may run at once (at least 1; default: the number of CPUs).
    pub fn max_concurrent(mut self, slots: u32) -> Self {
        self.max_concurrent = slots.max(1);
        self
    }

    /// Work that may wait for a slot, each at most until its caller's deadline (default 0).
    pub fn max_queued(mut self, places: u32) -> Self {
        self.max_queued = places;
        self
    }

    /// Where the work runs.
    pub fn kind(mut self, kind: PoolKind) -> Self {
        self.kind = kind;
        self
    }

    /// Builds the pool. A dedicated pool that cannot start its threads falls back to tokio's
    /// blocking pool, and says so in a log event.
    pub fn build(self) -> IsolatedPool {
        let dedicated = dedicated::Dedicated::start(self.kind, &self.name, self.max_concurrent);
        IsolatedPool {
            inner: Arc::new(Inner {
                slots: Bulkhead::builder(self.name.clone())
                    .max_concurrent(self.max_concurrent)
                    .max_queued(self.max_queued)
                    .build(),
                name: self.name,
                kind: self.kind,
                dedicated,
                stats: Stats::default(),
            }),
        }
    }
}

/// A point-in-time view of an isolated pool, for dashboards.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct IsolatedPoolSnapshot {
    /// The pool's name: for an annotated function's, its operation's name made unique by the
    /// module path (`policy_demo::service::compute_embedding`).
    pub name: Arc<str>,
    /// The name without the module path (`compute_embedding`): what a dashboard shows.
    pub display_name: Arc<str>,
    /// Where its work runs.
    pub kind: PoolKind,
    /// Its slots, queue and refusals.
    pub slots: crate::bulkhead::BulkheadSnapshot,
    /// Work that finished.
    pub finished: u64,
    /// Work that panicked (caught and logged).
    pub panicked: u64,
    /// Work that finished after its caller stopped waiting (logged).
    pub unwaited: u64,
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned())
}

impl IsolatedPool {
    /// A builder for a pool named `name`, on tokio's blocking threads by default.
    pub fn builder(name: impl Into<Arc<str>>) -> IsolatedPoolBuilder {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        IsolatedPoolBuilder {
            name: name.into(),
            max_concurrent: u32::try_from(cpus).unwrap_or(u32::MAX),
            max_queued: 0,
            kind: PoolKind::Blocking,
        }
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Runs `work` on the pool and waits for its result, at most until the current deadline
    /// ([`Deadline::current`], or no bound beyond [`Deadline::MAX_BUDGET`] outside any scope).
    ///
    /// Refused at once when slots and queue are full. When the deadline passes, the caller
    /// gets `DeadlineExceeded` and the work runs on, holding its slot; its outcome is then
    /// logged (`kind = "isolated_unwaited"`). A panic is caught and logged, and the caller,
    /// if still waiting, gets [`Panicked`].
    pub async fn run<F, T>(&self, work: F) -> Result<T, IsolateError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let deadline = Deadline::current().unwrap_or_else(|| Deadline::after(Deadline::MAX_BUDGET));
        let slot = self.inner.slots.acquire_owned(&deadline).await?;
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let inner = self.inner.clone();
        let job = move || {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(work));
            drop(slot);
            let outcome = match outcome {
                Ok(value) => {
                    inner.stats.finished.fetch_add(1, Ordering::Relaxed);
                    Ok(value)
                }
                Err(payload) => {
                    inner.stats.panicked.fetch_add(1, Ordering::Relaxed);
                    let message = panic_message(payload.as_ref());
                    tracing::error!(
                        target: "policy",
                        kind = "isolated_panicked",
                        name = &*inner.name,
                        reason = %message,
                        "isolated work `{}` panicked: {message}",
                        inner.name
                    );
                    Err(Panicked {
                        name: inner.name.clone(),
                        message,
                    })
                }
            };
            if let Err(unwaited) = sender.send(outcome) {
                inner.stats.unwaited.fetch_add(1, Ordering::Relaxed);
                let outcome = match &unwaited {
                    Ok(_) => "finished",
                    Err(_) => "panicked",
                };
                tracing::warn!(
                    target: "policy",
                    kind = "isolated_unwaited",
                    name = &*inner.name,
                    reason = outcome,
                    "isolated work `{}` {outcome} after its caller stopped waiting",
                    inner.name
                );
            }
        };
        self.dispatch(job);
        match deadline.run(receiver).await {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(panicked))) => Err(CallError::Failed(panicked)),
            // The job always sends before it is dropped, unless the runtime shut down under it.
            Ok(Err(_closed)) => Err(CallError::Failed(Panicked {
                name: self.inner.name.clone(),
                message: "the pool shut down before the work finished".to_owned(),
            })),
            Err(expired) => Err(CallError::DeadlineExceeded(expired)),
        }
    }

    fn dispatch(&self, job: impl FnOnce() + Send + 'static) {
        if let Some(job) = self.inner.dedicated.spawn(job) {
            // The blocking pool's own handle never fails to take a job while the runtime runs.
            drop(tokio::task::spawn_blocking(job));
        }
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> IsolatedPoolSnapshot {
        let s = &self.inner.stats;
        IsolatedPoolSnapshot {
            name: self.inner.name.clone(),
            display_name: crate::observe::short_name(&self.inner.name).into(),
            kind: self.inner.kind,
            slots: self.inner.slots.snapshot(),
            finished: s.finished.load(Ordering::Relaxed),
            panicked: s.panicked.load(Ordering::Relaxed),
            unwaited: s.unwaited.load(Ordering::Relaxed),
        }
    }
}

/// Counts polls over a budget for one named future kind.
#[derive(Debug)]
pub struct PollMonitor {
    name: Arc<str>,
    budget: Duration,
    polls: AtomicU64,
    over_budget: AtomicU64,
    longest_nanos: AtomicU64,
    over_budget_metric: crate::instruments::Counter,
}

/// A point-in-time view of a poll monitor, for dashboards.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PollMonitorSnapshot {
    /// What is monitored: for an annotated function, its operation's name made unique by the
    /// module path (`policy_demo::service::embed`).
    pub name: Arc<str>,
    /// The name without the module path (`embed`, the operation): what a dashboard shows.
    pub display_name: Arc<str>,
    /// The budget per poll.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "budget_ms", serialize_with = "crate::json::millis")
    )]
    pub budget: Duration,
    /// Polls seen.
    pub polls: u64,
    /// Polls that ran longer than the budget.
    pub over_budget: u64,
    /// The longest poll seen.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "longest_ms", serialize_with = "crate::json::millis")
    )]
    pub longest: Duration,
}

impl PollMonitor {
    /// A monitor for `name` with a budget per poll.
    pub fn new(name: impl Into<Arc<str>>, budget: Duration) -> Self {
        let name = name.into();
        Self {
            over_budget_metric: crate::instruments::polls_over_budget(&name),
            name,
            budget,
            polls: AtomicU64::new(0),
            over_budget: AtomicU64::new(0),
            longest_nanos: AtomicU64::new(0),
        }
    }

    /// Wraps `future` so each of its polls is measured against the budget.
    pub fn watch<F: Future>(&self, future: F) -> PollBudget<'_, F> {
        PollBudget {
            future,
            monitor: self,
        }
    }

    fn record(&self, took: Duration) {
        self.polls.fetch_add(1, Ordering::Relaxed);
        let nanos = crate::window::saturating_nanos(took);
        self.longest_nanos.fetch_max(nanos, Ordering::Relaxed);
        if took > self.budget {
            self.over_budget.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                target: "policy",
                kind = "poll_over_budget",
                name = &*self.name,
                reason = "a poll computed longer than its budget, stalling its worker",
                took = ?took,
                budget = ?self.budget,
                "a poll of `{}` took {}, over its {} budget",
                self.name,
                Human(took),
                Human(self.budget)
            );
            self.over_budget_metric.increment();
        }
    }

    /// A point-in-time view.
    pub fn snapshot(&self) -> PollMonitorSnapshot {
        PollMonitorSnapshot {
            name: self.name.clone(),
            display_name: crate::observe::short_name(&self.name).into(),
            budget: self.budget,
            polls: self.polls.load(Ordering::Relaxed),
            over_budget: self.over_budget.load(Ordering::Relaxed),
            longest: Duration::from_nanos(self.longest_nanos.load(Ordering::Relaxed)),
        }
    }
}

pin_project! {
    /// A future whose polls are timed against a budget; see [`PollMonitor::watch`].
    ///
    /// Costs two reads of the monotonic clock per poll.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct PollBudget<'m, F> {
        #[pin]
        future: F,
        monitor: &'m PollMonitor,
    }
}

impl<F: Future> Future for PollBudget<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        // Real time, not tokio's (possibly paused) clock: this measures a stalled worker.
        let started = std::time::Instant::now();
        let out = this.future.poll(cx);
        this.monitor.record(started.elapsed());
        out
    }
}

/// What [`measure_crossover`] found for one input size.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Measurement {
    /// The input's size, as the caller counts it.
    pub size: usize,
    /// Median time of the work inline (the input made, the work done, on the calling thread).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "inline_ms", serialize_with = "crate::json::millis")
    )]
    pub inline: Duration,
    /// Median time of the same work through the pool: the input moved in, the result moved out.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "isolated_ms", serialize_with = "crate::json::millis")
    )]
    pub isolated: Duration,
}

impl Measurement {
    /// What the hand-off costs: isolated minus inline (zero if isolated was faster).
    pub fn hand_off(&self) -> Duration {
        self.isolated.saturating_sub(self.inline)
    }

    /// Whether isolating this size pays: the work blocks a worker longer than `poll_budget`
    /// (so inline it would stall others), and the hand-off adds at most `max_overhead` of the
    /// work's own time.
    pub fn pays(&self, poll_budget: Duration, max_overhead: f64) -> bool {
        self.inline > poll_budget
            && self.hand_off().as_secs_f64() <= max_overhead * self.inline.as_secs_f64()
    }
}

/// Times `work` inline and through `pool` for each input `make(size)`, `rounds` times each, and
/// returns the medians: the measurement that justifies (or not) moving work off the async
/// workers. Must run inside a multi-thread tokio runtime (the pool's threads need it).
pub async fn measure_crossover<I, T>(
    pool: &IsolatedPool,
    sizes: &[usize],
    rounds: usize,
    make: impl Fn(usize) -> I,
    work: fn(I) -> T,
) -> Vec<Measurement>
where
    I: Send + 'static,
    T: Send + 'static,
{
    let rounds = rounds.max(1);
    let median = |mut times: Vec<Duration>| {
        times.sort();
        times.get(times.len() / 2).copied().unwrap_or_default()
    };
    let mut out = Vec::new();
    for &size in sizes {
        let mut inline = Vec::with_capacity(rounds);
        let mut isolated = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let input = make(size);
            let started = std::time::Instant::now();
            std::hint::black_box(work(std::hint::black_box(input)));
            inline.push(started.elapsed());

            let input = make(size);
            let started = std::time::Instant::now();
            let result = pool.run(move || work(input)).await;
            std::hint::black_box(result.is_ok());
            isolated.push(started.elapsed());
        }
        out.push(Measurement {
            size,
            inline: median(inline),
            isolated: median(isolated),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn isolation_pays_when_the_work_is_long_and_the_hand_off_small() {
        let m = |inline_us: u64, isolated_us: u64| Measurement {
            size: 0,
            inline: Duration::from_micros(inline_us),
            isolated: Duration::from_micros(isolated_us),
        };
        // Short work: inline never stalls a worker past the budget.
        assert!(!m(100, 140).pays(2 * MS, 0.1));
        // Long work, small hand-off: pays.
        assert!(m(5_000, 5_100).pays(2 * MS, 0.1));
        // Long work, but the hand-off costs more than 10% of it: does not pay.
        assert!(!m(5_000, 6_000).pays(2 * MS, 0.1));
        // An isolated run faster than inline has no hand-off cost.
        assert_eq!(m(5_000, 4_000).hand_off(), Duration::ZERO);
    }

    #[test]
    fn the_crossover_is_measured_for_every_size() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let pool = IsolatedPool::builder("measure").max_concurrent(1).build();
            let rows = measure_crossover(
                &pool,
                &[16, 4096],
                3,
                |n| vec![1u8; n],
                |v: Vec<u8>| v.iter().map(|b| u64::from(*b)).sum::<u64>(),
            )
            .await;
            assert_eq!(rows.iter().map(|m| m.size).collect::<Vec<_>>(), [16, 4096]);
            assert!(rows.iter().all(|m| m.isolated > Duration::ZERO));
            assert_eq!(pool.snapshot().finished, 6);
        });
    }
}
