use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use crate::ResilienceError;
use crate::layer::BoxError;

pin_project! {
    /// The response future of [`ShedService`](super::ShedService).
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Called { #[pin] fut: F },
        Shed { refusal: ResilienceError },
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn called(fut: F) -> Self {
        Self {
            state: State::Called { fut },
        }
    }

    pub(super) fn shed(refusal: ResilienceError) -> Self {
        Self {
            state: State::Shed { refusal },
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("shedding::ResponseFuture")
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Called { fut } => fut.poll(cx).map_err(Into::into),
            StateProj::Shed { refusal } => Poll::Ready(Err(refusal.clone().into())),
        }
    }
}
