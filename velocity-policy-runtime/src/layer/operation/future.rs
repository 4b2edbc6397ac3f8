use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use crate::calls::Calls;
use crate::deadline::{Run, Scope};
use crate::layer::BoxError;
use crate::observe;
use crate::traced::Traced;
use crate::{DeadlineExceeded, ResilienceError};

pin_project! {
    /// The response future of [`OperationService`](super::OperationService): polled inside the
    /// call's span and, given [`OperationLayer::calls`](super::OperationLayer::calls), measured
    /// for the operation's metrics as an attribute's call is.
    pub struct ResponseFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Measured { #[pin] fut: Traced<Outcome<F>> },
        Spanned { span: tracing::Span, #[pin] fut: Outcome<F> },
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn measured(calls: &'static Calls, span: tracing::Span, fut: Outcome<F>) -> Self {
        Self {
            kind: Kind::Measured {
                fut: Traced::new(calls, span, fut),
            },
        }
    }

    pub(super) fn spanned(span: tracing::Span, fut: Outcome<F>) -> Self {
        Self {
            kind: Kind::Spanned { span, fut },
        }
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

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Measured { fut } => fut.poll(cx),
            KindProj::Spanned { span, fut } => {
                let _entered = span.enter();
                fut.poll(cx)
            }
        }
    }
}

pin_project! {
    /// The operation's sequence, its error told apart for the call's metrics: a refusal
    /// (`refused`, by kind) or an expiry (`expired`), whichever layer inside made it.
    pub(super) struct Outcome<F> {
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

impl<F> Outcome<F> {
    pub(super) fn running(fut: Scope<Run<F>>) -> Self {
        Self {
            state: State::Running { fut },
        }
    }

    pub(super) fn refused(refusal: ResilienceError) -> Self {
        Self {
            state: State::Refused { refusal },
        }
    }
}

/// Notes what `error` is for the call being measured (nothing without a measure).
fn note(error: &BoxError) {
    if let Some(refusal) = error.downcast_ref::<ResilienceError>() {
        observe::call_refused(refusal.kind());
    } else if error.is::<DeadlineExceeded>() {
        observe::call_expired();
    }
}

impl<F, T, E> Future for Outcome<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let result = match self.project().state.project() {
            StateProj::Running { fut } => match ready!(fut.poll(cx)) {
                Ok(outcome) => outcome.map_err(Into::into),
                Err(expired) => Err(expired.into()),
            },
            StateProj::Refused { refusal } => Err(refusal.clone().into()),
        };
        if let Err(error) = &result {
            note(error);
        }
        Poll::Ready(result)
    }
}
