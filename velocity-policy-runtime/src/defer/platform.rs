//! Where deferred work is kept alive: one trait, one implementation per kind of host.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{Notify, mpsc, watch};

use super::{Task, class_totals};
use crate::observe;
use velocity_policy_model::WorkClass;

/// Keeps deferred work alive after the response: the one seam between this crate and the host
/// the process runs on.
///
/// A serverless host freezes the execution environment the moment the response returns, so a
/// future nobody holds there is not merely unordered, it may never run at all; the host's
/// `waitUntil` is what keeps it alive. In a container the process lives on, and spawning is
/// enough, as long as shutdown drains what is in flight ([`ContainerPlatform`]). In tests the
/// work should simply run, and the test should be able to wait for it ([`ImmediatePlatform`]).
///
/// A platform receives [`Task`]s: futures whose failure handling is already attached, so an
/// implementation only has to poll each one to its end. A task it cannot keep alive should be
/// [abandoned](Task::abandon) with the reason, which logs it by name.
///
/// # A serverless host
///
/// A serverless runtime implements the trait around its own `waitUntil`. Here the host is a
/// stand-in: its `wait_until` collects futures, and the host awaits all of them before it
/// freezes the invocation, which is what `waitUntil` promises.
///
/// ```
/// use std::future::Future;
/// use std::pin::Pin;
/// use std::sync::{Arc, Mutex};
/// use velocity_policy_runtime::defer::{AfterResponse, Platform, RequestId, Task};
///
/// /// What the host gives a function: a way to keep the invocation alive for a future.
/// #[derive(Clone, Default)]
/// struct Invocation {
///     kept_alive: Arc<Mutex<Vec<Pin<Box<dyn Future<Output = ()> + Send>>>>>,
/// }
/// impl Invocation {
///     fn wait_until(&self, future: impl Future<Output = ()> + Send + 'static) {
///         self.kept_alive.lock().unwrap().push(Box::pin(future));
///     }
///     /// The host, after the response was sent and before it freezes the process.
///     async fn finish(&self) {
///         let kept: Vec<_> = self.kept_alive.lock().unwrap().drain(..).collect();
///         for future in kept {
///             future.await;
///         }
///     }
/// }
///
/// /// The whole integration: hand each task to `waitUntil`.
/// struct WaitUntil(Invocation);
/// impl Platform for WaitUntil {
///     fn keep_alive(&self, task: Task) {
///         self.0.wait_until(task);
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let invocation = Invocation::default();
/// let after = AfterResponse::with_platform(RequestId::new("inv-1"), WaitUntil(invocation.clone()));
/// let ran = Arc::new(Mutex::new(false));
/// let flag = ran.clone();
/// after.defer("record_pageview", async move { *flag.lock().unwrap() = true; });
///
/// after.release(); // the response is finished
/// invocation.finish().await; // the host keeps the invocation alive until this returns
/// assert!(*ran.lock().unwrap());
/// # }
/// ```
///
/// A host that keeps nothing to drain (the one above: the host itself waits) keeps the default
/// [`shutdown`](Platform::shutdown), which reports nothing.
pub trait Platform: Send + Sync + 'static {
    /// Keeps `task` alive until it finishes, independently of the response (which is finished
    /// by the time this is called for a request's work).
    fn keep_alive(&self, task: Task);

    /// Waits at most `drain_deadline` for the work in flight, abandons what is left, and says
    /// how many tasks finished and how many were abandoned. Work handed over afterwards is
    /// abandoned at once (and logged).
    ///
    /// The default reports nothing: for a host that keeps work alive itself.
    fn shutdown(
        &self,
        drain_deadline: Duration,
    ) -> Pin<Box<dyn Future<Output = DrainReport> + Send + '_>> {
        let _ = drain_deadline;
        Box::pin(std::future::ready(DrainReport::default()))
    }
}

impl<P: Platform + ?Sized> Platform for Arc<P> {
    fn keep_alive(&self, task: Task) {
        (**self).keep_alive(task);
    }

    fn shutdown(
        &self,
        drain_deadline: Duration,
    ) -> Pin<Box<dyn Future<Output = DrainReport> + Send + '_>> {
        (**self).shutdown(drain_deadline)
    }
}

