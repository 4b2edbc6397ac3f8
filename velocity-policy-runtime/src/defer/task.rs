//! A task whose failure handling was attached before anyone else saw it.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tracing::Span;

use super::RequestId;
use super::limits::Admission;
use crate::instruments::{Since, TaskMetrics};
use crate::observe;
use velocity_policy_model::WorkClass;

/// What deferred or background work may end in: `()`, or a `Result` whose error can be logged.
///
/// Nobody awaits such work, so its failure can only be logged; this trait says what to log.
#[diagnostic::on_unimplemented(
    message = "deferred and background work must end in `()` or in a `Result` whose error implements `Display`, not in `{Self}`",
    label = "this work ends in `{Self}`",
    note = "nobody awaits deferred work: its failure can only be logged, so the error must be printable"
)]
pub trait DeferredOutcome {
    /// The failure to log, if the work failed.
    fn failure(&self) -> Option<&dyn fmt::Display>;

    /// The refusal, when the work ended because a mechanism refused it (the work never ran):
    /// by design under pressure, so it is logged at INFO with its kind and counted apart from
    /// failures.
    fn refusal(&self) -> Option<&crate::ResilienceError> {
        None
    }
}

/// What an annotated deferred or background function yields: its own failure, a refusal or an
/// expiry. Refusals are told apart from failures when logged and counted.
#[derive(Debug)]
pub struct Scheduled<E>(pub Result<(), crate::CallError<E>>);

impl<E: fmt::Display> DeferredOutcome for Scheduled<E> {
    fn failure(&self) -> Option<&dyn fmt::Display> {
        self.0.as_ref().err().map(|e| e as &dyn fmt::Display)
    }

    fn refusal(&self) -> Option<&crate::ResilienceError> {
        self.0.as_ref().err().and_then(crate::CallError::refusal)
    }
}

impl DeferredOutcome for () {
    fn failure(&self) -> Option<&dyn fmt::Display> {
        None
    }
}

impl<T, E: fmt::Display> DeferredOutcome for Result<T, E> {
    fn failure(&self) -> Option<&dyn fmt::Display> {
        self.as_ref().err().map(|e| e as &dyn fmt::Display)
    }
}

/// Counters for one kind of task (deferred work, or one background pool).
#[derive(Debug, Default)]
pub(crate) struct TaskStats {
    /// Tasks made (each ends once: finished or abandoned).
    pub(crate) scheduled: AtomicU64,
    /// Tasks made and not yet ended: in a request's queue, waiting to start, or running.
    pub(crate) in_flight: AtomicU64,
    /// Submissions shed before a task was made (background pools).
    pub(crate) shed: AtomicU64,
    /// Deferred tasks waiting for their response (unused for background pools).
    pub(crate) queued: AtomicU64,
    pub(crate) running: AtomicU64,
    pub(crate) finished: AtomicU64,
    pub(crate) failed: AtomicU64,
    /// Work a mechanism refused (it never ran): by design under pressure.
    pub(crate) refused: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) abandoned: AtomicU64,
}

impl TaskStats {
    const fn new() -> Self {
        Self {
            scheduled: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            shed: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            running: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            panicked: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
        }
    }
}

/// The process's counters of one class since it started, whichever pool or platform ran the
/// work (a background pool's own counters are in its `TaskStats` too).
pub(crate) fn class_totals(class: WorkClass) -> &'static TaskStats {
    static DEFERRED: TaskStats = TaskStats::new();
    static BACKGROUND: TaskStats = TaskStats::new();
    // Tasks are deferred or background; critical work never becomes one.
    static OTHER: TaskStats = TaskStats::new();
    match class {
        WorkClass::Deferred => &DEFERRED,
        WorkClass::Background => &BACKGROUND,
        WorkClass::Critical => &OTHER,
    }
}

enum Outcome {
    Succeeded,
    Refused(crate::ResilienceError),
    Failed(String),
    Panicked(String),
}

pin_project! {
    /// The work with its failure handling: an `Err` becomes `Outcome::Failed`, a panic
    /// becomes `Outcome::Panicked`.
    struct Attached<F> {
        #[pin]
        work: F,
    }
}

