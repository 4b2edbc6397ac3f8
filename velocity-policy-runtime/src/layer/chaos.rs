//! [`ChaosLayer`] (features `tower` and `chaos`): a [`Chaos`] drill as a tower layer, the
//! mechanism itself (the registry's entry for its name), not a copy.
//!
//! Put it innermost, below the breaker and the bulkhead, as
//! [`OperationLayer`](super::OperationLayer) does for an operation that names a drill: each call
//! then draws after the breaker's check and the bulkhead's admission. An injected refusal or 429
//! is an immediate [`ResilienceError`](crate::ResilienceError) (the work never ran; a 429 trips
//! the breaker given to [`ChaosLayer::breaker`]); injected latency waits before the inner call
//! (under the request's deadline when one is in scope); an injected error is an
//! [`InjectedError`] in place of the inner call's answer, which the breaker above counts as a
//! failure.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::chaos::Fault;
//! use velocity_policy_runtime::layer::{BoxError, BreakerLayer, ChaosLayer};
//! use velocity_policy_runtime::{Breaker, RefusalKind, Registry, ResilienceError};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let breaker = Breaker::builder("search").open_after_failures(2, Duration::from_secs(10)).build();
//! // The registry's entry: the one an attribute or a `.policy` operation naming
//! // `search_drill` uses, switched at run time through `Registry::global().chaos(..)`.
//! let drill = Registry::global().chaos("search_drill");
//! drill.set(Fault::Error, 1.0);
//! drill.enable();
//! // Drills inject only in a process that armed them (off by default).
//! velocity_policy_runtime::chaos::arm();
//! let mut search = ServiceBuilder::new()
//!     .layer(BreakerLayer::new(breaker.clone()))
//!     .layer(ChaosLayer::new(drill.clone()).breaker(breaker.clone()))
//!     .service_fn(|q: &'static str| async move { Ok::<_, BoxError>(q.len()) });
//! for _ in 0..2 {
//!     let error = search.ready().await.unwrap().call("rust").await.unwrap_err();
//!     assert!(error.is::<velocity_policy_runtime::chaos::InjectedError>());
//! }
//! let error = search.ready().await.unwrap().call("rust").await.unwrap_err();
//! let refusal = error.downcast_ref::<ResilienceError>().unwrap();
//! assert_eq!(refusal.kind(), RefusalKind::BreakerOpen, "the breaker counted the injected errors");
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::Breaker;
use crate::chaos::{Chaos, FaultKind};
pub use crate::error::InjectedError;
use crate::layer::BoxError;

/// Applies a [`Chaos`] drill to each call of the service below.
#[derive(Debug, Clone)]
pub struct ChaosLayer {
    chaos: Chaos,
    breaker: Option<Breaker>,
}

impl ChaosLayer {
    /// The drill `chaos` (say, `Registry::global().chaos("search_drill")`).
    pub fn new(chaos: Chaos) -> Self {
        Self {
            chaos,
            breaker: None,
        }
    }

    /// The breaker an injected 429 trips for its `Retry-After`, as a real one would.
    #[must_use]
    pub fn breaker(mut self, breaker: Breaker) -> Self {
        self.breaker = Some(breaker);
        self
    }
}

impl<S> Layer<S> for ChaosLayer {
    type Service = ChaosService<S>;

    fn layer(&self, inner: S) -> ChaosService<S> {
        ChaosService {
            inner,
            chaos: self.chaos.clone(),
            breaker: self.breaker.clone(),
        }
    }
}

/// The service of [`ChaosLayer`].
#[derive(Debug, Clone)]
pub struct ChaosService<S> {
    inner: S,
    chaos: Chaos,
    breaker: Option<Breaker>,
}

impl<S> ChaosService<S> {
    /// `inner` under `chaos`, an injected 429 tripping `breaker`.
    pub fn new(inner: S, chaos: Chaos, breaker: Option<Breaker>) -> Self {
        Self {
            inner,
            chaos,
            breaker,
        }
    }
}

impl<S, Request> Service<Request> for ChaosService<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ChaosFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match self.chaos.draw(self.breaker.as_ref()) {
            Err(refusal) => ChaosFuture::ready(refusal.into()),
            Ok(injection) => {
                let (delay, error) = injection.parts();
                let error = error.then(|| {
                    self.chaos.count_injected(FaultKind::Error);
                    self.chaos.name_arc()
                });
                let inner = self.inner.call(request);
                match delay {
                    Some(delay) => ChaosFuture::delayed(tokio::time::sleep(delay), inner, error),
                    None => match error {
                        Some(name) => ChaosFuture::ready(Box::new(InjectedError::new(name))),
                        None => ChaosFuture::running(inner),
                    },
                }
            }
        }
    }
}

pin_project! {
    /// The response future of [`ChaosService`].
    pub struct ChaosFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Ready { error: Option<BoxError> },
        Delayed { #[pin] sleep: tokio::time::Sleep, inner: Option<F>, error: Option<Arc<str>> },
        Running { #[pin] inner: F },
    }
}

impl<F> ChaosFuture<F> {
    fn ready(error: BoxError) -> Self {
        Self {
            state: State::Ready { error: Some(error) },
        }
    }

    fn delayed(sleep: tokio::time::Sleep, inner: F, error: Option<Arc<str>>) -> Self {
        Self {
            state: State::Delayed {
                sleep,
                inner: Some(inner),
                error,
            },
        }
    }

    fn running(inner: F) -> Self {
        Self {
            state: State::Running { inner },
        }
    }
}

impl<F> fmt::Debug for ChaosFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("chaos::ChaosFuture")
    }
}

impl<F, T, E> Future for ChaosFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project().state.project() {
                StateProj::Ready { error } => {
                    let error = error
                        .take()
                        .unwrap_or_else(|| "chaos future polled after it answered".into());
                    return Poll::Ready(Err(error));
                }
                StateProj::Delayed {
                    sleep,
                    inner,
                    error,
                } => {
                    ready!(sleep.poll(cx));
                    if let Some(name) = error.take() {
                        return Poll::Ready(Err(Box::new(InjectedError::new(name))));
                    }
                    let Some(inner) = inner.take() else {
                        return Poll::Ready(Err("chaos future polled after it answered".into()));
                    };
                    self.as_mut().project().state.set(State::Running { inner });
                }
                StateProj::Running { inner } => {
                    return inner.poll(cx).map_err(Into::into);
                }
            }
        }
    }
}
