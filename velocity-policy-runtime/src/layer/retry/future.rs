use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower_service::Service;

use super::{OutcomeText, RetryClassify};
use crate::deadline::{Run, Scope};
use crate::error::RefusalReason;
use crate::layer::{BoxError, is_refusal};
use crate::retry::TIMER_TICK;
use crate::{Deadline, DeadlineExceeded, ResilienceError, RetryPolicy};

type Attempt<F> = Scope<Run<F>>;

pin_project! {
    /// The response future of [`RetryService`](super::RetryService): one attempt at a time,
    /// each under its own child of the call's deadline, with full-jitter pauses between them.
    pub struct ResponseFuture<S, Request, C>
    where
        S: Service<Request>,
    {
        #[pin]
        state: State<S::Future>,
        service: Option<S>,
        request: Option<Request>,
        policy: Arc<RetryPolicy>,
        classify: Option<C>,
        deadline: Deadline,
        number: u32,
        last: Option<Result<S::Response, BoxError>>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Attempt { #[pin] fut: Attempt<F> },
        Pause { #[pin] sleep: Sleep },
        // Ready for the next attempt once the service is.
        Next,
        Refused { refusal: ResilienceError },
        Done,
    }
}

impl<S, Request, C> fmt::Debug for ResponseFuture<S, Request, C>
where
    S: Service<Request>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("retry::ResponseFuture")
            .field("policy", &self.policy.name())
            .field("attempt", &self.number)
            .finish_non_exhaustive()
    }
}

impl<S, Request, C> ResponseFuture<S, Request, C>
where
    S: Service<Request>,
{
    pub(super) fn first_attempt(
        fut: Attempt<S::Future>,
        service: S,
        request: Request,
        policy: Arc<RetryPolicy>,
        classify: C,
        deadline: Deadline,
    ) -> Self {
        Self {
            state: State::Attempt { fut },
            service: Some(service),
            request: Some(request),
            policy,
            classify: Some(classify),
            deadline,
            number: 1,
            last: None,
        }
    }

    pub(super) fn refused(policy: &Arc<RetryPolicy>) -> Self {
        let refusal = ResilienceError::new(
            policy.name(),
            RefusalReason::InsufficientBudget {
                remaining: Duration::ZERO,
                min_budget: Duration::ZERO,
            },
        );
        crate::observe::refused(&refusal);
        Self {
            state: State::Refused { refusal },
            service: None,
            request: None,
            policy: policy.clone(),
            classify: None,
            deadline: Deadline::after(Duration::ZERO),
            number: 0,
            last: None,
        }
    }
}

impl<S, Request, C> Future for ResponseFuture<S, Request, C>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
    Request: Clone,
    C: RetryClassify<S::Response>,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Attempt { fut } => {
                    let outcome: Result<S::Response, BoxError> = match ready!(fut.poll(cx)) {
                        Ok(Ok(response)) => Ok(response),
                        Ok(Err(error)) => Err(error.into()),
                        Err(expired) => Err(expired.into()),
                    };
                    let number = *this.number;
                    let policy = &**this.policy;
                    let worth_it = match (&outcome, this.classify.as_ref()) {
                        // The system already decided not to try: asking again spends budget
                        // to receive the same answer.
                        (Err(error), _) if is_refusal(error) => false,
                        (outcome, Some(classify)) => classify.is_transient(outcome.as_ref()),
                        (_, None) => false,
                    };
                    if !worth_it {
                        this.state.set(State::Done);
                        return Poll::Ready(outcome);
                    }
                    let expired = matches!(&outcome, Err(e) if e.is::<DeadlineExceeded>());
                    let stop = if expired && this.deadline.is_expired() {
                        // The call's own deadline passed, not just the attempt's.
                        policy.stopped_by_deadline("the deadline passed", number);
                        Some(Err(this.deadline.exceeded().into()))
                    } else if let Err(error) = &outcome
                        && crate::layer::callers_expiry(error).is_some()
                    {
                        // The attempt had only what the caller left it: a retry would not
                        // lengthen that, and the caller's expiry is never a reason to repeat.
                        policy.stopped_by_deadline("the caller's budget ran out", number);
                        Some(outcome)
                    } else if number >= policy.attempts() {
                        policy.exhausted(number);
                        Some(outcome)
                    } else {
                        let delay = policy.backoff(number - 1);
                        if delay + TIMER_TICK >= this.deadline.remaining() {
                            policy.stopped_by_deadline(
                                "the next pause would end past the deadline",
                                number,
                            );
                            Some(outcome)
                        } else if !policy.allowance().try_withdraw() {
                            policy.stopped_by_allowance(number);
                            Some(outcome)
                        } else {
                            let code = match &outcome {
                                Ok(_) => "transient_response",
                                Err(e) if e.is::<DeadlineExceeded>() => "expired",
                                Err(_) => "failed",
                            };
                            policy.retrying(number, delay, code, &OutcomeText(&outcome));
                            *this.last = Some(outcome);
                            this.state.set(State::Pause {
                                sleep: tokio::time::sleep(delay),
                            });
                            None
                        }
                    };
                    if let Some(outcome) = stop {
                        this.state.set(State::Done);
                        return Poll::Ready(outcome);
                    }
                }
                StateProj::Pause { sleep } => {
                    ready!(sleep.poll(cx));
                    this.state.set(State::Next);
                }
                StateProj::Next => {
                    let attempt_max = this
                        .policy
                        .attempt_timeout()
                        .unwrap_or(Deadline::MAX_BUDGET);
                    let child = this.deadline.child(attempt_max);
                    let (Some(service), Some(request)) =
                        (this.service.as_mut(), this.request.as_ref())
                    else {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(crate::layer::polled_after_completion()));
                    };
                    if child.budget().is_zero() {
                        // The budget ran out between attempts: the last attempt's outcome stands.
                        this.policy
                            .stopped_by_deadline("the deadline passed", *this.number);
                        this.state.set(State::Done);
                        return Poll::Ready(
                            this.last
                                .take()
                                .unwrap_or_else(|| Err(crate::layer::polled_after_completion())),
                        );
                    }
                    if let Err(error) = ready!(service.poll_ready(cx)) {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(error.into()));
                    }
                    *this.number += 1;
                    this.last.take();
                    let request = request.clone();
                    let fut = child.sync_scope(|| service.call(request));
                    this.state.set(State::Attempt {
                        fut: child.scope(child.run(fut)),
                    });
                }
                StateProj::Refused { refusal } => {
                    return Poll::Ready(Err(refusal.clone().into()));
                }
                StateProj::Done => {
                    return Poll::Ready(Err(crate::layer::polled_after_completion()));
                }
            }
        }
    }
}
