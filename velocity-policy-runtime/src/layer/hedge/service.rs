use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_service::Service;

use crate::hedge::{Hedge, hedge_within, hedge_within_retry};
use crate::layer::{BoxError, is_refusal};
use crate::retry::Attempt;
use crate::{CallError, Deadline, DeadlineExceeded, Idempotent, ResilienceError, RetryPolicy};

/// The response future of [`HedgeService`]: the hedging loop, boxed.
pub type ResponseFuture<R> = Pin<Box<dyn Future<Output = Result<R, BoxError>> + Send>>;

/// The service [`HedgeLayer`](super::HedgeLayer) makes.
#[derive(Clone)]
pub struct HedgeService<S> {
    inner: S,
    hedge: Arc<Hedge>,
    retry: Option<Arc<RetryPolicy>>,
    budget: Duration,
}

impl<S: fmt::Debug> fmt::Debug for HedgeService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeService")
            .field("inner", &self.inner)
            .field("hedge", &self.hedge.name())
            .finish_non_exhaustive()
    }
}

impl<S> HedgeService<S> {
    pub(super) fn new(
        inner: S,
        hedge: Arc<Hedge>,
        retry: Option<Arc<RetryPolicy>>,
        budget: Duration,
    ) -> Self {
        Self {
            inner,
            hedge,
            retry,
            budget,
        }
    }
}

/// A boxed error back as the three outcomes: a refusal (the work never ran), an expiry, or the
/// service's own error.
fn outcome(error: BoxError) -> CallError<BoxError> {
    if is_refusal(&error) {
        return match error.downcast::<ResilienceError>() {
            Ok(refusal) => CallError::Refused(*refusal),
            Err(error) => CallError::Failed(error),
        };
    }
    match error.downcast::<DeadlineExceeded>() {
        Ok(expired) => CallError::DeadlineExceeded(*expired),
        Err(error) => CallError::Failed(error),
    }
}

fn boxed(error: CallError<BoxError>) -> BoxError {
    match error {
        CallError::Refused(refusal) => Box::new(refusal),
        CallError::DeadlineExceeded(expired) => Box::new(expired),
        CallError::Failed(error) => error,
    }
}

impl<S, Request> Service<Request> for HedgeService<S>
where
    S: Service<Request> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    S::Response: Send,
    Request: Clone + Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Response>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let deadline = Deadline::current().unwrap_or_else(|| Deadline::after(self.budget));
        // The service polled ready answers the first attempt; each hedge calls a clone, polled
        // ready first (tower's advice for a service called from its future).
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let (hedge, retry) = (self.hedge.clone(), self.retry.clone());
        Box::pin(async move {
            let template = ready.clone();
            let mut first = Some(ready);
            let attempt = move |attempt: Attempt| {
                let mut service = first.take().unwrap_or_else(|| template.clone());
                let request = request.clone();
                let deadline = attempt.deadline;
                async move {
                    let call = async move {
                        poll_fn(|cx| service.poll_ready(cx))
                            .await
                            .map_err(|e| outcome(e.into()))?;
                        service.call(request).await.map_err(|e| outcome(e.into()))
                    };
                    match deadline.scope(deadline.run(call)).await {
                        Ok(answer) => answer,
                        Err(expired) => Err(CallError::DeadlineExceeded(expired)),
                    }
                }
            };
            let op = Idempotent::claim(attempt);
            match &retry {
                Some(retry) => hedge_within_retry(&deadline, &hedge, retry, op).await,
                None => hedge_within(&deadline, &hedge, op).await,
            }
            .map_err(boxed)
        })
    }
}
