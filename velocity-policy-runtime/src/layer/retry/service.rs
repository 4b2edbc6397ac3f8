use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_service::Service;

use super::{ResponseFuture, RetryClassify};
use crate::layer::BoxError;
use crate::{Deadline, RetryPolicy};

/// The service [`RetryLayer`](super::RetryLayer) makes.
#[derive(Clone)]
pub struct RetryService<S, C> {
    inner: S,
    policy: Arc<RetryPolicy>,
    classify: C,
    budget: Duration,
}

impl<S: fmt::Debug, C> fmt::Debug for RetryService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryService")
            .field("inner", &self.inner)
            .field("policy", &self.policy.name())
            .finish_non_exhaustive()
    }
}

impl<S, C> RetryService<S, C> {
    pub(super) fn new(inner: S, policy: Arc<RetryPolicy>, classify: C, budget: Duration) -> Self {
        Self {
            inner,
            policy,
            classify,
            budget,
        }
    }
}

impl<S, C, Request> Service<Request> for RetryService<S, C>
where
    S: Service<Request> + Clone,
    S::Error: Into<BoxError>,
    Request: Clone,
    C: RetryClassify<S::Response> + Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S, Request, C>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let deadline = match Deadline::current() {
            Some(current) => current,
            None => Deadline::after(self.budget),
        };
        let attempt_max = self
            .policy
            .attempt_timeout()
            .unwrap_or(Deadline::MAX_BUDGET);
        let child = deadline.child(attempt_max);
        if child.budget().is_zero() {
            // Nothing left to start the first attempt with: the work never runs.
            return ResponseFuture::refused(&self.policy);
        }
        self.policy.allowance().deposit();
        // The first attempt goes to the service that was polled ready; later ones to a clone,
        // polled ready before each (as tower's `Retry` does).
        let first = child.sync_scope(|| self.inner.call(request.clone()));
        ResponseFuture::first_attempt(
            child.scope(child.run(first)),
            self.inner.clone(),
            request,
            self.policy.clone(),
            self.classify.clone(),
            deadline,
        )
    }
}