/// What a drain did with the work in flight, and every task of the process since it started.
///
/// Nothing is lost silently: every task that was in flight when the drain began, or was handed
/// over during it, is in one of the two drain counts (`finished`, `abandoned`); and every task
/// scheduled since the process started is in one of the counts of [`deferred`](Self::deferred)
/// or [`background`](Self::background) ([`TaskTotals::accounted_for`]).
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_runtime::defer::{AfterResponse, ContainerPlatform, RequestId};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let platform = ContainerPlatform::new();
/// // Work that finished long before the shutdown...
/// for _ in 0..3 {
///     let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
///     after.defer("count_view", async {});
///     after.release();
/// }
/// tokio::time::sleep(Duration::from_millis(1)).await;
/// // ...and one task still running when it begins.
/// let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
/// after.defer("index", tokio::time::sleep(Duration::from_millis(50)));
/// after.release();
///
/// let report = platform.shutdown(Duration::from_secs(1)).await;
/// assert_eq!((report.finished, report.abandoned), (1, 0), "what the drain waited for");
/// assert_eq!(report.deferred.scheduled, 4, "since the process started");
/// assert_eq!(report.deferred.finished, 4);
/// assert!(report.accounted_for());
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct DrainReport {
    /// Tasks that ran to their end (whatever their outcome) before the drain deadline.
    pub finished: u64,
    /// Tasks still running at the drain deadline, or handed over after it: dropped, each
    /// logged with its name.
    pub abandoned: u64,
    /// The process's deferred work since it started, whichever platform ran it, read when the
    /// drain ended. Zero from a platform that keeps nothing to drain (the default
    /// [`Platform::shutdown`]); [`totals`] reads it anywhere.
    pub deferred: TaskTotals,
    /// The process's background work since it started (every pool), read when the drain
    /// ended; zero like [`deferred`](Self::deferred) from a platform with nothing to drain.
    pub background: TaskTotals,
}

impl DrainReport {
    /// Whether every task of both classes is in exactly one count of its totals
    /// ([`TaskTotals::accounted_for`]).
    pub fn accounted_for(&self) -> bool {
        self.deferred.accounted_for() && self.background.accounted_for()
    }
}

/// Every task of one class since the process started, by how it ended: "every task accounted
/// for" in one struct.
///
/// `scheduled = finished + shed + abandoned + in_flight`. `finished` counts every task that
/// ended, whatever its outcome, so `failed`, `panicked` and `refused` are parts of it (as in the
/// dashboard's [`DeferredSnapshot`](super::DeferredSnapshot)), and
/// [`succeeded`](Self::succeeded) is the rest. Read while work runs, the counters are read one
/// after another and may be a few tasks apart; read when the process is quiet (after a drain)
/// they are exact, and a drain that waited for everything leaves `in_flight` at 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct TaskTotals {
    /// Work scheduled: every call to [`defer`](super::defer()) (or an annotated deferred
    /// function), or every submission to a background pool, including the ones shed.
    pub scheduled: u64,
    /// Tasks that ended, whatever their outcome (including failed, panicked and refused).
    pub finished: u64,
    /// The part of `finished` that ended with an `Err` (logged).
    pub failed: u64,
    /// The part of `finished` that panicked (caught and logged).
    pub panicked: u64,
    /// The part of `finished` that a mechanism refused (the work never ran): a breaker, a
    /// bulkhead or the budget inside the work, or a bound of deferred work.
    pub refused: u64,
    /// Background submissions shed at once: refused to the caller, never a task (always 0
    /// for deferred work).
    pub shed: u64,
    /// Tasks dropped before they finished (each logged with its name and why).
    pub abandoned: u64,
    /// Tasks not yet ended: waiting for their response, waiting to start, or running.
    pub in_flight: u64,
}

impl TaskTotals {
    /// The tasks that finished without a failure, a panic or a refusal.
    pub fn succeeded(&self) -> u64 {
        self.finished
            .saturating_sub(self.failed + self.panicked + self.refused)
    }

