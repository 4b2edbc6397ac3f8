//! How much of the pool may this dependency hold? A bulkhead per dependency.
//!
//! Named for the compartments of a ship's hull: a breach floods one section, not the vessel.
//! When a dependency slows from 50 ms to 5 s, calls waiting on it pile up and exhaust the
//! concurrency every *other* capability also needs. A bulkhead caps the calls one dependency
//! may hold at `max_concurrent`.
//!
//! Past the cap, callers are **refused rather than queued**: a queue is latency the caller
//! cannot see and the operator cannot measure. A small `max_queued` absorbs a burst; it does
//! not store a backlog. A queued caller waits at most until its deadline, and leaving the queue
//! that way is a refusal too (the work never ran).
//!
//! A bulkhead bounds **one instance**. Ten instances each holding four slots is forty calls at
//! the dependency; the fleet-wide bound is the platform's concurrency setting and the
//! dependency's connection limit, which is where it belongs.
//!
//! The slots are a [`tokio::sync::Semaphore`]'s permits, so the queue is tokio's, and **fair**:
//! a freed slot goes to the caller at the head of the queue, never to one that arrived later.
//! Taking a free slot is the semaphore's `try_acquire` (no lock, no allocation); the permit is
//! given back on drop, also when the work panics or its future is cancelled.
//!
//! The slot count can change while the bulkhead runs ([`Bulkhead::set_max_concurrent`], for a
//! policy reload). Raising it adds permits, which go to the queue first; lowering it removes
//! free permits and keeps back the ones still held as they come home, so new callers are
//! refused (or queued) until the calls in flight drain below the new count, and no slot is ever
//! taken back from a call that holds one.
//!
//! An **adaptive** bulkhead ([`BulkheadBuilder::adaptive`], `adaptive(min = 4, max = 64)` in a
//! `.policy` file) moves its own slot count between a `min` and a `max`, following the latency
//! of the calls it admits (Netflix's Vegas, adapted: see [`adaptive`]).
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::{Bulkhead, Deadline, RefusalKind};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let search = Bulkhead::builder("search").max_concurrent(2).max_queued(1).build();
//! let deadline = Deadline::after(Duration::from_millis(100));
//!
//! let a = search.acquire(&deadline).await.unwrap();
//! let b = search.acquire(&deadline).await.unwrap();
//! assert_eq!(search.load(), 1.0);
//!
//! // The third caller may queue, but nobody frees a slot before its deadline.
//! let refusal = search.acquire(&deadline).await.unwrap_err();
//! assert_eq!(refusal.kind(), RefusalKind::BulkheadFull);
//!
//! drop((a, b));
//! assert_eq!(search.load(), 0.0);
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::criticality::Criticality;
use crate::deadline::Deadline;
use crate::error::{RefusalReason, ResilienceError};
use crate::instruments::BulkheadMetrics;
use crate::observe;

pub mod adaptive;
mod levels;

use adaptive::Adaptation;
#[doc(no_inline)]
pub use adaptive::{AdaptiveLimit, AdaptiveSnapshot};
use levels::Levels;
/// A bulkhead's settings, defined once in `velocity-policy-model`.
pub use velocity_policy_model::BulkheadConfig;

#[derive(Debug, Default)]
struct Stats {
    /// Sheddable requests turned away to keep slots for more important ones.
    refused_kept: AtomicU64,
    refused_full: AtomicU64,
    refused_queue_timeout: AtomicU64,
    queued_total: AtomicU64,
}

struct Inner {
    name: Arc<str>,
    /// The slot count now (what the permits add up to once `owed` is paid).
    max_concurrent: AtomicU32,
    max_queued: u32,
    /// The slots: one permit each, free or held. Its waiters are the queue, in order.
    slots: Semaphore,
    /// Permits still held that a lowered slot count keeps back when they are given back.
    owed: AtomicU32,
    /// Serialises resizes (never taken on the admitted path).
    resizing: std::sync::Mutex<()>,
    /// Callers waiting for a slot (at most `max_queued`).
    queued: AtomicU32,
    /// Calls in flight per criticality, once a call other than `critical` came.
    levels: Levels,
    stats: Stats,
    metrics: BulkheadMetrics,
    /// The measurements of an adaptive bulkhead; `None` for a fixed one.
    adaptive: Option<Adaptation>,
}

