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
        // The inner future; polled only while a slot is held. `None` once refused.
        #[pin]
        fut: Option<F>,
        permit: Option<OwnedBulkheadPermit>,
        wait: Option<QueueWait>,
        refusal: Option<ResilienceError>,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn admitted(fut: F, permit: OwnedBulkheadPermit) -> Self {
        Self {
            fut: Some(fut),
            permit: Some(permit),
            wait: None,
            refusal: None,
        }
    }

    pub(super) fn queued(fut: F, wait: QueueWait) -> Self {
        Self {
            fut: Some(fut),
            permit: None,
            wait: Some(wait),
            refusal: None,
        }
    }

    pub(super) fn refused(refusal: ResilienceError) -> Self {
        Self {
            fut: None,
            permit: None,
            wait: None,
            refusal: Some(refusal),
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("bulkhead::ResponseFuture")
            .field("holds_slot", &self.permit.is_some())
            .field("queued", &self.wait.is_some())
            .finish_non_exhaustive()
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some(wait) = this.wait.as_mut() {
            match ready!(wait.as_mut().poll(cx)) {
                Ok(permit) => *this.permit = Some(permit),
                Err(refusal) => {
                    // Never polled: the work did not start.
                    this.fut.set(None);
                    *this.refusal = Some(refusal);
                }
            }
            *this.wait = None;
        }
        match this.fut.as_mut().as_pin_mut() {
            Some(fut) => {
                let outcome = ready!(fut.poll(cx));
                this.fut.set(None);
                // The slot goes back as soon as the work is done, not when the future is dropped.
                this.permit.take();
                Poll::Ready(outcome.map_err(Into::into))
            }
            None => Poll::Ready(Err(match this.refusal.as_ref() {
                Some(refusal) => refusal.clone().into(),
                None => crate::layer::polled_after_completion(),
            })),
        }
    }
}