    /// Whether every scheduled task is in exactly one count:
    /// `scheduled == finished + shed + abandoned + in_flight`.
    pub fn accounted_for(&self) -> bool {
        self.scheduled == self.finished + self.shed + self.abandoned + self.in_flight
    }
}

impl TaskTotals {
    fn fields(&self) -> observe::ClassFields<'_> {
        observe::ClassFields {
            scheduled: self.scheduled,
            finished: self.finished,
            abandoned: self.abandoned,
            in_flight: self.in_flight,
            summary: self,
        }
    }
}

impl fmt::Display for TaskTotals {
    /// `12 scheduled: 9 finished (1 failed, 0 panicked, 2 refused), 0 shed, 1 abandoned, 2 in
    /// flight`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} scheduled: {} finished ({} failed, {} panicked, {} refused), {} shed, {} abandoned, {} in flight",
            self.scheduled,
            self.finished,
            self.failed,
            self.panicked,
            self.refused,
            self.shed,
            self.abandoned,
            self.in_flight
        )
    }
}

/// The process's tasks of `class` since it started ([`TaskTotals`]): deferred work whichever
/// platform ran it, or background work of every pool. Critical work never becomes a task: its
/// totals are all zero.
pub fn totals(class: WorkClass) -> TaskTotals {
    let stats = class_totals(class);
    // The end counts before `scheduled`, so a task made meanwhile is not missing from them.
    let in_flight = stats.in_flight.load(Ordering::Acquire);
    let finished = stats.finished.load(Ordering::Acquire);
    let failed = stats.failed.load(Ordering::Acquire);
    let panicked = stats.panicked.load(Ordering::Acquire);
    let refused = stats.refused.load(Ordering::Acquire);
    let shed = stats.shed.load(Ordering::Acquire);
    let abandoned = stats.abandoned.load(Ordering::Acquire);
    let scheduled = stats.scheduled.load(Ordering::Acquire) + shed;
    TaskTotals {
        scheduled,
        finished,
        failed,
        panicked,
        refused,
        shed,
        abandoned,
        in_flight,
    }
}

/// The platform for a long-lived process (a container, a VM): spawns each task on the tokio
/// runtime, keeps count of them, and [drains](ContainerPlatform::shutdown) them on shutdown.
///
/// Cloning is cheap and clones share the count of tasks in flight. Tasks are spawned on the runtime given to
/// [`ContainerPlatform::on`], or else on the runtime current at the hand-over; a task handed
/// over outside any runtime is abandoned and logged.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_runtime::defer::{AfterResponse, ContainerPlatform, RequestId};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let platform = ContainerPlatform::new();
/// let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
/// after.defer("quick", tokio::time::sleep(Duration::from_millis(10)));
/// after.defer("slow", tokio::time::sleep(Duration::from_secs(60)));
/// after.release();
///
/// let report = platform.shutdown(Duration::from_secs(1)).await;
/// assert_eq!((report.finished, report.abandoned), (1, 1));
/// # }
/// ```
#[derive(Clone)]
pub struct ContainerPlatform {
    inner: Arc<Container>,
}

struct Container {
    in_flight: Tracked,
    /// Set at the drain deadline: what is still running is abandoned. tokio's watch channel, whose
    /// receivers see the value already set as well as a later one.
    abandon: watch::Sender<bool>,
    handle: Option<Handle>,
    finished: AtomicU64,
    abandoned: AtomicU64,
}

/// The tasks in flight, counted the way tokio's shutdown guide waits for tasks: each task holds
/// a sender of a channel nobody sends on, and the receiver sees the end once every sender is
/// gone. The platform keeps one sender of its own until the drain begins, so that until then
/// the count can never reach its end; during the drain a task handed over joins the count
/// while any other is still in flight (the drain then waits for it too).
struct Tracked {
    /// The platform's own sender, until [`close`](Self::close).
    keeper: Mutex<Option<mpsc::Sender<()>>>,
    /// Where each task gets its sender from.
    join: mpsc::WeakSender<()>,
    /// Ends (`recv` gives `None`) once every sender is gone; a lock, so that two drains at
    /// once both wait.
    ended: tokio::sync::Mutex<mpsc::Receiver<()>>,
}

