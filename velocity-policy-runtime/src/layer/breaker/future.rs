use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::Classify;
use crate::error::InjectedError;
use crate::layer::{BoxError, callers_expiry, is_refusal};
use crate::{Breaker, Deadline, ResilienceError};

pin_project! {
    /// The response future of [`BreakerService`](super::BreakerService).
    ///
    /// Dropped unfinished once the deadline that was in scope at `call` has passed (the
    /// request's `DeadlineLayer`, a [`RetryLayer`](crate::layer::RetryLayer)'s
    /// attempt timeout or an `OperationLayer` above stopped waiting), it records that expiry
    /// as the attribute records an attempt that ran out of time: a failure, or a caller's
    /// expiry when the caller's budget decided the deadline. Dropped for any other reason (a
    /// hedge's slower attempt, a caller gone), it records nothing.
    pub struct ResponseFuture<F, C> {
        #[pin]
        state: State<F, C>,
    }

    impl<F, C> PinnedDrop for ResponseFuture<F, C> {
        fn drop(this: Pin<&mut Self>) {
            if let StateProj::Admitted { breaker, deadline: Some(deadline), .. } =
                this.project().state.project()
            {
                dropped_unfinished(breaker, *deadline);
            }
        }
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, C> {
        // `deadline`: the one in scope at `call`, until the inner future finishes (then
        // `None`: an outcome was recorded, and a drop has nothing to add). Kept whole: a
        // two-word form cost less for a call answered at once but more for one that waits,
        // as a call through a breaker usually does (BENCHMARKS.md, "The mechanisms as tower
        // layers").
        Admitted { #[pin] fut: F, breaker: Breaker, classify: C, deadline: Option<Deadline> },
        Refused { refusal: ResilienceError },
    }
}

/// An admitted call dropped before its outcome: an expiry if its deadline has passed.
#[cold]
fn dropped_unfinished(breaker: &Breaker, deadline: Deadline) {
    if deadline.is_expired() {
        breaker.record_expiry(deadline.exceeded());
    }
}

impl<F, C> ResponseFuture<F, C> {
    pub(super) fn admitted(fut: F, breaker: Breaker, classify: C) -> Self {
        Self {
            state: State::Admitted {
                fut,
                breaker,
                classify,
                deadline: Deadline::current(),
            },
        }
    }

    pub(super) fn refused(refusal: ResilienceError) -> Self {
        Self {
            state: State::Refused { refusal },
        }
    }
}

impl<F, C> fmt::Debug for ResponseFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("breaker::ResponseFuture")
    }
}

impl<F, C, T, E> Future for ResponseFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    C: Classify<T>,
{
    type Output = Result<T, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Admitted {
                fut,
                breaker,
                classify,
                deadline,
            } => {
                let poll = fut.poll(cx);
                if poll.is_ready() {
                    *deadline = None;
                }
                // A response is counted where it lies and handed on with one move.
                if let Poll::Ready(Ok(response)) = &poll {
                    breaker.record(!classify.is_failure(Ok(response)));
                }
                poll.map_err(|error| {
                    let error = error.into();
                    record_error(breaker, classify, &error);
                    error
                })
            }
            // A clone (reference counts only): a future polled again answers the same.
            StateProj::Refused { refusal } => Poll::Ready(Err(refusal.clone().into())),
        }
    }
}

/// What an error tells `breaker`, as `classify` sees it.
#[inline]
fn record_error<T, C: Classify<T>>(breaker: &Breaker, classify: &C, error: &BoxError) {
    // The work never ran below us: nothing to learn about the dependency.
    if is_refusal(error) {
        return;
    }
    // It expired under a budget the caller shortened: the caller's, not the dependency's.
    if let Some(expired) = callers_expiry(error) {
        breaker.record_callers_expiry(expired);
        return;
    }
    let failed = classify.is_failure(Err(error));
    // A drill's error (a fault injector below, such as the chaos layer): the failure carries
    // its drill's name, and an opening it decides says so.
    if failed && let Some(injected) = error.downcast_ref::<InjectedError>() {
        breaker.record_injected_failure(injected.name_arc());
    } else {
        breaker.record(!failed);
    }
}
