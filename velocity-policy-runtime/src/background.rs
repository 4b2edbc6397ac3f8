//! Where does work go that nobody waits for and nobody needs soon? A bounded background pool.
//!
//! Embeddings, media processing, AI enrichment, large projections: background work is the
//! third class, after critical and deferred, and the **first one dropped** when the process is
//! under pressure. A [`BackgroundPool`] runs at most `max_concurrent` tasks at once and holds
//! at most `max_queued` more, and every submission is an admission decision by the
//! [shedding](crate::shedding) rules for [`WorkClass::Background`], against two loads:
//!
//! - **its own load**: admitted tasks (running and queued) over its capacity
//!   (`max_concurrent + max_queued`), against its [`shed_at`](BackgroundPoolBuilder::shed_at)
//!   threshold (1.0 by default: a full pool sheds);
//! - **the load of the compartments it yields to** ([`yield_to`](BackgroundPoolBuilder::yield_to),
//!   say the bulkhead of the database critical requests use), against the background threshold
//!   of its [`Thresholds`] (0.25 by default, below deferred work's 0.5). That is what makes
//!   background work the first dropped: it stops being admitted while critical work still has
//!   three quarters of its compartment free.
//!
//! A submission that is shed is refused at once with a [`ResilienceError`] of kind
//! [`Shed`](crate::RefusalKind::Shed) and its reason, counted, and logged (the `shed` event of
//! [`observe`]); it never waits. An admitted task gets the failure handling of
//! [deferred work](mod@crate::defer) (an `Err` logged with its name, a panic caught and logged),
//! runs in a span `task{name, class="background", request}`, and is kept alive by the
//! [platform](crate::defer::Platform), so a shutdown drain counts it, queued or running.
//!
//! Background work is delivered **at least once** and must be idempotent, as deferred work:
//! a task abandoned at shutdown, or whose request the platform retried, may run again.
//!
//! A pool bounds **one instance**, like a bulkhead.
//!
//! What it holds is bounded by its configuration: at most `max_concurrent + max_queued`
//! admitted tasks (running or waiting for a slot); a submission past that is shed at once and
//! only counted. The process's list of pools, for [`snapshots`], holds a weak reference per live
//! pool, and drops those of dropped pools each time a pool is built.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::{BackgroundPool, Bulkhead, RefusalKind};
//! use velocity_policy_runtime::defer::ImmediatePlatform;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let database = Bulkhead::builder("database").max_concurrent(8).build();
//! let platform = ImmediatePlatform::new();
//! let enrichment = BackgroundPool::builder("enrichment")
//!     .max_concurrent(2)
//!     .max_queued(2)
//!     .yield_to(&database)
//!     .platform(platform.clone())
//!     .build();
//!
//! for _ in 0..4 {
//!     enrichment
//!         .submit("embed_document", tokio::time::sleep(Duration::from_secs(1)))
//!         .unwrap();
//! }
//! // Full: the fifth is shed, with its reason.
//! let refusal = enrichment.submit("embed_document", async {}).unwrap_err();
//! assert_eq!(refusal.kind(), RefusalKind::Shed);
//!
//! // Critical work gets busy: background work stops being admitted long before the
//! // database's compartment is full.
//! platform.settled().await;
//! let _held: Vec<_> = (0..2).map(|_| database.try_acquire().unwrap()).collect();
//! let refusal = enrichment.submit("embed_document", async {}).unwrap_err();
//! assert_eq!(
//!     refusal.to_string(),
//!     "shedding for `enrichment` refused the call: background work shed at load 0.25 (threshold 0.25)"
//! );
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::bulkhead::Bulkhead;
use crate::deadline::Deadline;
use crate::defer::{DeferredOutcome, Platform, RequestId, Task, TaskStats, class_totals};
use crate::error::ShedReason;
use crate::error::{RefusalReason, ResilienceError};
use crate::instruments::{ShedMetrics, Since, TaskMetrics};
use crate::observe;
use crate::shedding::{Decision, Thresholds, decide};
use velocity_policy_model::WorkClass;

struct Pool {
    name: Arc<str>,
    max_concurrent: u32,
    max_queued: u32,
    shed_at: f64,
    thresholds: Thresholds,
    yield_to: Vec<Bulkhead>,
    platform: Option<Arc<dyn Platform>>,
    /// One permit per slot; queued tasks wait for one, in order.
    slots: Arc<Semaphore>,
    /// Tasks admitted and not yet ended: running plus queued.
    admitted: AtomicU32,
    running: AtomicU32,
    shed_load: AtomicU64,
    shed_pressure: AtomicU64,
    stats: Arc<TaskStats>,
    shed_metrics: ShedMetrics,
}

/// A bounded pool for background work. Cloning is cheap and clones share the pool.
///
/// See the [module docs](self).
#[derive(Clone)]
pub struct BackgroundPool {
    inner: Arc<Pool>,
}

