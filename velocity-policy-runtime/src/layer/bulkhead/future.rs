use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use crate::layer::BoxError;
use crate::{OwnedBulkheadPermit, ResilienceError};

pub(super) type QueueWait =
    Pin<Box<dyn Future<Output = Result<OwnedBulkheadPermit, ResilienceError>> + Send>>;

pin_project! {
    /// The response future of [`BulkheadService`](super::BulkheadService).
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // Admitted (`permit`) or waiting for a slot (`wait`, at most until the current
        // deadline; the inner future is not polled until it has one). The slot is freed when
        // the work ends (then neither is left: the work is done, its future is dropped with
        // this one), or when the future is dropped.
        Running {
            #[pin]
            fut: F,
            permit: Option<OwnedBulkheadPermit>,
            wait: Option<QueueWait>,
        },
        Refused { refusal: ResilienceError },
    }
}

impl<F> ResponseFuture<F> {
    #[inline]
    pub(super) fn admitted(fut: F, permit: OwnedBulkheadPermit) -> Self {
        Self {
            state: State::Running {
                fut,
                permit: Some(permit),
                wait: None,
            },
        }
    }

    pub(super) fn queued(fut: F, wait: QueueWait) -> Self {
        Self {
            state: State::Running {
                fut,
                permit: None,
                wait: Some(wait),
            },
        }
    }

    pub(super) fn refused(refusal: ResilienceError) -> Self {
        Self {
            state: State::Refused { refusal },
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (holds_slot, queued) = match &self.state {
            State::Running { permit, wait, .. } => (permit.is_some(), wait.is_some()),
            State::Refused { .. } => (false, false),
        };
        f.debug_struct("bulkhead::ResponseFuture")
            .field("holds_slot", &holds_slot)
            .field("queued", &queued)
            .finish_non_exhaustive()
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        let refusal = match state.as_mut().project() {
            StateProj::Running { fut, permit, wait } => {
                // Holding a slot (the admitted path): one look. Otherwise queued, or done.
                if permit.is_none() {
                    let Some(waiting) = wait.as_mut() else {
                        return Poll::Ready(Err(crate::layer::polled_after_completion()));
                    };
                    match ready!(waiting.as_mut().poll(cx)) {
                        Ok(slot) => {
                            *permit = Some(slot);
                            *wait = None;
                        }
                        Err(refusal) => {
                            state.set(State::Refused {
                                refusal: refusal.clone(),
                            });
                            return Poll::Ready(Err(refusal.into()));
                        }
                    }
                }
                let poll = fut.poll(cx);
                if poll.is_ready() {
                    // The slot ends now, not when the future is dropped.
                    *permit = None;
                }
                return poll.map_err(Into::into);
            }
            // A clone (reference counts only): a future polled again answers the same.
            StateProj::Refused { refusal } => refusal.clone(),
        };
        Poll::Ready(Err(refusal.into()))
    }
}
