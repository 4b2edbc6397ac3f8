use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::body::DeadlineBody;
use super::headers::incoming_budget;
use super::{Config, ResponseFuture};
use crate::error::{RefusalReason, ResilienceError};
use crate::{Deadline, observe};

/// The service [`DeadlineLayer`](super::DeadlineLayer) makes.
#[derive(Debug, Clone)]
pub struct DeadlineService<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> DeadlineService<S> {
    pub(super) fn new(inner: S, config: Arc<Config>) -> Self {
        Self { inner, config }
    }
}

/// Whether a request is gRPC (`content-type: application/grpc...`): it is answered in gRPC's
/// terms.
#[inline]
fn is_grpc(headers: &http::HeaderMap) -> bool {
    !headers.is_empty()
        && headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for DeadlineService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<DeadlineBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    // Inlined into the caller: its response future (with the timer's room, over 200 bytes) is
    // then made where the caller keeps it; returned from an out-of-line call, it was moved
    // twice more on its way into the caller's `.await`.
    #[inline]
    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let config = &*self.config;
        let headers = request.headers();
        // No headers (a plain request): neither gRPC nor a budget sent, and whether to believe
        // one is not asked.
        let (grpc, sent) = if headers.is_empty() {
            (false, None)
        } else {
            let believed = config.trust.believes(headers, request.extensions());
            (
                is_grpc(headers),
                believed
                    .then(|| {
                        incoming_budget(headers, config.grpc_timeout, config.ms_header.as_ref())
                    })
                    .flatten(),
            )
        };
        // The caller's budget when it is shorter than ours: then an expiry is the caller's.
        let (budget, callers) = match sent {
            Some(sent) if sent < config.budget => (sent, true),
            _ => (config.budget, false),
        };
        if budget < config.min_budget || budget.is_zero() {
            // Less than is worth starting with: answered now, the handler never runs.
            let refusal = ResilienceError::new(
                config.name.clone(),
                RefusalReason::InsufficientBudget {
                    remaining: budget,
                    min_budget: config.min_budget,
                },
            );
            observe::refused(&refusal);
            return ResponseFuture::refused(grpc);
        }
        let now = tokio::time::Instant::now();
        let deadline = Deadline::after_from_callers(now, budget, callers);
        // A service may start work in `call` itself, so that runs under the deadline too.
        let fut = deadline.sync_scope(|| self.inner.call(request));
        ResponseFuture::running(fut, deadline, grpc)
    }
}