impl fmt::Debug for BackgroundPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackgroundPool")
            .field("name", &self.inner.name)
            .field("max_concurrent", &self.inner.max_concurrent)
            .field("max_queued", &self.inner.max_queued)
            .field("running", &self.running())
            .field("queued", &self.queued())
            .finish()
    }
}

/// Builds a [`BackgroundPool`]; see [`BackgroundPool::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct BackgroundPoolBuilder {
    name: Arc<str>,
    max_concurrent: u32,
    max_queued: u32,
    shed_at: f64,
    thresholds: Thresholds,
    yield_to: Vec<Bulkhead>,
    platform: Option<Arc<dyn Platform>>,
}

impl fmt::Debug for BackgroundPoolBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackgroundPoolBuilder")
            .field("name", &self.name)
            .field("max_concurrent", &self.max_concurrent)
            .field("max_queued", &self.max_queued)
            .field("shed_at", &self.shed_at)
            .field("thresholds", &self.thresholds)
            .field(
                "yield_to",
                &self.yield_to.iter().map(Bulkhead::name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl BackgroundPoolBuilder {
    /// Tasks that may run at once (at least 1; 4 by default).
    pub fn max_concurrent(mut self, slots: u32) -> Self {
        self.max_concurrent = slots.max(1);
        self
    }

    /// Tasks that may wait for a slot (16 by default). It absorbs a burst; it does not store a
    /// backlog.
    pub fn max_queued(mut self, places: u32) -> Self {
        self.max_queued = places;
        self
    }

    /// The pool's own load (admitted over capacity) at or above which it sheds: 1.0 (full) by
    /// default; lower keeps headroom. Clamped to `(0, 1]`.
    pub fn shed_at(mut self, load: f64) -> Self {
        self.shed_at = if load.is_nan() {
            1.0
        } else {
            load.clamp(f64::MIN_POSITIVE, 1.0)
        };
        self
    }

    /// The thresholds applied to the compartments it [yields to](Self::yield_to) (the
    /// shedding defaults unless set; only the background one is used).
    pub fn thresholds(mut self, thresholds: Thresholds) -> Self {
        self.thresholds = thresholds;
        self
    }

    /// Sheds background work while `compartment`'s load is at or above the background
    /// threshold: the pool yields to the critical work using it. May be called more than once;
    /// the busiest compartment decides.
    pub fn yield_to(mut self, compartment: &Bulkhead) -> Self {
        self.yield_to.push(compartment.clone());
        self
    }

    /// Keeps the pool's tasks alive on `platform` instead of the process-level one.
    pub fn platform(mut self, platform: impl Platform) -> Self {
        self.platform = Some(Arc::new(platform));
        self
    }

    /// Builds the pool.
    pub fn build(self) -> BackgroundPool {
        let pool = Arc::new(Pool {
            shed_metrics: ShedMetrics::new("background", &self.name, &[WorkClass::Background]),
            name: self.name,
            max_concurrent: self.max_concurrent,
            max_queued: self.max_queued,
            shed_at: self.shed_at,
            thresholds: self.thresholds,
            yield_to: self.yield_to,
            platform: self.platform,
            slots: Arc::new(Semaphore::new(self.max_concurrent as usize)),
            admitted: AtomicU32::new(0),
            running: AtomicU32::new(0),
            shed_load: AtomicU64::new(0),
            shed_pressure: AtomicU64::new(0),
            stats: Arc::default(),
        });
        register(&pool);
        BackgroundPool { inner: pool }
    }
}

/// Gives back an admission when the task ends, however it ends.
struct Admitted(Arc<Pool>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.admitted.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A submitted task waiting for its pool's slot, for the `background` class's waiting gauge
/// and its wait to start (feature `metrics`); no longer waiting once started or dropped.
struct Waiting {
    since: Since,
}

impl Waiting {
    fn new() -> Self {
        TaskMetrics::of(WorkClass::Background).waiting(1.0);
        Self {
            since: Since::now(),
        }
    }

    /// It got its slot.
    fn started(self) {
        if let Some(waited) = self.since.elapsed() {
            TaskMetrics::of(WorkClass::Background).started_after(waited);
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        TaskMetrics::of(WorkClass::Background).waiting(-1.0);
    }
}

/// Counts a task as running while it holds a slot.
struct Running(Arc<Pool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The work's outcome, if it got a slot.
struct Ran<O>(Option<O>);

impl<O: DeferredOutcome> DeferredOutcome for Ran<O> {
    fn failure(&self) -> Option<&dyn fmt::Display> {
        self.0.as_ref().and_then(DeferredOutcome::failure)
    }

    fn refusal(&self) -> Option<&ResilienceError> {
        self.0.as_ref().and_then(DeferredOutcome::refusal)
    }
}

/// A point-in-time view of one background pool, for dashboards.
///
/// `finished` counts tasks that ran to their end whatever their outcome; `failed` and
/// `panicked` are the part of them that ended badly.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BackgroundSnapshot {
    /// The pool's name.
    pub name: Arc<str>,
    /// Its slot count.
    pub max_concurrent: u32,
    /// Its queue length.
    pub max_queued: u32,
    /// Tasks running now.
    pub running: u32,
    /// Tasks waiting for a slot now.
    pub queued: u32,
    /// Its own load: admitted tasks over its capacity.
    pub load: f64,
    /// Submissions shed for the pool's own load.
    pub shed_load: u64,
    /// Submissions shed because a compartment it yields to was busy.
    pub shed_pressure: u64,
    /// Tasks that ran to their end (including failed and panicked ones).
    pub finished: u64,
    /// Tasks that ended with an `Err` (logged).
    pub failed: u64,
    /// Work a mechanism refused before it ran (by design under pressure; logged at INFO).
    pub refused: u64,
    /// Tasks that panicked (caught and logged).
    pub panicked: u64,
    /// Tasks dropped before they finished, queued or running (each logged with its name).
    pub abandoned: u64,
}

impl BackgroundPool {
    /// A builder for a pool named `name`: 4 slots, 16 queue places, shedding when full or
    /// when a compartment it yields to is at the background threshold.
    pub fn builder(name: impl Into<Arc<str>>) -> BackgroundPoolBuilder {
        BackgroundPoolBuilder {
            name: name.into(),
            max_concurrent: 4,
            max_queued: 16,
            shed_at: 1.0,
            thresholds: Thresholds::default(),
            yield_to: Vec::new(),
            platform: None,
        }
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Submits `work`, or refuses it at once with the reason it was shed.
    ///
    /// Admitted work runs when a slot is free, in the order it was submitted, with the
    /// failure handling of deferred work: an `Err` is logged with `name`, a panic is caught and
    /// logged. Delivery is at-least-once: the work must be idempotent.
    pub fn submit<F>(&self, name: impl Into<Arc<str>>, work: F) -> Result<(), ResilienceError>
    where
        F: Future + Send + 'static,
        F::Output: DeferredOutcome,
    {
        let pool = &self.inner;
        self.yield_check()?;
        self.admit()?;
        let admitted = Admitted(pool.clone());
        let slots = pool.slots.clone();
        let running_pool = pool.clone();
        let waiting = Waiting::new();
        let work = async move {
            let _admitted = admitted;
            // The semaphore is never closed, so this only fails if it were; then the work
            // does not run, and the task ends as if it had nothing to do.
            let Ok(_slot) = slots.acquire_owned().await else {
                return Ran(None);
            };
            waiting.started();
            running_pool.running.fetch_add(1, Ordering::AcqRel);
            let _running = Running(running_pool);
            Ran(Some(work.await))
        };
        let task = Task::new(
            name.into(),
            WorkClass::Background,
            RequestId::current(),
            Some(&pool.stats),
            work,
        );
        match &pool.platform {
            Some(platform) => platform.keep_alive(task),
            None => crate::defer::platform().keep_alive(task),
        }
        Ok(())
    }

    /// Sheds when a compartment the pool yields to is at or above the background threshold.
    fn yield_check(&self) -> Result<(), ResilienceError> {
        let pool = &self.inner;
        let Some(busiest) = pool
            .yield_to
            .iter()
            .max_by(|a, b| a.load().total_cmp(&b.load()))
        else {
            return Ok(());
        };
        let load = busiest.load();
        match decide(
            WorkClass::Background,
            load,
            Deadline::MAX_BUDGET,
            Duration::ZERO,
            &pool.thresholds,
        ) {
            Decision::Admit(_) => Ok(()),
            Decision::Shed(reason) => {
                pool.shed_pressure.fetch_add(1, Ordering::Relaxed);
                Err(self.shed(reason, Some(busiest.name())))
            }
        }
    }

    /// Takes an admission when the pool's own load is below its threshold.
    fn admit(&self) -> Result<(), ResilienceError> {
        let pool = &self.inner;
        let own = Thresholds {
            deferred: pool.shed_at,
            background: pool.shed_at,
        };
        let mut admitted = pool.admitted.load(Ordering::Acquire);
        loop {
            let load = self.load_of(admitted);
            if let Decision::Shed(reason) = decide(
                WorkClass::Background,
                load,
                Deadline::MAX_BUDGET,
                Duration::ZERO,
                &own,
            ) {
                pool.shed_load.fetch_add(1, Ordering::Relaxed);
                return Err(self.shed(reason, None));
            }
            match pool.admitted.compare_exchange_weak(
                admitted,
                admitted + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(actual) => admitted = actual,
            }
        }
    }

    fn shed(&self, reason: ShedReason, compartment: Option<&str>) -> ResilienceError {
        let pool = &self.inner;
        pool.stats.shed.fetch_add(1, Ordering::Relaxed);
        pool.shed_metrics
            .shed(WorkClass::Background, reason.signal());
        class_totals(WorkClass::Background)
            .shed
            .fetch_add(1, Ordering::Relaxed);
        match compartment {
            Some(compartment) => observe::shed(
                "background",
                &pool.name,
                WorkClass::Background.as_str(),
                &reason,
                &format_args!("{reason} of `{compartment}`, which it yields to"),
            ),
            None => observe::shed(
                "background",
                &pool.name,
                WorkClass::Background.as_str(),
                &reason,
                &format_args!("{reason} of its own capacity"),
            ),
        }
        ResilienceError::new(pool.name.clone(), RefusalReason::Shed(reason))
    }

    fn load_of(&self, admitted: u32) -> f64 {
        let capacity = self.inner.max_concurrent + self.inner.max_queued;
        f64::from(admitted.min(capacity)) / f64::from(capacity)
    }

    /// The pool's own load: admitted tasks (running and queued) over its capacity, in
    /// `[0, 1]`.
    pub fn load(&self) -> f64 {
        self.load_of(self.inner.admitted.load(Ordering::Acquire))
    }

    /// Tasks running now.
    pub fn running(&self) -> u32 {
        self.inner.running.load(Ordering::Acquire)
    }

    /// Tasks admitted and waiting for a slot now.
    pub fn queued(&self) -> u32 {
        let admitted = self.inner.admitted.load(Ordering::Acquire);
        admitted.saturating_sub(self.running())
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> BackgroundSnapshot {
        let pool = &*self.inner;
        BackgroundSnapshot {
            name: pool.name.clone(),
            max_concurrent: pool.max_concurrent,
            max_queued: pool.max_queued,
            running: self.running(),
            queued: self.queued(),
            load: self.load(),
            shed_load: pool.shed_load.load(Ordering::Relaxed),
            shed_pressure: pool.shed_pressure.load(Ordering::Relaxed),
            finished: pool.stats.finished.load(Ordering::Relaxed),
            failed: pool.stats.failed.load(Ordering::Relaxed),
            refused: pool.stats.refused.load(Ordering::Relaxed),
            panicked: pool.stats.panicked.load(Ordering::Relaxed),
            abandoned: pool.stats.abandoned.load(Ordering::Relaxed),
        }
    }
}

fn pools() -> &'static Mutex<Vec<Weak<Pool>>> {
    static POOLS: OnceLock<Mutex<Vec<Weak<Pool>>>> = OnceLock::new();
    POOLS.get_or_init(Mutex::default)
}

fn register(pool: &Arc<Pool>) {
    let mut pools = pools().lock().unwrap_or_else(|p| p.into_inner());
    pools.retain(|p| p.strong_count() > 0);
    pools.push(Arc::downgrade(pool));
}

/// Every live background pool of the process, sorted by name.
pub fn snapshots() -> Vec<BackgroundSnapshot> {
    let live: Vec<BackgroundPool> = pools()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .map(|inner| BackgroundPool { inner })
        .collect();
    let mut snapshots: Vec<_> = live.iter().map(BackgroundPool::snapshot).collect();
    snapshots.sort_by(|a, b| a.name.cmp(&b.name));
    snapshots
}

static POOL: OnceLock<BackgroundPool> = OnceLock::new();

/// The process-level background pool was already chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the process-level background pool was already chosen: set it once at startup, before any background work is submitted"
)]
pub struct PoolAlreadySet;

/// Chooses the process-level pool [`background`] submits to. Set it once, at startup; without
/// it, a pool named `background` with the [builder](BackgroundPool::builder)'s defaults is used.
pub fn set_pool(pool: BackgroundPool) -> Result<(), PoolAlreadySet> {
    POOL.set(pool).map_err(|_| PoolAlreadySet)
}

/// The process-level background pool.
pub fn pool() -> &'static BackgroundPool {
    POOL.get_or_init(|| BackgroundPool::builder("background").build())
}

/// Submits `work` to the process-level background pool, or refuses it at once with the reason
/// it was shed (see [`BackgroundPool::submit`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// match velocity_policy_runtime::background("embed_document", async { Ok::<_, std::io::Error>(()) }) {
///     Ok(()) => {}
///     // Shed: the reason is already logged; the response does not depend on it.
///     Err(refusal) => assert_eq!(refusal.kind(), velocity_policy_runtime::RefusalKind::Shed),
/// }
/// # }
/// ```
pub fn background<F>(name: impl Into<Arc<str>>, work: F) -> Result<(), ResilienceError>
where
    F: Future + Send + 'static,
    F::Output: DeferredOutcome,
{
    pool().submit(name, work)
}