impl<F> Future for Attached<F>
where
    F: Future,
    F::Output: DeferredOutcome,
{
    type Output = Outcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        let work = self.project().work;
        // Unwind safety: after a panic the work is never polled again (the task drops it), so
        // no broken invariant inside it can be observed.
        match catch_unwind(AssertUnwindSafe(|| work.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(match (output.refusal(), output.failure()) {
                (Some(refusal), _) => Outcome::Refused(refusal.clone()),
                (None, None) => Outcome::Succeeded,
                (None, Some(error)) => Outcome::Failed(error.to_string()),
            }),
            Err(payload) => Poll::Ready(Outcome::Panicked(panic_message(&*payload))),
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic whose payload is not a string".to_owned()
    }
}

/// Deferred or background work as a platform receives it: a future that cannot fail.
///
/// Its failure handling is already attached (an `Err` is logged with its name, a panic is
/// caught and logged), it runs in its tracing span, and it counts itself for the dashboard. A
/// platform only has to poll it to completion, or drop it: a task dropped before it finished
/// logs itself as abandoned, so nothing is lost silently. Prefer
/// [`abandon`](Task::abandon), which says why.
#[must_use = "a task does nothing unless polled; dropping it abandons the work"]
pub struct Task {
    name: Arc<str>,
    class: WorkClass,
    request: Option<RequestId>,
    span: Span,
    counts: Counts,
    /// Its place in the bound of deferred work, once admitted: it starts when this holds a slot.
    admission: Option<Admission>,
    started: bool,
    /// When a deferred task was handed over to run (its response's end), for the time it
    /// waited to start (feature `metrics`).
    handed_over: Since,
    abandon_reason: &'static str,
    /// `None` once the work ended.
    work: Option<Pin<Box<dyn Future<Output = Outcome> + Send>>>,
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("name", &self.name)
            .field("class", &self.class)
            .field("request", &self.request)
            .field("started", &self.started)
            .field("ended", &self.work.is_none())
            .finish()
    }
}

impl Task {
    /// Attaches the failure handling to `work`: from here on it cannot fail. It counts in the
    /// totals of its class, and in `pool`'s counters when it belongs to a pool.
    pub(crate) fn new<F>(
        name: Arc<str>,
        class: WorkClass,
        request: Option<RequestId>,
        pool: Option<&Arc<TaskStats>>,
        work: F,
    ) -> Self
    where
        F: Future + Send + 'static,
        F::Output: DeferredOutcome,
    {
        // Not a child of the span that deferred it: that span (the request's) ends long
        // before this work does. The work follows from it.
        let span = tracing::info_span!(
            target: "policy",
            parent: None,
            "task",
            name = &*name,
            class = class.as_str(),
            request = tracing::field::Empty,
        );
        if let Some(request) = &request {
            span.record("request", tracing::field::display(request));
        }
        span.follows_from(Span::current());
        let task = Self {
            name,
            class,
            request,
            span,
            counts: Counts {
                class,
                pool: pool.cloned(),
            },
            admission: None,
            started: false,
            handed_over: Since::default(),
            abandon_reason: "dropped before it finished",
            work: Some(Box::pin(Attached { work })),
        };
        task.counts.add(|s| &s.scheduled);
        task.counts.add(|s| &s.in_flight);
        task.counts.waiting(1.0);
        task
    }

    /// The task is handed over to run now: a deferred task's response is finished (or it had
    /// none). Its wait to start is measured from here.
    pub(crate) fn handed_over(&mut self) {
        self.handed_over = Since::now();
    }

    /// The task's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its class: [`Deferred`](WorkClass::Deferred) or [`Background`](WorkClass::Background).
    pub fn class(&self) -> WorkClass {
        self.class
    }

    /// The request it came from, if it came from one.
    pub fn request(&self) -> Option<&RequestId> {
        self.request.as_ref()
    }

    /// Drops the task without running it to its end, logging it as abandoned with `reason`
    /// (say, "the drain deadline passed").
    pub fn abandon(mut self, reason: &'static str) {
        self.abandon_reason = reason;
        drop(self);
    }

    /// Admits the task to the bound of deferred work: it starts once the admission holds a
    /// slot, and gives both back when it ends.
    pub(crate) fn admit(&mut self, admission: Admission) {
        self.admission = Some(admission);
    }

