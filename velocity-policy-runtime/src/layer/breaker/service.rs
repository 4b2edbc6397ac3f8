use std::fmt;
use std::task::{Context, Poll, ready};

use tower_service::Service;

use super::{Classify, ResponseFuture};
use crate::Breaker;
use crate::layer::BoxError;

/// The service [`BreakerLayer`](super::BreakerLayer) makes.
pub struct BreakerService<S, C> {
    inner: S,
    breaker: Breaker,
    classify: C,
    /// The breaker was closed when `poll_ready` last answered ready: the next `call` is
    /// admitted without another look.
    closed: bool,
}

impl<S: Clone, C: Clone> Clone for BreakerService<S, C> {
    /// A clone of the service, which looks at the breaker again before its first call.
    fn clone(&self) -> Self {
        Self::new(
            self.inner.clone(),
            self.breaker.clone(),
            self.classify.clone(),
        )
    }
}

impl<S: fmt::Debug, C> fmt::Debug for BreakerService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerService")
            .field("inner", &self.inner)
            .field("breaker", &self.breaker.name())
            .finish_non_exhaustive()
    }
}

impl<S, C> BreakerService<S, C> {
    /// `inner` behind `breaker`, with `classify` deciding what a failure is.
    pub fn new(inner: S, breaker: Breaker, classify: C) -> Self {
        Self {
            inner,
            breaker,
            classify,
            closed: false,
        }
    }

    /// The breaker.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }
}

impl<S, C, Request> Service<Request> for BreakerService<S, C>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
    C: Classify<S::Response> + Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, C>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        ready!(self.inner.poll_ready(cx)).map_err(Into::into)?;
        // Closed: one atomic load, so `call` hands the request straight on. Open, `call`
        // checks it again (the refusal, its count and a closing after the cooldown are its).
        self.closed = self.breaker.closed_at_once();
        Poll::Ready(Ok(()))
    }

    // Inlined into the layer above (a bulkhead's `call` is out of line): the request is
    // handed on without a copy of its own.
    #[inline]
    fn call(&mut self, request: Request) -> Self::Future {
        // One place hands the request on (closed at `poll_ready`, or admitted by `check`).
        if !std::mem::take(&mut self.closed)
            && let Err(refusal) = self.breaker.check()
        {
            return ResponseFuture::refused(refusal);
        }
        ResponseFuture::admitted(
            self.inner.call(request),
            self.breaker.clone(),
            self.classify.clone(),
        )
    }
}
