use std::fmt;
use std::task::{Context, Poll};

use tower_service::Service;

use super::{Classify, ResponseFuture};
use crate::Breaker;
use crate::layer::BoxError;

/// The service [`BreakerLayer`](super::BreakerLayer) makes.
#[derive(Clone)]
pub struct BreakerService<S, C> {
    inner: S,
    breaker: Breaker,
    classify: C,
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
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, request: Request) -> Self::Future {
        match self.breaker.check() {
            Ok(()) => ResponseFuture::admitted(
                self.inner.call(request),
                self.breaker.clone(),
                self.classify.clone(),
            ),
            Err(refusal) => ResponseFuture::refused(refusal),
        }
    }
}
