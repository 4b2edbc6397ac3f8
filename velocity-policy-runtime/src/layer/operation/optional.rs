use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower_service::Service;

use crate::layer::BoxError;

/// A mechanism the operation declares (`Applied`) or not (`Skipped`): the service below is
/// the same either way.
#[derive(Debug, Clone)]
pub enum Optional<A, B> {
    /// The mechanism's service, around the rest.
    Applied(A),
    /// The rest alone.
    Skipped(B),
}

impl<A, B, Request> Service<Request> for Optional<A, B>
where
    A: Service<Request>,
    A::Error: Into<BoxError>,
    B: Service<Request, Response = A::Response>,
    B::Error: Into<BoxError>,
{
    type Response = A::Response;
    type Error = BoxError;
    type Future = OptionalFuture<A::Future, B::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            Self::Applied(a) => a.poll_ready(cx).map_err(Into::into),
            Self::Skipped(b) => b.poll_ready(cx).map_err(Into::into),
        }
    }

    #[inline]
    fn call(&mut self, request: Request) -> Self::Future {
        match self {
            Self::Applied(a) => OptionalFuture {
                either: Either::Applied {
                    fut: a.call(request),
                },
            },
            Self::Skipped(b) => OptionalFuture {
                either: Either::Skipped {
                    fut: b.call(request),
                },
            },
        }
    }
}

pin_project! {
    /// The response future of [`Optional`].
    pub struct OptionalFuture<A, B> {
        #[pin]
        either: Either<A, B>,
    }
}

pin_project! {
    #[project = EitherProj]
    enum Either<A, B> {
        Applied { #[pin] fut: A },
        Skipped { #[pin] fut: B },
    }
}

impl<A, B> fmt::Debug for OptionalFuture<A, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OptionalFuture")
    }
}

impl<A, B, T, EA, EB> Future for OptionalFuture<A, B>
where
    A: Future<Output = Result<T, EA>>,
    B: Future<Output = Result<T, EB>>,
    EA: Into<BoxError>,
    EB: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().either.project() {
            EitherProj::Applied { fut } => fut.poll(cx).map_err(Into::into),
            EitherProj::Skipped { fut } => fut.poll(cx).map_err(Into::into),
        }
    }
}
