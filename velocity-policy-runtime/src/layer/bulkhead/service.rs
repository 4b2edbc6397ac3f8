use std::task::{Context, Poll};

use tower_service::Service;

use super::ResponseFuture;
use crate::layer::BoxError;
use crate::{Bulkhead, Deadline};

/// The service [`BulkheadLayer`](super::BulkheadLayer) makes.
#[derive(Debug, Clone)]
pub struct BulkheadService<S> {
    inner: S,
    bulkhead: Bulkhead,
}

impl<S> BulkheadService<S> {
    /// `inner` inside `bulkhead`.
    pub fn new(inner: S, bulkhead: Bulkhead) -> Self {
        Self { inner, bulkhead }
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
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    // Out of line on purpose: the request arrives by pointer and goes on to the layer below
    // (inlined here) as it is. Inlined into the layer above, with the slot's compare-and-swap
    // (whose ordering LLVM takes for a write to all memory) before the hand-over, it was copied
    // on its way (`benches/layers.rs`).
    #[inline(never)]
    fn call(&mut self, request: Request) -> Self::Future {
        // The slot is taken here, not in `poll_ready`: a slot held by a service that was polled
        // ready but then not called (a layer above refused) would be missing from every other
        // user of the same bulkhead by name.
        if let Some(permit) = self.bulkhead.take_free_owned() {
            return ResponseFuture::admitted(self.inner.call(request), permit);
        }
        self.call_without_slot(request)
    }
}

impl<S> BulkheadService<S> {
    /// `call` with every slot busy: the queue or a refusal.
    #[cold]
    fn call_without_slot<Request>(&mut self, request: Request) -> ResponseFuture<S::Future>
    where
        S: Service<Request>,
    {
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