/// A named bulkhead. Cloning is cheap and clones share the compartment.
#[derive(Clone)]
pub struct Bulkhead {
    inner: Arc<Inner>,
}

impl fmt::Debug for Bulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bulkhead")
            .field("name", &self.inner.name)
            .field("max_concurrent", &self.inner.slots())
            .field("max_queued", &self.inner.max_queued)
            .field("running", &self.running())
            .field("queued", &self.queued())
            .finish()
    }
}

/// Builds a [`Bulkhead`]; see [`Bulkhead::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct BulkheadBuilder {
    name: Arc<str>,
    config: BulkheadConfig,
}

impl BulkheadBuilder {
    /// Slots: calls that may run at once (at least 1). A fixed count: for one that follows
    /// the dependency's latency, [`adaptive`](Self::adaptive) instead (which wins whichever
    /// is called first).
    pub fn max_concurrent(mut self, slots: u32) -> Self {
        if self.config.adaptive.is_none() {
            self.config = self.config.with_max_concurrent(slots);
        }
        self
    }

    /// Slots that follow the dependency's measured latency, between `limit`'s `min` and
    /// `max`, starting at `min` (see [the module docs](self::adaptive)). Replaces
    /// [`max_concurrent`](Self::max_concurrent); the queue stays as
    /// [`max_queued`](Self::max_queued) sets it.
    pub fn adaptive(mut self, limit: AdaptiveLimit) -> Self {
        self.config = self.config.with_adaptive(limit);
        self
    }

    /// Queue places: callers that may wait for a slot, each at most until its deadline.
    /// Keep it small: it absorbs a burst, it does not store a backlog.
    pub fn max_queued(mut self, places: u32) -> Self {
        self.config = self.config.with_max_queued(places);
        self
    }

    /// Replaces the whole configuration.
    pub fn config(mut self, config: BulkheadConfig) -> Self {
        self.config = config;
        self
    }

    /// Builds the bulkhead.
    pub fn build(self) -> Bulkhead {
        let slots = self.config.starting_slots().max(1);
        let metrics = BulkheadMetrics::new(&self.name);
        metrics.limit(slots);
        Bulkhead {
            inner: Arc::new(Inner {
                metrics,
                name: self.name,
                max_concurrent: AtomicU32::new(slots),
                max_queued: self.config.max_queued,
                slots: Semaphore::new(slots as usize),
                owed: AtomicU32::new(0),
                resizing: std::sync::Mutex::new(()),
                queued: AtomicU32::new(0),
                levels: Levels::default(),
                stats: Stats::default(),
                adaptive: self.config.adaptive.map(Adaptation::new),
            }),
        }
    }
}

/// A slot in a bulkhead, released on drop (also on panic or cancellation).
#[must_use = "the slot is released as soon as the permit is dropped"]
pub struct BulkheadPermit<'a> {
    inner: &'a Inner,
    /// When the call took its slot, for an adaptive bulkhead's measurement.
    started: u64,
    /// The criticality it was counted under ([`UNCOUNTED`] when the bulkhead counts none).
    level: u8,
}

impl fmt::Debug for BulkheadPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadPermit")
            .field("bulkhead", &self.inner.name)
            .finish()
    }
}

impl Drop for BulkheadPermit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.inner.release(self.started, self.level);
    }
}

/// A slot that owns a handle to its bulkhead, for work that outlives the caller's borrow
/// (a spawned task). Released on drop.
#[must_use = "the slot is released as soon as the permit is dropped"]
pub struct OwnedBulkheadPermit {
    inner: Arc<Inner>,
    started: u64,
    level: u8,
}

impl fmt::Debug for OwnedBulkheadPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedBulkheadPermit")
            .field("bulkhead", &self.inner.name)
            .finish()
    }
}

