use std::task::{Context, Poll};

use tower_service::Service;

use super::{Config, ResponseFuture};
use crate::Deadline;
use crate::layer::BoxError;

/// The service [`ShedLayer`](super::ShedLayer) makes.
#[derive(Debug, Clone)]
pub struct ShedService<S> {
    inner: S,
    config: Config,
}

impl<S> ShedService<S> {
    pub(super) fn new(inner: S, config: Config) -> Self {
        Self { inner, config }
    }
}

impl<S, Request> Service<Request> for ShedService<S>
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
        let config = &self.config;
        let load = config.load_of.as_ref().map_or(0.0, |b| b.load());
        let remaining = Deadline::current().map_or(Deadline::MAX_BUDGET, |d| d.remaining());
        match config.shedder.admit_with_remaining(
            config.class,
            load,
            remaining,
            config.expected_cost,
        ) {
            Ok(_) => ResponseFuture::called(self.inner.call(request)),
            Err(refusal) => ResponseFuture::shed(refusal),
        }
    }
}
