//! What may the user not wait for? Work deferred until the response is finished.
//!
//! Saving a document must not make the user wait for analytics, search indexing, activity
//! events or notifications. Those are secondary effects: the response does not depend on them,
//! so they run **after** it. [`defer`] hands such work to the platform, and the request's
//! response goes out without waiting for it.
//!
//! ```text
//! request → critical work → RESPONSE → deferred work → background work
//! ```
//!
//! # Two lifetimes
//!
//! Two kinds of work outlive the handler's `return`, and they are not the same thing:
//!
//! - **A response body still streaming.** A streamed body (server-sent events, a large export
//!   written as it is read) *is* the response: the client is still receiving it, and work that
//!   produces it lives exactly as long as the body. It belongs inside the body's stream, and
//!   its failure is the response's failure (the stream ends with an error). Nothing here is
//!   for that.
//! - **Work after the response is finished.** Analytics, indexing, notifications: nobody is
//!   waiting for them, and the response must not wait for them either. This module is for
//!   that. "Finished" means the response body's last byte was handed to the connection, not
//!   when the handler returned: with `AfterResponseLayer` (feature
//!   `http`, module `defer::http`), work deferred while a request is handled is held in that request's
//!   [`AfterResponse`] queue and released to the platform only when the body reports its end,
//!   or is dropped because the client went away. Never before.
//!
//! Work deferred outside any request (in a job, at startup, from another task) has no response
//! to wait for and goes to the process-level [platform](platform()) at once.
//!
//! # Failure handling is attached before the hand-over
//!
//! Nobody awaits deferred work, so nobody could handle its failure: an `Err` would vanish and
//! a panic would surface wherever the runtime reports unhandled panics (on a serverless host,
//! an unhandled failure can take the process down). So [`defer`] wraps the work **before** it
//! hands it over: an `Err` is logged with the task's name (the output must implement
//! [`DeferredOutcome`]), a panic is caught and logged, nothing is rethrown and nothing reaches
//! the response. Attaching it afterwards, or inside the work, is the mistake that stays
//! invisible until a provider has an outage; here there is no "afterwards", because what the
//! platform receives is already a [`Task`] that cannot fail.
//!
//! Each task runs in a tracing span `task` with the fields `name`, `class` (`deferred` or
//! `background`) and `request` (the id of the request it came from, when it came from one),
//! and [follows from](tracing::Span::follows_from) the span that deferred it.
//!
//! # At-least-once: deferred work must be idempotent
//!
//! Deferred work is delivered **at least once**, not exactly once: the platform may retry the
//! request that deferred it, a serverless host may run an invocation twice, and a crash after
//! the work ran but before its effect was recorded repeats it. Write deferred work so that
//! running it twice is harmless (an upsert, not an insert; a notification keyed by the event
//! id). Deferred work is never necessary for the correctness of the response: a durable write
//! that must be acknowledged is critical work, not deferred work.
//!
//! # Bounded, like the background pool
//!
//! Deferred work never grows without bound ([`Limits`], chosen once with [`set_limits`]): one
//! request's queue holds at most `max_per_request` tasks (128 by default), and at most
//! `max_concurrent` deferred tasks run at once (512) with at most `max_queued` more waiting for
//! a slot (4,096). A task past a bound is **refused**: it never runs, it counts as refused in
//! the [`snapshot`] and the [`totals`], and it is logged at INFO (`task_refused`, with the
//! bulkhead `after_response` or `deferred` that refused it). Like a bulkhead's, the bounds are
//! one process's.
//!
//! # The platform seam
//!
//! "Keep this alive after the response" depends on where the process runs, so it is one trait,
//! [`Platform`]:
//!
//! | where | implementation | what "keep alive" means |
//! |---|---|---|
//! | a container, a VM, a long-lived server | [`ContainerPlatform`] (the default) | spawn on a task tracker; [`shutdown`](ContainerPlatform::shutdown) drains it |
//! | a serverless host | your own, around its `waitUntil` | see [`Platform`] |
//! | tests | [`ImmediatePlatform`] | spawn at once; [`settled`](ImmediatePlatform::settled) awaits them all |
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::defer::{self, ContainerPlatform};
//!
//! #[derive(Debug)]
//! struct IndexError;
//! impl std::fmt::Display for IndexError {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
//!         f.write_str("search index unavailable")
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // At startup: choose the process-level platform (this is also the default).
//! let platform = ContainerPlatform::new();
//! defer::set_platform(platform.clone()).unwrap();
//!
//! // Anywhere: hand work over. Its failure is logged with its name, never rethrown.
//! defer::defer("index_document", async {
//!     tokio::time::sleep(Duration::from_millis(30)).await;
//!     Err::<(), _>(IndexError)
//! });
//! defer::defer("count_save", async {});
//!
//! // At shutdown, after the server stopped accepting requests: wait for what is in flight.
//! let report = platform.shutdown(Duration::from_secs(5)).await;
//! assert_eq!((report.finished, report.abandoned), (2, 0));
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::task::futures::TaskLocalFuture;