impl Tracked {
    fn new() -> Self {
        let (keeper, ended) = mpsc::channel(1);
        Self {
            join: keeper.downgrade(),
            keeper: Mutex::new(Some(keeper)),
            ended: tokio::sync::Mutex::new(ended),
        }
    }

    /// A place in the count, held by the task until it ends; `None` once closed with nothing
    /// left in flight.
    fn join(&self) -> Option<mpsc::Sender<()>> {
        self.join.upgrade()
    }

    /// Tasks holding a place.
    fn len(&self) -> usize {
        let keeper = self
            .keeper
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        self.join.strong_count().saturating_sub(usize::from(keeper))
    }

    /// Lets the count end: from now on it ends when the last task does.
    fn close(&self) {
        drop(
            self.keeper
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
    }
}

impl fmt::Debug for ContainerPlatform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContainerPlatform")
            .field("in_flight", &self.in_flight())
            .field("shut_down", &*self.inner.abandon.borrow())
            .finish()
    }
}

impl Default for ContainerPlatform {
    fn default() -> Self {
        Self::new()
    }
}

impl ContainerPlatform {
    /// A platform that spawns each task on the tokio runtime current at the hand-over.
    pub fn new() -> Self {
        Self::build(None)
    }

    /// A platform that spawns each task on the runtime of `handle`, wherever it is handed
    /// over from.
    pub fn on(handle: Handle) -> Self {
        Self::build(Some(handle))
    }

    fn build(handle: Option<Handle>) -> Self {
        Self {
            inner: Arc::new(Container {
                in_flight: Tracked::new(),
                abandon: watch::channel(false).0,
                handle,
                finished: AtomicU64::new(0),
                abandoned: AtomicU64::new(0),
            }),
        }
    }

    /// Tasks handed over and not yet ended.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.len()
    }

    /// Waits at most `drain_deadline` for the tasks in flight (including tasks handed over
    /// while it waits), then abandons what is left, logging each abandoned task by name.
    /// Returns how many finished and how many were abandoned; the two add up to every task
    /// that was in flight or handed over until it returned.
    ///
    /// Call it after the server stopped accepting requests and finished the ones it had (with
    /// axum, after `serve(..).with_graceful_shutdown(..)` returned), so the work those
    /// responses deferred is in flight. Tasks handed over after the drain are abandoned at
    /// once. Abandoning is cooperative: a task blocking its thread holds the drain up until it
    /// next yields.
    pub async fn shutdown(&self, drain_deadline: Duration) -> DrainReport {
        let inner = &*self.inner;
        let finished_before = inner.finished.load(Ordering::Acquire);
        let abandoned_before = inner.abandoned.load(Ordering::Acquire);
        let in_flight = inner.in_flight.len();
        inner.in_flight.close();
        let mut ended = inner.in_flight.ended.lock().await;
        let drained = tokio::time::timeout(drain_deadline, ended.recv())
            .await
            .is_ok();
        // Also after a complete drain: from now on, nothing new is kept alive.
        inner.abandon.send_replace(true);
        ended.recv().await;
        drop(ended);
        let report = DrainReport {
            finished: inner.finished.load(Ordering::Acquire) - finished_before,
            abandoned: inner.abandoned.load(Ordering::Acquire) - abandoned_before,
            deferred: totals(WorkClass::Deferred),
            background: totals(WorkClass::Background),
        };
        observe::drained(
            in_flight,
            drained,
            drain_deadline,
            (report.finished, report.abandoned),
            report.deferred.fields(),
            report.background.fields(),
        );
        report
    }
}