impl Drop for OwnedBulkheadPermit {
    fn drop(&mut self) {
        self.inner.release(self.started, self.level);
    }
}

/// The future returned by [`Bulkhead::acquire`].
#[doc(hidden)]
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a> {
    state: AcquireState<'a>,
}

type QueueWait<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<u8, ResilienceError>> + Send + 'a>>;

enum AcquireState<'a> {
    Ready(Option<BulkheadPermit<'a>>),
    Queued(&'a Inner, QueueWait<'a>),
    Refused(Option<ResilienceError>),
}

impl fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.state {
            AcquireState::Ready(_) => "Acquire(ready)",
            AcquireState::Queued(..) => "Acquire(queued)",
            AcquireState::Refused(_) => "Acquire(refused)",
        })
    }
}

impl<'a> Acquire<'a> {
    /// What [`Bulkhead::acquire`] already decided: the slot that was free, or the refusal of a
    /// caller that may not queue (each counted as the acquire started, as when polled); or,
    /// for a caller in the queue, the acquire to await. The expansions' admitted path takes
    /// its slot here with a plain call: no future is polled or dropped for a free slot.
    #[doc(hidden)]
    #[inline]
    pub fn decided(self) -> Result<Result<BulkheadPermit<'a>, ResilienceError>, Self> {
        match self.state {
            AcquireState::Ready(Some(permit)) => Ok(Ok(permit)),
            AcquireState::Refused(Some(refusal)) => Ok(Err(refusal)),
            state => Err(Self { state }),
        }
    }
}

impl<'a> std::future::Future for Acquire<'a> {
    type Output = Result<BulkheadPermit<'a>, ResilienceError>;