use velocity_policy_model::WorkClass;

#[cfg(feature = "http")]
pub mod http;
mod limits;
mod platform;
#[cfg(feature = "http")]
mod signal;
mod task;

pub use limits::{
    DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_PER_REQUEST, DEFAULT_MAX_QUEUED, Limits, LimitsAlreadySet,
    limits, set_limits,
};
pub use platform::{
    ContainerPlatform, DrainReport, ImmediatePlatform, Platform, PlatformAlreadySet, TaskTotals,
    platform, set_platform, shutdown, totals,
};
#[cfg(feature = "http")]
pub use signal::{ShutdownSignal, ShutdownSignals, shutdown_signal};
pub use task::{DeferredOutcome, Scheduled, Task};
pub(crate) use task::{TaskStats, class_totals};

tokio::task_local! {
    /// The after-response queue of the request being handled.
    static CURRENT: AfterResponse;
}

/// Hands `work` over to run after the current response is finished, with its failure handling
/// attached first.
///
/// Inside a request handled by `AfterResponseLayer` (feature `http`), the work
/// waits in the request's [`AfterResponse`] queue until the response body is finished (or
/// dropped); anywhere else it goes to the process-level [platform](platform()) at once.
///
/// The output must be `()` or a `Result` whose error implements `Display` ([`DeferredOutcome`]):
/// an `Err` is logged with `name`, a panic is caught and logged, and nothing reaches the caller.
/// Delivery is at-least-once: the work must be idempotent (see the [module docs](self)).
///
/// Work deferred from a task spawned by the handler (`tokio::spawn`) is outside the request's
/// scope and goes to the platform at once; move the [`AfterResponse`] handle into such a task
/// instead.
///
/// Deferred work is bounded ([`Limits`]): past its request's `max_per_request`, or past the
/// process's `max_concurrent` running plus `max_queued` waiting when it is handed over, a task
/// is refused (it never runs), counted as refused and logged.
///
/// ```
/// use velocity_policy_runtime::defer::{self, ImmediatePlatform};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let platform = ImmediatePlatform::new();
/// defer::set_platform(platform.clone()).unwrap();
///
/// defer::defer("notify_followers", async { Ok::<_, std::io::Error>(()) });
/// defer::defer("broken", async {
///     let sizes: Vec<usize> = Vec::new();
///     let _first = sizes[0]; // panics: caught, logged, contained
/// });
///
/// platform.settled().await;
/// assert_eq!(platform.handed_over(), 2);
/// # }
/// ```
pub fn defer<F>(name: impl Into<Arc<str>>, work: F)
where
    F: Future + Send + 'static,
    F::Output: DeferredOutcome,
{
    match CURRENT.try_with(AfterResponse::clone) {
        Ok(after) => after.defer(name, work),
        Err(_) => {
            let name = name.into();
            crate::observe::deferred_without_layer(&name);
            let task = Task::new(name, WorkClass::Deferred, None, None, work);
            hand_over(platform(), task);
        }
    }
}

