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

    #[inline]
    fn call(&mut self, request: Request) -> Self::Future {
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
