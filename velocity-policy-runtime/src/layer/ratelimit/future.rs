use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use crate::ResilienceError;
use crate::layer::BoxError;

pub(super) type Ask = Pin<Box<dyn Future<Output = Result<(), ResilienceError>> + Send>>;

pin_project! {
    /// The response future of [`RateLimitService`](super::RateLimitService).
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // Admitted, or waiting for the fleet's decision (`ask`; the inner future is not polled
        // until it admits).
        Running { #[pin] fut: F, ask: Option<Ask> },
        Refused { refusal: ResilienceError },
    }
}

impl<F> ResponseFuture<F> {
    #[inline]
    pub(super) fn admitted(fut: F) -> Self {
        Self {
            state: State::Running { fut, ask: None },
        }
    }

    pub(super) fn asking(fut: F, ask: Ask) -> Self {
        Self {
            state: State::Running {
                fut,
                ask: Some(ask),
            },
        }
    }

    pub(super) fn refused(refusal: ResilienceError) -> Self {
        Self {
            state: State::Refused { refusal },
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (refused, asking) = match &self.state {
            State::Running { ask, .. } => (false, ask.is_some()),
            State::Refused { .. } => (true, false),
        };
        f.debug_struct("ratelimit::ResponseFuture")
            .field("refused", &refused)
            .field("asking", &asking)
            .finish_non_exhaustive()
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        let refusal = match state.as_mut().project() {
            StateProj::Running { fut, ask } => {
                if let Some(asking) = ask.as_mut() {
                    if let Err(refusal) = ready!(asking.as_mut().poll(cx)) {
                        state.set(State::Refused {
                            refusal: refusal.clone(),
                        });
                        return Poll::Ready(Err(refusal.into()));
                    }
                    *ask = None;
                }
                return fut.poll(cx).map_err(Into::into);
            }
            // A clone (reference counts only): a future polled again answers the same.
            StateProj::Refused { refusal } => refusal.clone(),
        };
        Poll::Ready(Err(refusal.into()))
    }
}