/// Hands a deferred task to `platform` if the process's bound admits it; refuses it (counted
/// and logged) if not.
fn hand_over(platform: &dyn Platform, mut task: Task) {
    match limits::bound().admit() {
        Ok(admission) => {
            task.admit(admission);
            task.handed_over();
            platform.keep_alive(task);
        }
        Err(refusal) => {
            crate::observe::refused(&refusal);
            task.refuse(&refusal);
        }
    }
}

/// Which request a task came from: the `x-request-id` header when the request had one, else a
/// process-wide counter.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RequestId(Repr);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    Given(Arc<str>),
    Counted(u64),
}

impl RequestId {
    /// A request id given by the caller (an `x-request-id` header, a trace id).
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(Repr::Given(id.into()))
    }

    /// The next id of the process-wide counter, for a request that brought none.
    pub fn next() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(1);
        Self(Repr::Counted(COUNTER.fetch_add(1, Ordering::Relaxed)))
    }

    /// The id of the request being handled, inside [`AfterResponse::scope`].
    pub fn current() -> Option<Self> {
        CURRENT.try_with(|after| after.request().clone()).ok()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Given(id) => f.write_str(id),
            Repr::Counted(n) => write!(f, "{n}"),
        }
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestId({self})")
    }
}

/// One request's after-response queue: work deferred while the request is handled waits here
/// until the response is finished, then goes to the platform.
///
/// `AfterResponseLayer` (feature `http`) makes one per request, puts it in scope for
/// the handler (so [`defer`] finds it) and in the request's extensions (so a handler can take
/// it as an axum extractor), and [releases](AfterResponse::release) it when the response body
/// is finished. Other servers can do the same by hand:
///
/// ```
/// use velocity_policy_runtime::defer::{AfterResponse, ImmediatePlatform, RequestId};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let platform = ImmediatePlatform::new();
/// let after = AfterResponse::with_platform(RequestId::new("req-7"), platform.clone());
///
/// let response = after
///     .scope(async {
///         velocity_policy_runtime::defer("send_receipt", async {});
///         "saved"
///     })
///     .await;
/// assert_eq!(response, "saved");
/// assert_eq!(platform.handed_over(), 0, "held until the response is finished");
///
/// // ...write `response` to the connection, then:
/// after.release();
/// platform.settled().await;
/// assert_eq!(platform.handed_over(), 1);
/// # }
/// ```
///
/// Work deferred through a handle after its release goes to the platform at once (the
/// response is already finished). A queue dropped without a release releases itself: nothing
/// deferred is lost silently.
#[derive(Clone)]
pub struct AfterResponse {
    inner: Arc<Queue>,
}

struct Queue {
    request: RequestId,
    platform: Option<Arc<dyn Platform>>,
    /// `Some` while the response is not finished; `None` once released.
    pending: Mutex<Option<Vec<Task>>>,
}

impl fmt::Debug for AfterResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pending = lock(&self.inner.pending);
        f.debug_struct("AfterResponse")
            .field("request", &self.inner.request)
            .field("released", &pending.is_none())
            .field("queued", &pending.as_ref().map_or(0, Vec::len))
            .finish()
    }
}

