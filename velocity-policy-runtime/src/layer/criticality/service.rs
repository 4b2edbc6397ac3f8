use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use tower_service::Service;

use super::Config;
use crate::criticality::{self, CRITICALITY_HEADER, Criticality, Scoped};

/// The service [`CriticalityLayer`](super::CriticalityLayer) makes.
#[derive(Debug, Clone)]
pub struct CriticalityService<S> {
    pub(super) inner: S,
    pub(super) config: Arc<Config>,
}

impl Config {
    /// The request's level: the caller's, when believed, named and within the ceiling; the
    /// route's otherwise.
    fn level_of<B>(&self, request: &Request<B>) -> Criticality {
        let Some(value) = request.headers().get(CRITICALITY_HEADER) else {
            return self.level;
        };
        if !self.trust.believes(request.headers(), request.extensions()) {
            return self.level;
        }
        match value.to_str().ok().and_then(criticality::parse_header) {
            Some(sent) if sent.rank() > self.ceiling.rank() => self.ceiling,
            Some(sent) => sent,
            None => {
                tracing::debug!(
                    header = CRITICALITY_HEADER,
                    "ignored a criticality header that names no level"
                );
                self.level
            }
        }
    }
}

impl<S, B> Service<Request<B>> for CriticalityService<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Scoped<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let level = self.config.level_of(&request);
        // A service may start work in `call` itself, so that runs at the level too.
        let fut = criticality::sync_scope(level, || self.inner.call(request));
        criticality::scope(level, fut)
    }
}
