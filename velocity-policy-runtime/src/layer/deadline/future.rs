use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{HeaderValue, Response, StatusCode};
use pin_project_lite::pin_project;
use tokio::time::Sleep;

use super::body::DeadlineBody;
use crate::Deadline;

pin_project! {
    /// The response future of [`DeadlineService`](super::DeadlineService): the handler's,
    /// polled with the request's deadline in scope and at most until it passes.
    ///
    /// One flat future (what `deadline.scope(deadline.run(fut))` does, without its second
    /// and third copy of the deadline): the handler is polled first, in scope; a timer is
    /// armed only at its first `Pending`.
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
        #[pin]
        sleep: Option<Sleep>,
        grpc: bool,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Running {
            #[pin]
            fut: F,
            deadline: Deadline,
        },
        // Refused in `call`: the handler never runs.
        Refused,
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let deadline = match &self.state {
            State::Running { deadline, .. } => Some(deadline),
            State::Refused => None,
        };
        f.debug_struct("deadline::ResponseFuture")
            .field("deadline", &deadline)
            .finish_non_exhaustive()
    }
}

impl<F> ResponseFuture<F> {
    #[inline]
    pub(super) fn running(fut: F, deadline: Deadline, grpc: bool) -> Self {
        Self {
            state: State::Running { fut, deadline },
            sleep: None,
            grpc,
        }
    }

    pub(super) fn refused(grpc: bool) -> Self {
        Self {
            state: State::Refused,
            sleep: None,
            grpc,
        }
    }
}

/// The answer when the handler did not run or did not finish in time: `504`, or gRPC's
/// `DEADLINE_EXCEEDED` (trailers-only); the reason in a header either way (for gRPC, metadata
/// the client's status carries, as a refusal's `x-refusal` is with the `tonic` feature).
fn answer<B>(grpc: bool, header: &'static str, reason: &'static str) -> Response<DeadlineBody<B>> {
    let mut response = Response::new(DeadlineBody::empty());
    let headers = response.headers_mut();
    if grpc {
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert("grpc-status", HeaderValue::from_static("4"));
        headers.insert("grpc-message", HeaderValue::from_static(reason));
    } else {
        *response.status_mut() = StatusCode::GATEWAY_TIMEOUT;
    }
    response
        .headers_mut()
        .insert(header, HeaderValue::from_static(reason));
    response
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<DeadlineBody<B>>, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let StateProj::Running { fut, deadline } = this.state.project() else {
            return Poll::Ready(Ok(answer(*this.grpc, "x-refusal", "insufficient_budget")));
        };
        let deadline = *deadline;
        // The handler's response taken apart and put together around its body in one match
        // arm: moved fewer times than through `Result::map` and then `Response::map`.
        match deadline.sync_scope(|| fut.poll(cx)) {
            Poll::Ready(Ok(response)) => {
                let (head, body) = response.into_parts();
                return Poll::Ready(Ok(Response::from_parts(
                    head,
                    DeadlineBody::new(body, deadline),
                )));
            }
            Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
            Poll::Pending => {}
        }
        if this.sleep.is_none() {
            // First Pending: only now is a timer worth arming. A deadline already past fires on
            // the timer's first poll.
            this.sleep
                .set(Some(tokio::time::sleep_until(deadline.instant())));
        }
        match this.sleep.as_pin_mut().map(|sleep| sleep.poll(cx)) {
            Some(Poll::Ready(())) => {
                tracing::debug!(
                    target: "policy",
                    mechanism = "deadline",
                    name = "request",
                    kind = "deadline_exceeded",
                    reason = "expired",
                    budget_ms = deadline.budget().as_millis() as u64,
                    "stopped waiting for the handler at the request's deadline"
                );
                Poll::Ready(Ok(answer(
                    *this.grpc,
                    "x-deadline-exceeded",
                    "deadline_exceeded",
                )))
            }
            _ => Poll::Pending,
        }
    }
}