    #[inline]
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        // Neither variant is self-referential: the queue's state is already pinned on the heap.
        let this = self.get_mut();
        match &mut this.state {
            AcquireState::Ready(permit) => match permit.take() {
                Some(permit) => Poll::Ready(Ok(permit)),
                // Polled again after it completed: the slot went to the first poll.
                None => Poll::Pending,
            },
            AcquireState::Refused(refusal) => match refusal.take() {
                Some(refusal) => Poll::Ready(Err(refusal)),
                None => Poll::Pending,
            },
            AcquireState::Queued(inner, wait) => match wait.as_mut().poll(cx) {
                Poll::Ready(Ok(level)) => Poll::Ready(Ok(inner.permit(level))),
                Poll::Ready(Err(refusal)) => Poll::Ready(Err(refusal)),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// A point-in-time view of one bulkhead, for dashboards.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BulkheadSnapshot {
    /// The bulkhead's name.
    pub name: Arc<str>,
    /// Its slot count.
    pub max_concurrent: u32,
    /// Its queue length.
    pub max_queued: u32,
    /// Calls running now.
    pub running: u32,
    /// Callers queued now.
    pub queued: u32,
    /// `running / max_concurrent`.
    pub load: f64,
    /// Callers refused because slots and queue were full.
    pub refused_full: u64,
    /// Queued callers whose deadline passed before a slot freed.
    pub refused_queue_timeout: u64,
    /// Callers that had to queue.
    pub queued_total: u64,
    /// Sheddable requests turned away because the free slots were kept for more important
    /// ones ([`criticality`](crate::criticality)).
    pub refused_kept: u64,
    /// For an adaptive bulkhead, its bounds and what it measured (`max_concurrent` is its
    /// limit now); `None` for a fixed one.
    pub adaptive: Option<AdaptiveSnapshot>,
}

/// Why a call found no slot for it.
#[derive(Debug, Clone, Copy)]
enum Turned {
    /// Every slot busy.
    Full,
    /// Free slots, all kept for the levels above the caller's.
    Kept { free: u32, kept: u32 },
}

/// A permit's level when the bulkhead counts none (every call so far was `critical`).
const UNCOUNTED: u8 = u8::MAX;

impl Inner {
    /// The slot count now.
    #[inline]
    fn slots(&self) -> u32 {
        self.max_concurrent.load(Ordering::Relaxed)
    }

    /// The permit for a slot just taken: for an adaptive bulkhead it notes the time (the one
    /// clock read its admitted path adds).
    #[inline]
    fn permit(&self, level: u8) -> BulkheadPermit<'_> {
        BulkheadPermit {
            inner: self,
            started: self.permit_started(),
            level,
        }
    }

    #[inline]
    fn permit_started(&self) -> u64 {
        self.adaptive.as_ref().map_or(0, Adaptation::now)
    }

    /// Sets the slot count; raising it serves the queue first. Returns the previous count.
    fn set_slots(&self, slots: u32) -> u32 {
        let slots = slots.max(1);
        let _resizing = self.resizing.lock().unwrap_or_else(|p| p.into_inner());
        let before = self.max_concurrent.swap(slots, Ordering::AcqRel);
        if slots > before {
            // Cancel what a lowered count still kept back, then add the rest as permits (tokio
            // hands them to the queue's head first).
            let mut more = slots - before;
            let cancelled = take_up_to(&self.owed, more);
            more -= cancelled;
            self.slots.add_permits(more as usize);
        } else if slots < before {
            // Owe the difference first, so a permit given back meanwhile is kept back; then
            // take what is free now off the debt, giving back any taken beyond it.
            let fewer = slots.abs_diff(before);
            self.owed.fetch_add(fewer, Ordering::AcqRel);
            let forgotten =
                u32::try_from(self.slots.forget_permits(fewer as usize)).unwrap_or(fewer);
            let paid = take_up_to(&self.owed, forgotten);
            if forgotten > paid {
                self.slots.add_permits((forgotten - paid) as usize);
            }
        }
        if slots != before {
            self.metrics.limit(slots);
            if let Some(adaptation) = &self.adaptive {
                adaptation.restart();
            }
        }
        before
    }

    /// Takes a free slot for a call of `level`: its counted level, or why not. A slot freed
    /// while callers wait is theirs (tokio hands it to the queue's head), so this never
    /// overtakes the queue; a sheddable level also leaves the slots the levels above it need.
    #[inline]
    fn try_take(&self, level: Criticality) -> Result<u8, Turned> {
        let counted = self.levels.counts(level);
        if counted && level.is_sheddable() {
            // Work above that finds every slot busy waits in line ahead of every sheddable
            // request (which never queues): only what the free queue places cannot hold has to
            // be kept free, so with a queue the idle capacity goes to sheddable work.
            let places = self
                .max_queued
                .saturating_sub(self.queued.load(Ordering::Relaxed));
            let kept = self.levels.kept_above(level).saturating_sub(places);
            let free = u32::try_from(self.slots.available_permits()).unwrap_or(u32::MAX);
            if free <= kept {
                return Err(if free == 0 {
                    Turned::Full
                } else {
                    Turned::Kept { free, kept }
                });
            }
        }
        match self.slots.try_acquire() {
            Ok(permit) => {
                // Given back by our own permit's drop, which also keeps it back when owed.
                permit.forget();
                self.took();
                Ok(if counted {
                    self.levels.admitted(level)
                } else {
                    UNCOUNTED
                })
            }
            Err(_) => Err(Turned::Full),
        }
    }

    /// The counted level of a call of `level` that just took a slot.
    fn counted(&self, level: Criticality) -> u8 {
        if self.levels.counts(level) {
            self.levels.admitted(level)
        } else {
            UNCOUNTED
        }
    }

    /// The refusal of a call `turned` away: the compartment full (`queue_places` it could have
    /// waited in), or its free slots kept for more important requests.
    #[cold]
    fn turned_away(
        &self,
        turned: Turned,
        level: Criticality,
        queue_places: u32,
    ) -> ResilienceError {
        match turned {
            Turned::Full => self.refuse_full(queue_places),
            Turned::Kept { free, kept } => {
                self.stats.refused_kept.fetch_add(1, Ordering::Relaxed);
                let reason = crate::error::ShedReason::Criticality { level, free, kept };
                observe::shed("bulkhead", &self.name, level.as_str(), &reason, &reason);
                self.refuse(RefusalReason::Shed(reason))
            }
        }
    }

    /// A slot was taken.
    #[inline]
    fn took(&self) {
        self.metrics.took_slot();
    }

    /// Calls holding a slot: the permits out of the semaphore. Its permits, free and held, add
    /// up to the slot count plus what a lowered count still keeps back (`owed`), so the calls
    /// are counted once, by the semaphore, not again beside it on every admission and release.
    /// A resize running on another thread can move the count by its step for that moment.
    fn running(&self) -> u32 {
        let permits = self
            .slots()
            .saturating_add(self.owed.load(Ordering::Relaxed));
        let free = u32::try_from(self.slots.available_permits()).unwrap_or(u32::MAX);
        permits.saturating_sub(free)
    }

    /// Joins the queue when there is room.
    fn try_enqueue(&self) -> bool {
        let joined = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |queued| {
                (queued < self.max_queued).then_some(queued + 1)
            })
            .is_ok();
        if joined {
            self.metrics.queued(1.0);
        }
        joined
    }

