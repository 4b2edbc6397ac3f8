use std::task::{Context, Poll};

use tower_service::Service;

use super::ResponseFuture;
use crate::layer::BoxError;
use crate::limiter::RateLimiter;

/// The service [`RateLimitLayer`](super::RateLimitLayer) makes.
#[derive(Debug, Clone)]
pub struct RateLimitService<S> {
    inner: S,
    limiter: RateLimiter,
}

impl<S> RateLimitService<S> {
    /// `inner` behind `limiter`.
    pub fn new(inner: S, limiter: RateLimiter) -> Self {
        Self { inner, limiter }
    }

    /// The rate limiter.
    pub fn limiter(&self) -> &RateLimiter {
        &self.limiter
    }
}

impl<S, Request> Service<Request> for RateLimitService<S>
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
        match self.limiter.decide_now() {
            Some(Ok(())) => ResponseFuture::admitted(self.inner.call(request)),
            Some(Err(refusal)) => ResponseFuture::refused(refusal),
            // The fleet's store decides: asked before the inner future is first polled (a
            // round trip, so its state goes on the heap).
            None => {
                let limiter = self.limiter.clone();
                let ask = Box::pin(async move { limiter.acquire().await });
                ResponseFuture::asking(self.inner.call(request), ask)
            }
        }
    }
}
