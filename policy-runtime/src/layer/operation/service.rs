use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_service::Service;

use super::ResponseFuture;
use crate::Deadline;
use crate::layer::BoxError;

/// The service [`OperationLayer`](super::OperationLayer) makes: the operation's deadline
/// around the rest of the sequence.
#[derive(Debug, Clone)]
pub struct OperationService<S> {
    inner: S,
    name: Arc<str>,
    deadline: Duration,
    min_budget: Duration,
}

impl<S> OperationService<S> {
    pub(super) fn new(inner: S, name: Arc<str>, deadline: Duration, min_budget: Duration) -> Self {
        Self {
            inner,
            name,
            deadline,
            min_budget,
        }
    }
}

impl<S, Request> Service<Request> for OperationService<S>
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
        match Deadline::for_operation(&self.name, self.deadline, self.min_budget) {
            Ok(deadline) => {
                let fut = deadline.sync_scope(|| self.inner.call(request));
                ResponseFuture::running(deadline.scope(deadline.run(fut)))
            }
            Err(refusal) => ResponseFuture::refused(refusal),
        }
    }
}
