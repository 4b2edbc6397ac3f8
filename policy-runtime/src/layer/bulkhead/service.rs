use std::fmt;
use std::task::{Context, Poll, ready};

use tower_service::Service;

use super::ResponseFuture;
use crate::layer::BoxError;
use crate::{Bulkhead, Deadline, OwnedBulkheadPermit};

/// The service [`BulkheadLayer`](super::BulkheadLayer) makes.
pub struct BulkheadService<S> {
    inner: S,
    bulkhead: Bulkhead,
    /// A free slot taken in `poll_ready` once the inner service is ready, for the next `call`.
    reserved: Option<OwnedBulkheadPermit>,
}

impl<S: Clone> Clone for BulkheadService<S> {
    /// A clone of the service, without the slot this one may hold for its next call.
    fn clone(&self) -> Self {
        Self::new(self.inner.clone(), self.bulkhead.clone())
    }
}

impl<S: fmt::Debug> fmt::Debug for BulkheadService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadService")
            .field("inner", &self.inner)
            .field("bulkhead", &self.bulkhead)
            .field("reserved", &self.reserved.is_some())
            .finish()
    }
}

impl<S> BulkheadService<S> {
    /// `inner` inside `bulkhead`.
    pub fn new(inner: S, bulkhead: Bulkhead) -> Self {
        Self {
            inner,
            bulkhead,
            reserved: None,
        }
    }

    /// The bulkhead.
    pub fn bulkhead(&self) -> &Bulkhead {
        &self.bulkhead
    }
}

impl<S, Request> Service<Request> for BulkheadService<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        ready!(self.inner.poll_ready(cx)).map_err(Into::into)?;
        // A free slot now (one compare-and-swap), so `call` hands the request straight on.
        // None free is no wait here: `call` queues or refuses with the request's deadline.
        if self.reserved.is_none() {
            self.reserved = self.bulkhead.take_free_owned();
        }
        Poll::Ready(Ok(()))
    }

    #[inline]
    fn call(&mut self, request: Request) -> Self::Future {
        if let Some(permit) = self.reserved.take() {
            return ResponseFuture::admitted(self.inner.call(request), permit);
        }
        self.call_without_slot(request)
    }
}

impl<S> BulkheadService<S> {
    /// `call` without a slot taken in `poll_ready` (every slot was busy then, or `call` came
    /// without it): one more look, then the queue or a refusal.
    #[cold]
    fn call_without_slot<Request>(&mut self, request: Request) -> ResponseFuture<S::Future>
    where
        S: Service<Request>,
    {
        if let Some(permit) = self.bulkhead.take_free_owned() {
            return ResponseFuture::admitted(self.inner.call(request), permit);
        }
        match Deadline::current() {
            Some(deadline) if self.bulkhead.max_queued() > 0 => {
                let bulkhead = self.bulkhead.clone();
                // Waiting anyway: the queue's state goes on the heap, as the bulkhead's own does.
                let wait = Box::pin(async move { bulkhead.acquire_owned(&deadline).await });
                ResponseFuture::queued(self.inner.call(request), wait)
            }
            _ => match self.bulkhead.try_acquire_owned() {
                // A slot freed since the first look.
                Ok(permit) => ResponseFuture::admitted(self.inner.call(request), permit),
                Err(refusal) => ResponseFuture::refused(refusal),
            },
        }
    }
}
