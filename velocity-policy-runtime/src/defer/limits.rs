//! How much deferred work the process holds: the bounds on tasks running at once, waiting to
//! run, and queued by one request.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

use crate::error::{RefusalReason, ResilienceError};

/// The bounds on the process's deferred work, chosen once at startup ([`set_limits`]).
///
/// Deferred work is admitted when it is handed to the platform (when its response is
/// finished): at most [`max_concurrent`](Limits::max_concurrent) tasks run at once, at most
/// [`max_queued`](Limits::max_queued) more wait for one of their slots, in order, and past
/// that a task is **refused**: it never runs, it is counted as refused (in the
/// [`DeferredSnapshot`](super::DeferredSnapshot) and in [`totals`](super::totals())) and
/// logged (`task_refused`, with `refused_by = "bulkhead_full"` and the bulkhead `deferred`).
/// Before that, one request's [`AfterResponse`](super::AfterResponse) queue holds at most
/// [`max_per_request`](Limits::max_per_request) tasks; a task deferred past it is refused the
/// same way (the bulkhead `after_response`), so a handler deferring in a loop cannot grow a
/// request without bound.
///
/// The bounds are those of **one process**, like a bulkhead's, and they bound deferred work
/// only: a [background pool](crate::BackgroundPool) bounds its own. The defaults suit a service
/// whose deferred work is a few calls per request:
///
/// | bound | default |
/// |---|---|
/// | `max_concurrent` | [`DEFAULT_MAX_CONCURRENT`] (512) |
/// | `max_queued` | [`DEFAULT_MAX_QUEUED`] (4,096) |
/// | `max_per_request` | [`DEFAULT_MAX_PER_REQUEST`] (128) |
///
/// ```
/// use velocity_policy_runtime::defer::{self, Limits};
///
/// // At startup, before any work is deferred.
/// defer::set_limits(Limits::default().max_concurrent(64).max_queued(256)).unwrap();
/// assert_eq!(defer::limits().max_concurrent, 64);
/// assert_eq!(defer::limits().max_per_request, defer::DEFAULT_MAX_PER_REQUEST);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Deferred tasks that may run at once (at least 1).
    pub max_concurrent: u32,
    /// Deferred tasks that may wait for a slot; past it, a task is refused.
    pub max_queued: u32,
    /// Tasks one request's queue may hold until its response is finished; past it, a task is
    /// refused.
    pub max_per_request: u32,
}

/// Deferred tasks that may run at once, unless [`set_limits`] chose otherwise.
pub const DEFAULT_MAX_CONCURRENT: u32 = 512;
/// Deferred tasks that may wait for a slot, unless [`set_limits`] chose otherwise.
pub const DEFAULT_MAX_QUEUED: u32 = 4_096;
/// Tasks one request may defer, unless [`set_limits`] chose otherwise.
pub const DEFAULT_MAX_PER_REQUEST: u32 = 128;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            max_queued: DEFAULT_MAX_QUEUED,
            max_per_request: DEFAULT_MAX_PER_REQUEST,
        }
    }
}

impl Limits {
    /// Deferred tasks that may run at once (at least 1).
    pub fn max_concurrent(mut self, slots: u32) -> Self {
        self.max_concurrent = slots.max(1);
        self
    }

    /// Deferred tasks that may wait for a slot.
    pub fn max_queued(mut self, places: u32) -> Self {
        self.max_queued = places;
        self
    }

    /// Tasks one request may defer.
    pub fn max_per_request(mut self, tasks: u32) -> Self {
        self.max_per_request = tasks;
        self
    }
}

/// The limits were already chosen, or work was already deferred under the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the limits of deferred work were already chosen: set them once at startup, before any work is deferred"
)]
pub struct LimitsAlreadySet;

/// The process's deferred work as admitted against its [`Limits`].
pub(crate) struct Bound {
    pub(crate) limits: Limits,
    slots: Arc<Semaphore>,
    /// Tasks admitted and not yet ended: running plus waiting for a slot.
    admitted: Arc<AtomicU32>,
}

static BOUND: OnceLock<Bound> = OnceLock::new();

impl Bound {
    fn new(limits: Limits) -> Self {
        let limits = limits.max_concurrent(limits.max_concurrent);
        Self {
            limits,
            slots: Arc::new(Semaphore::new(limits.max_concurrent as usize)),
            admitted: Arc::new(AtomicU32::new(0)),
        }
    }

    /// Takes an admission, or refuses past `max_concurrent + max_queued`.
    pub(crate) fn admit(&self) -> Result<Admission, ResilienceError> {
        let capacity = self.limits.max_concurrent + self.limits.max_queued;
        let mut admitted = self.admitted.load(Ordering::Acquire);
        loop {
            if admitted >= capacity {
                return Err(ResilienceError::new(
                    "deferred",
                    RefusalReason::BulkheadFull {
                        max_concurrent: self.limits.max_concurrent,
                        max_queued: self.limits.max_queued,
                    },
                ));
            }
            match self.admitted.compare_exchange_weak(
                admitted,
                admitted + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => admitted = actual,
            }
        }
        let admitted = Admitted(self.admitted.clone());
        Ok(match self.slots.clone().try_acquire_owned() {
            Ok(slot) => Admission {
                _admitted: admitted,
                slot: Slot::Held { _slot: slot },
            },
            Err(_) => Admission {
                _admitted: admitted,
                slot: Slot::Waiting(Box::pin(self.slots.clone().acquire_owned())),
            },
        })
    }

    /// Tasks admitted and not yet ended.
    pub(crate) fn admitted(&self) -> u32 {
        self.admitted.load(Ordering::Acquire)
    }
}

/// The refusal of a task deferred past its request's `max_per_request`.
pub(crate) fn request_queue_full(max_per_request: u32) -> ResilienceError {
    ResilienceError::new(
        "after_response",
        RefusalReason::RequestQueueFull { max_per_request },
    )
}

/// The bound in force: the one [`set_limits`] chose, or the defaults.
pub(crate) fn bound() -> &'static Bound {
    BOUND.get_or_init(|| Bound::new(Limits::default()))
}

/// Chooses the limits of the process's deferred work. Set them once, at startup, before any
/// work is deferred; without it, the defaults of [`Limits`] apply.
pub fn set_limits(limits: Limits) -> Result<(), LimitsAlreadySet> {
    BOUND.set(Bound::new(limits)).map_err(|_| LimitsAlreadySet)
}

/// The limits in force.
pub fn limits() -> Limits {
    bound().limits
}

/// Gives back an admission when the task ends, however it ends.
struct Admitted(Arc<AtomicU32>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

type Acquiring = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

enum Slot {
    /// Given back when dropped.
    Held {
        _slot: OwnedSemaphorePermit,
    },
    Waiting(Acquiring),
    /// The semaphore closed (it never is): the task runs without a slot rather than never.
    Unbounded,
}

/// A task's place in the bound: its admission, and its slot once it has one. Both are given
/// back when it is dropped.
pub(crate) struct Admission {
    _admitted: Admitted,
    slot: Slot,
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission")
            .field("has_slot", &!matches!(self.slot, Slot::Waiting(_)))
            .finish()
    }
}

impl Admission {
    /// Ready once the task holds a slot; until then the task waits without starting.
    pub(crate) fn poll_slot(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if let Slot::Waiting(acquiring) = &mut self.slot {
            self.slot = match acquiring.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(slot)) => Slot::Held { _slot: slot },
                Poll::Ready(Err(_)) => Slot::Unbounded,
            };
        }
        Poll::Ready(())
    }
}