    fn leave_queue(&self) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
        self.metrics.queued(-1.0);
    }

    #[inline]
    fn release(&self, started: u64, level: u8) {
        if level != UNCOUNTED {
            self.levels.released(level);
        }
        self.metrics.released_slot();
        // The calls in flight as this one ends (itself included), while it still holds its slot.
        let in_flight = self.adaptive.as_ref().map(|_| self.running());
        // A permit a lowered slot count kept back is not given back.
        if take_up_to(&self.owed, 1) == 0 {
            self.slots.add_permits(1);
        }
        if let (Some(adaptation), Some(in_flight)) = (&self.adaptive, in_flight) {
            self.measured(adaptation, started, in_flight);
        }
    }

    /// An adaptive bulkhead's call ended: its latency counts, and when it closed a window the
    /// limit moves.
    #[inline]
    fn measured(&self, adaptation: &Adaptation, started: u64, in_flight: u32) {
        let slots = self.slots();
        if let Some(decided) = adaptation.completed(started, in_flight, slots)
            && decided != slots
        {
            self.set_slots(decided);
            adaptation.report(&self.name, decided);
        }
    }

    fn refuse(&self, reason: RefusalReason) -> ResilienceError {
        self.metrics.refusals.count(reason.code());
        let refusal = ResilienceError::new(self.name.clone(), reason);
        observe::refused(&refusal);
        refusal
    }

    /// Every slot busy, and none of the `queue_places` the caller could wait in free (the
    /// queue's length, or 0 for a caller that never queues).
    fn refuse_full(&self, queue_places: u32) -> ResilienceError {
        self.stats.refused_full.fetch_add(1, Ordering::Relaxed);
        self.refuse(RefusalReason::BulkheadFull {
            max_concurrent: self.slots(),
            max_queued: queue_places,
        })
    }

    async fn wait_in_queue(
        &self,
        deadline: Deadline,
        level: Criticality,
    ) -> Result<u8, ResilienceError> {
        use std::future::{Future, poll_fn};
        use std::task::Poll;

        // Take a place in the semaphore's queue first (its first poll registers the waiter, in
        // arrival order), and only then count it against `max_queued`: a caller counted as
        // queued is always already in line, so no newcomer can take the slot freed for it.
        let acquire = self.slots.acquire();
        tokio::pin!(acquire);
        match poll_fn(|cx| Poll::Ready(acquire.as_mut().poll(cx))).await {
            // A slot freed since `try_take`, and nobody was in line for it.
            Poll::Ready(Ok(permit)) => {
                permit.forget();
                self.took();
                return Ok(self.counted(level));
            }
            // The semaphore is never closed; were it, the compartment would be full for good.
            Poll::Ready(Err(_closed)) => return Err(self.refuse_full(self.max_queued)),
            Poll::Pending => {}
        }
        if !self.try_enqueue() {
            // Dropping the registration leaves the line (a slot already handed to it goes back).
            return Err(self.refuse_full(self.max_queued));
        }
        self.stats.queued_total.fetch_add(1, Ordering::Relaxed);
        // Leaves the queue if this future is dropped while waiting (the caller was cancelled),
        // so an abandoned place never blocks the compartment.
        let place = QueuePlace { inner: self };
        let started = Instant::now();
        // The permit first, then the deadline: a slot free as the deadline passes is still
        // taken.
        let outcome = tokio::time::timeout_at(deadline.instant(), acquire).await;
        drop(place);
        match outcome {
            Ok(Ok(permit)) => {
                permit.forget();
                self.took();
                Ok(self.counted(level))
            }
            Ok(Err(_closed)) => Err(self.refuse_full(self.max_queued)),
            Err(_elapsed) => {
                self.stats
                    .refused_queue_timeout
                    .fetch_add(1, Ordering::Relaxed);
                Err(self.refuse(RefusalReason::BulkheadQueueTimeout {
                    waited: started.elapsed(),
                }))
            }
        }
    }
}