    /// Ends the task without running its work because a bound refused it: counted as finished
    /// and refused, and logged at INFO (`task_refused`) with the refusal, as the refusals of
    /// the mechanisms inside the work are.
    pub(crate) fn refuse(mut self, refusal: &crate::ResilienceError) {
        if self.work.is_none() {
            return;
        }
        let _entered = self.span.enter();
        if self.started {
            self.counts.sub(|s| &s.running);
        } else {
            self.counts.waiting(-1.0);
        }
        self.work = None;
        self.counts
            .end(&self.name, Outcome::Refused(refusal.clone()));
    }
}

/// Where a task counts itself: the totals of its class, and its pool's counters if it has one.
struct Counts {
    class: WorkClass,
    pool: Option<Arc<TaskStats>>,
}

impl Counts {
    fn add(&self, counter: impl Fn(&TaskStats) -> &AtomicU64) {
        counter(class_totals(self.class)).fetch_add(1, Ordering::Relaxed);
        if let Some(pool) = &self.pool {
            counter(pool).fetch_add(1, Ordering::Relaxed);
        }
    }

    fn sub(&self, counter: impl Fn(&TaskStats) -> &AtomicU64) {
        counter(class_totals(self.class)).fetch_sub(1, Ordering::Relaxed);
        if let Some(pool) = &self.pool {
            counter(pool).fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// A deferred task began (`1`) or ended (`-1`) waiting to start. A background task
    /// waits for its pool's slot, which the pool counts.
    fn waiting(&self, change: f64) {
        if self.class == WorkClass::Deferred {
            TaskMetrics::of(self.class).waiting(change);
        }
    }

    /// Counts and logs how the task `name` ended (its work is already dropped).
    fn end(&self, name: &str, outcome: Outcome) {
        self.add(|s| &s.finished);
        let class = self.class.as_str();
        let metrics = TaskMetrics::of(self.class);
        match outcome {
            Outcome::Succeeded => {
                metrics.ended("finished");
                observe::task_finished(name, class);
            }
            Outcome::Refused(refusal) => {
                self.add(|s| &s.refused);
                metrics.ended("refused");
                observe::task_refused(name, class, &refusal);
            }
            Outcome::Failed(error) => {
                self.add(|s| &s.failed);
                metrics.ended("failed");
                observe::task_failed(name, class, &error);
            }
            Outcome::Panicked(message) => {
                self.add(|s| &s.panicked);
                metrics.ended("panicked");
                observe::task_panicked(name, class, &message);
            }
        }
        // Last: a reader who sees it out of flight sees how it ended.
        self.sub(|s| &s.in_flight);
    }
}

impl Future for Task {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let Some(work) = this.work.as_mut() else {
            return Poll::Ready(());
        };
        if let Some(admission) = &mut this.admission {
            // Waiting for a slot is not running: nothing is counted, nothing is entered.
            ready!(admission.poll_slot(cx));
        }
        let _entered = this.span.enter();
        if !this.started {
            this.started = true;
            this.counts.add(|s| &s.running);
            this.counts.waiting(-1.0);
            if let Some(waited) = this.handed_over.elapsed() {
                TaskMetrics::of(this.class).started_after(waited);
            }
        }
        let outcome = ready!(work.as_mut().poll(cx));
        // Drop the work now, and whatever it holds (a pool's slot), not when the platform
        // gets round to dropping the task.
        this.work = None;
        this.admission = None;
        this.counts.sub(|s| &s.running);
        this.counts.end(&this.name, outcome);
        Poll::Ready(())
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if self.work.is_none() {
            return;
        }
        let _entered = self.span.enter();
        if self.started {
            self.counts.sub(|s| &s.running);
        } else {
            self.counts.waiting(-1.0);
        }
        self.counts.add(|s| &s.abandoned);
        TaskMetrics::of(self.class).ended("abandoned");
        observe::task_abandoned(&self.name, self.class.as_str(), self.abandon_reason);
        // The work itself drops after this, inside the span.
        self.work = None;
        self.counts.sub(|s| &s.in_flight);
    }
}