impl Platform for ContainerPlatform {
    fn keep_alive(&self, task: Task) {
        let inner = &self.inner;
        if *inner.abandon.borrow() {
            inner.abandoned.fetch_add(1, Ordering::AcqRel);
            task.abandon("handed over after the platform was shut down");
            return;
        }
        let handle = match &inner.handle {
            Some(handle) => handle.clone(),
            None => match Handle::try_current() {
                Ok(handle) => handle,
                Err(_) => {
                    inner.abandoned.fetch_add(1, Ordering::AcqRel);
                    task.abandon("handed over outside a tokio runtime");
                    return;
                }
            },
        };
        let Some(counted) = inner.in_flight.join() else {
            // Closed, and nothing is left in flight: the drain is over.
            inner.abandoned.fetch_add(1, Ordering::AcqRel);
            task.abandon("handed over after the platform was shut down");
            return;
        };
        let container = self.inner.clone();
        let mut abandon = container.abandon.subscribe();
        handle.spawn(async move {
            let _counted = counted;
            let mut task = task;
            tokio::select! {
                biased;
                () = &mut task => {
                    container.finished.fetch_add(1, Ordering::AcqRel);
                }
                _ = abandon.wait_for(|abandon| *abandon) => {
                    container.abandoned.fetch_add(1, Ordering::AcqRel);
                    task.abandon("the drain deadline passed");
                }
            }
        });
    }

    fn shutdown(
        &self,
        drain_deadline: Duration,
    ) -> Pin<Box<dyn Future<Output = DrainReport> + Send + '_>> {
        Box::pin(ContainerPlatform::shutdown(self, drain_deadline))
    }
}

/// The platform for tests: spawns each task at once on the current runtime, and lets the test
/// wait until everything handed over has ended ([`settled`](ImmediatePlatform::settled)).
///
/// Cloning is cheap and clones share the counts.
#[derive(Clone, Default)]
pub struct ImmediatePlatform {
    inner: Arc<Immediate>,
}

#[derive(Default)]
struct Immediate {
    handed_over: AtomicU64,
    in_flight: AtomicU64,
    idle: Notify,
}

impl fmt::Debug for ImmediatePlatform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImmediatePlatform")
            .field("handed_over", &self.handed_over())
            .field("in_flight", &self.inner.in_flight.load(Ordering::Acquire))
            .finish()
    }
}

impl ImmediatePlatform {
    /// A platform with nothing handed over yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tasks handed over so far.
    pub fn handed_over(&self) -> u64 {
        self.inner.handed_over.load(Ordering::Acquire)
    }

    /// Waits until every task handed over has ended (including tasks they handed over).
    pub async fn settled(&self) {
        loop {
            let idle = self.inner.idle.notified();
            tokio::pin!(idle);
            // Register before looking, so a task ending between the look and the wait is seen.
            idle.as_mut().enable();
            if self.inner.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            idle.await;
        }
    }
}

/// Counts a task out of `in_flight` when its wrapper ends, also when it is dropped.
struct InFlight(Arc<Immediate>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Platform for ImmediatePlatform {
    fn keep_alive(&self, task: Task) {
        let Ok(handle) = Handle::try_current() else {
            task.abandon("handed over outside a tokio runtime");
            return;
        };
        self.inner.handed_over.fetch_add(1, Ordering::AcqRel);
        self.inner.in_flight.fetch_add(1, Ordering::AcqRel);
        let in_flight = InFlight(self.inner.clone());
        handle.spawn(async move {
            let _in_flight = in_flight;
            task.await;
        });
    }
}

static PLATFORM: OnceLock<Arc<dyn Platform>> = OnceLock::new();

/// The process-level platform was already chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the process-level platform was already chosen: set it once at startup, before any work is deferred"
)]
pub struct PlatformAlreadySet;

/// Chooses the process-level platform: where work deferred outside a request goes, and where
/// request queues release to unless their layer names another. Set it once, at startup,
/// before any work is deferred; without it, a [`ContainerPlatform`] on the current runtime is
/// used.
pub fn set_platform(platform: impl Platform) -> Result<(), PlatformAlreadySet> {
    PLATFORM
        .set(Arc::new(platform))
        .map_err(|_| PlatformAlreadySet)
}

/// The process-level platform (a [`ContainerPlatform`] unless [`set_platform`] chose another).
pub fn platform() -> &'static dyn Platform {
    &**PLATFORM.get_or_init(|| Arc::new(ContainerPlatform::new()))
}

/// Drains the process-level platform: see [`Platform::shutdown`].
pub async fn shutdown(drain_deadline: Duration) -> DrainReport {
    platform().shutdown(drain_deadline).await
}