/// Takes up to `most` off `counter` (never below zero); how much it took.
fn take_up_to(counter: &AtomicU32, most: u32) -> u32 {
    if most == 0 {
        return 0;
    }
    match counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |owed| {
        (owed > 0).then(|| owed - owed.min(most))
    }) {
        Ok(owed) => owed.min(most),
        Err(_) => 0,
    }
}

/// A caller's place in the queue; dropping it leaves the queue.
struct QueuePlace<'a> {
    inner: &'a Inner,
}

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        self.inner.leave_queue();
    }
}

impl Bulkhead {
    /// A builder for a bulkhead named `name`: 10 slots and no queue by default.
    pub fn builder(name: impl Into<Arc<str>>) -> BulkheadBuilder {
        BulkheadBuilder {
            name: name.into(),
            config: BulkheadConfig::DEFAULT,
        }
    }

    /// The bulkhead's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Slots now.
    pub fn max_concurrent(&self) -> u32 {
        self.inner.slots()
    }

    /// Changes the slot count while the bulkhead runs (at least 1), for a policy reload.
    ///
    /// - **Raising** it wakes the queued callers, which take the new slots in turn.
    /// - **Lowering** it admits nobody new (they queue, if there is room, or are refused)
    ///   until the calls in flight drain below the new count. It never revokes a slot: a call
    ///   that holds one keeps it until it ends, so `running` may exceed the count for a while.
    ///
    /// The queue length does not change. Returns the previous count. An
    /// [adaptive](BulkheadBuilder::adaptive) bulkhead goes on adapting from the new count
    /// (which may be outside its bounds until its next window).
    ///
    /// ```
    /// use std::time::Duration;
    /// use velocity_policy_runtime::{Bulkhead, Deadline};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let search = Bulkhead::builder("search").max_concurrent(2).build();
    /// let a = search.try_acquire().unwrap();
    /// let b = search.try_acquire().unwrap();
    ///
    /// assert_eq!(search.set_max_concurrent(1), 2);
    /// drop(a);
    /// // One call still runs: that is the new count, so a newcomer is refused.
    /// assert!(search.try_acquire().is_err());
    /// drop(b);
    /// assert!(search.try_acquire().is_ok());
    /// # }
    /// ```
    pub fn set_max_concurrent(&self, slots: u32) -> u32 {
        self.inner.set_slots(slots)
    }

    /// The bounds of an adaptive bulkhead; `None` for a fixed one.
    pub fn adaptive(&self) -> Option<AdaptiveLimit> {
        self.inner.adaptive.as_ref().map(Adaptation::config)
    }

    /// Queue places.
    pub fn max_queued(&self) -> u32 {
        self.inner.max_queued
    }

