use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_service::Service;

use super::ResponseFuture;
use super::future::Outcome;
use crate::Deadline;
use crate::calls::Calls;
use crate::deadline::OperationDeadline;
use crate::layer::BoxError;

/// Makes the span one call of an operation runs in, given the operation's name.
pub type CallSpan = fn(&str) -> tracing::Span;

/// The service [`OperationLayer`](super::OperationLayer) makes: the operation's deadline
/// around the rest of the sequence.
#[derive(Debug, Clone)]
pub struct OperationService<S> {
    inner: S,
    name: Arc<str>,
    span: CallSpan,
    calls: Option<&'static Calls>,
    deadline: Duration,
    min_budget: Duration,
    named: Option<Arc<OperationDeadline>>,
}

impl<S> OperationService<S> {
    pub(super) fn new(
        inner: S,
        name: Arc<str>,
        span: CallSpan,
        calls: Option<&'static Calls>,
        deadline: Duration,
        min_budget: Duration,
        named: Option<Arc<OperationDeadline>>,
    ) -> Self {
        Self {
            inner,
            name,
            span,
            calls,
            deadline,
            min_budget,
            named,
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
        // One span per call, entered here and at each poll: the mechanisms' events are inside.
        let span = (self.span)(&self.name);
        let entered = span.enter();
        let admitted = match &self.named {
            Some(named) => Deadline::for_named(named),
            None => Deadline::for_operation(&self.name, self.deadline, self.min_budget),
        };
        let outcome = match admitted {
            Ok(deadline) => {
                let fut = deadline.sync_scope(|| self.inner.call(request));
                Outcome::running(deadline.scope(deadline.run(fut)))
            }
            Err(refusal) => Outcome::refused(refusal),
        };
        drop(entered);
        match self.calls {
            Some(calls) => ResponseFuture::measured(calls, span, outcome),
            None => ResponseFuture::spanned(span, outcome),
        }
    }
}