// A poisoned lock means a panic elsewhere while it was held; the queue is still valid.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl AfterResponse {
    /// A queue for `request` that releases to the process-level [platform](platform()).
    pub fn new(request: RequestId) -> Self {
        Self::build(request, None)
    }

    /// A queue for `request` that releases to `platform`.
    pub fn with_platform(request: RequestId, platform: impl Platform) -> Self {
        Self::build(request, Some(Arc::new(platform)))
    }

    pub(crate) fn build(request: RequestId, platform: Option<Arc<dyn Platform>>) -> Self {
        Self {
            inner: Arc::new(Queue {
                request,
                platform,
                pending: Mutex::new(Some(Vec::new())),
            }),
        }
    }

    /// The request this queue belongs to.
    pub fn request(&self) -> &RequestId {
        &self.inner.request
    }

    /// Defers `work` until this request's response is finished (at once if it already is),
    /// with the failure handling of [`defer`].
    pub fn defer<F>(&self, name: impl Into<Arc<str>>, work: F)
    where
        F: Future + Send + 'static,
        F::Output: DeferredOutcome,
    {
        let task = Task::new(
            name.into(),
            WorkClass::Deferred,
            Some(self.inner.request.clone()),
            None,
            work,
        );
        let mut pending = lock(&self.inner.pending);
        match pending.as_mut() {
            Some(queue) => {
                let most = limits::bound().limits.max_per_request;
                if queue.len() >= most as usize {
                    drop(pending);
                    let refusal = limits::request_queue_full(most);
                    crate::observe::refused(&refusal);
                    task.refuse(&refusal);
                    return;
                }
                queue.push(task);
                deferred_stats().queued.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                drop(pending);
                self.inner.keep_alive(task);
            }
        }
    }

    /// Runs `fut` with this queue in scope, so [`defer`] inside it (and [`RequestId::current`])
    /// finds this request.
    pub fn scope<F: Future>(&self, fut: F) -> TaskLocalFuture<AfterResponse, F> {
        CURRENT.scope(self.clone(), fut)
    }

    #[cfg(feature = "http")]
    pub(crate) fn sync_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        CURRENT.sync_scope(self.clone(), f)
    }

    /// The response is finished: hands every deferred task to the platform, in the order they
    /// were deferred. Later calls do nothing; work deferred afterwards goes to the platform at
    /// once.
    pub fn release(&self) {
        self.inner.release();
    }

    /// True once [`release`](AfterResponse::release) was called.
    pub fn is_released(&self) -> bool {
        lock(&self.inner.pending).is_none()
    }
}

impl Queue {
    fn keep_alive(&self, task: Task) {
        match &self.platform {
            Some(platform) => hand_over(&**platform, task),
            None => hand_over(platform(), task),
        }
    }

    fn release(&self) {
        let tasks = lock(&self.pending).take();
        let Some(tasks) = tasks else { return };
        if tasks.is_empty() {
            return;
        }
        deferred_stats()
            .queued
            .fetch_sub(tasks.len() as u64, Ordering::Relaxed);
        for task in tasks {
            self.keep_alive(task);
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // Nothing deferred is lost silently: a queue nobody released releases itself.
        self.release();
    }
}

fn deferred_stats() -> &'static TaskStats {
    task::class_totals(WorkClass::Deferred)
}

/// Deferred work of the whole process, for dashboards.
///
/// `finished` counts tasks that ran to their end whatever their outcome; `failed` and
/// `panicked` are the part of them that ended badly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct DeferredSnapshot {
    /// Tasks waiting for their response to finish.
    pub queued: u64,
    /// Tasks handed to the platform that have started and not ended.
    pub running: u64,
    /// Tasks handed to the platform and admitted that have not started: waiting for one of
    /// the [`max_concurrent`](Limits::max_concurrent) slots, or for the platform to poll them.
    pub waiting: u64,
    /// Tasks that ran to their end (including failed and panicked ones).
    pub finished: u64,
    /// Tasks that ended with an `Err` (logged).
    pub failed: u64,
    /// Work a mechanism refused before it ran (by design under pressure; logged at INFO).
    pub refused: u64,
    /// Tasks that panicked (caught and logged).
    pub panicked: u64,
    /// Tasks dropped before they finished: a drain deadline passed, no runtime was left to run
    /// them, or the platform dropped them (each logged with its name).
    pub abandoned: u64,
}

/// The process's deferred work now.
pub fn snapshot() -> DeferredSnapshot {
    let stats = deferred_stats();
    let running = stats.running.load(Ordering::Relaxed);
    DeferredSnapshot {
        queued: stats.queued.load(Ordering::Relaxed),
        running,
        waiting: u64::from(limits::bound().admitted()).saturating_sub(running),
        finished: stats.finished.load(Ordering::Relaxed),
        failed: stats.failed.load(Ordering::Relaxed),
        refused: stats.refused.load(Ordering::Relaxed),
        panicked: stats.panicked.load(Ordering::Relaxed),
        abandoned: stats.abandoned.load(Ordering::Relaxed),
    }
}