    /// Takes a free slot now, or refuses; never queues.
    #[inline]
    pub fn try_acquire(&self) -> Result<BulkheadPermit<'_>, ResilienceError> {
        let level = crate::criticality::current();
        match self.inner.try_take(level) {
            Ok(counted) => Ok(self.inner.permit(counted)),
            // It never queues: no queue place was open to it, whatever the queue holds.
            Err(turned) => Err(self.inner.turned_away(turned, level, 0)),
        }
    }

    /// Takes a free slot; when all are busy, waits in the queue (if it has room) at most until
    /// `deadline`. Refuses when slots and queue are full, and when the deadline passes in the
    /// queue: in both cases the work never ran.
    ///
    /// With a free slot the returned future is ready at once and nothing is built for the
    /// queue; a caller that has to queue gets its waiting state on the heap (it is waiting
    /// anyway).
    #[inline]
    pub fn acquire<'a>(&'a self, deadline: &Deadline) -> Acquire<'a> {
        let level = crate::criticality::current();
        let state = match self.inner.try_take(level) {
            Ok(counted) => AcquireState::Ready(Some(self.inner.permit(counted))),
            // A sheddable request never waits in the queue: a slot that frees goes to a caller
            // that matters.
            Err(turned) if level.is_sheddable() => {
                AcquireState::Refused(Some(self.inner.turned_away(turned, level, 0)))
            }
            Err(_) => AcquireState::Queued(
                &self.inner,
                Box::pin(self.inner.wait_in_queue(*deadline, level)),
            ),
        };
        Acquire { state }
    }

    /// Like [`Bulkhead::acquire`], for a permit that owns a handle to the bulkhead.
    pub async fn acquire_owned(
        &self,
        deadline: &Deadline,
    ) -> Result<OwnedBulkheadPermit, ResilienceError> {
        let permit = self.acquire(deadline).await?;
        let (started, level) = (permit.started, permit.level);
        std::mem::forget(permit);
        Ok(OwnedBulkheadPermit {
            inner: self.inner.clone(),
            started,
            level,
        })
    }

    /// Like [`Bulkhead::try_acquire`], for a permit that owns a handle to the bulkhead.
    pub fn try_acquire_owned(&self) -> Result<OwnedBulkheadPermit, ResilienceError> {
        let permit = self.try_acquire()?;
        let (started, level) = (permit.started, permit.level);
        std::mem::forget(permit);
        Ok(OwnedBulkheadPermit {
            inner: self.inner.clone(),
            started,
            level,
        })
    }

    /// A free slot now, or `None`, and nothing else: no refusal counted or logged, no queue
    /// joined. The tower layer's admitted path, which decides itself what a full
    /// compartment means for the call.
    #[cfg(feature = "tower")]
    #[inline]
    pub(crate) fn take_free_owned(&self) -> Option<OwnedBulkheadPermit> {
        let level = self.inner.try_take(crate::criticality::current()).ok()?;
        Some(OwnedBulkheadPermit {
            started: self.inner.permit_started(),
            inner: self.inner.clone(),
            level,
        })
    }

    /// How full the compartment is: running calls over slots, in `[0, 1]`. The shedding
    /// decision reads it.
    pub fn load(&self) -> f64 {
        let slots = self.inner.slots();
        f64::from(self.running().min(slots)) / f64::from(slots)
    }

    /// Calls running now.
    pub fn running(&self) -> u32 {
        self.inner.running()
    }

    /// Callers queued now.
    pub fn queued(&self) -> u32 {
        self.inner.queued.load(Ordering::Relaxed)
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> BulkheadSnapshot {
        let inner = &*self.inner;
        BulkheadSnapshot {
            name: inner.name.clone(),
            max_concurrent: inner.slots(),
            max_queued: inner.max_queued,
            running: self.running(),
            queued: self.queued(),
            load: self.load(),
            refused_full: inner.stats.refused_full.load(Ordering::Relaxed),
            refused_queue_timeout: inner.stats.refused_queue_timeout.load(Ordering::Relaxed),
            queued_total: inner.stats.queued_total.load(Ordering::Relaxed),
            refused_kept: inner.stats.refused_kept.load(Ordering::Relaxed),
            adaptive: inner.adaptive.as_ref().map(Adaptation::snapshot),
        }
    }
}
