use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use crate::ResilienceError;
use crate::deadline::{Run, Scope};
use crate::layer::BoxError;

pin_project! {
    /// The response future of [`OperationService`](super::OperationService).
    pub struct ResponseFuture<F> {
        span: tracing::Span,
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Running { #[pin] fut: Scope<Run<F>> },
        Refused { refusal: ResilienceError },
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn running(fut: Scope<Run<F>>) -> Self {
        Self {
            span: tracing::Span::none(),
            state: State::Running { fut },
        }
    }

    pub(super) fn refused(refusal: ResilienceError) -> Self {
        Self {
            span: tracing::Span::none(),
            state: State::Refused { refusal },
        }
    }

    /// Polled inside `span`, the call's.
    pub(super) fn in_span(mut self, span: tracing::Span) -> Self {
        self.span = span;
        self
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("operation::ResponseFuture")
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        match this.state.project() {
            StateProj::Running { fut } => Poll::Ready(match ready!(fut.poll(cx)) {
                Ok(outcome) => outcome.map_err(Into::into),
                Err(expired) => Err(expired.into()),
            }),
            StateProj::Refused { refusal } => Poll::Ready(Err(refusal.clone().into())),
        }
    }
}
