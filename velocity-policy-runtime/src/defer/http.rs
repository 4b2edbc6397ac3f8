//! The tower layer and axum extractor that start deferred work after the response is finished
//! (feature `http`).
//!
//! [`AfterResponseLayer`] gives every request an [`AfterResponse`] queue: it is in scope while
//! the handler runs (so [`defer`](crate::defer()) finds it) and in the request's extensions (so a
//! handler can take it as an extractor). The layer wraps the response body, and the queue is
//! released to the platform when the body is finished, never before:
//!
//! - when the body reports its end (`poll_frame` returns `None`);
//! - or when the body is dropped: the client went away, the connection failed, or the server
//!   dropped the body right after its last frame without asking for more (hyper does that for
//!   bodies of known length, after it has taken the last bytes for the connection).
//!
//! A body that is still streaming keeps its request's deferred work waiting: that is the
//! first of the [two lifetimes](super#two-lifetimes). When the handler fails or its future is
//! dropped before a response exists, the queue is released then: there will be no response to
//! wait for.
//!
//! The request id in each task's span is the `x-request-id` header when the request has one
//! (visible ASCII, at most 128 bytes), else a process-wide counter.
//!
//! ```
//! use std::time::Duration;
//! use axum::{Router, routing::post};
//! use velocity_policy_runtime::defer::{AfterResponse, ImmediatePlatform};
//! use velocity_policy_runtime::defer::http::AfterResponseLayer;
//!
//! async fn save(after: AfterResponse) -> &'static str {
//!     // ...the canonical write, awaited: it is critical work...
//!     after.defer("index_document", async {
//!         tokio::time::sleep(Duration::from_millis(50)).await;
//!         Ok::<_, std::io::Error>(())
//!     });
//!     // Without the extractor: `velocity_policy_runtime::defer` finds the request too.
//!     velocity_policy_runtime::defer("notify_followers", async {});
//!     "saved"
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let platform = ImmediatePlatform::new();
//! let app: Router = Router::new()
//!     .route("/documents/{id}", post(save))
//!     .layer(AfterResponseLayer::with_platform(platform.clone()));
//! # let _ = app;
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum_core::extract::FromRequestParts;
use axum_core::response::{IntoResponse, Response as AxumResponse};
use http::request::Parts;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;
use tower_layer::Layer;
use tower_service::Service;

use super::{AfterResponse, Platform, RequestId};

/// The header a request id is taken from.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

const MAX_REQUEST_ID_LEN: usize = 128;

/// A tower layer that holds the work a request defers until its response is finished.
///
/// See the [module docs](self).
#[derive(Clone, Default)]
pub struct AfterResponseLayer {
    platform: Option<Arc<dyn Platform>>,
}

impl fmt::Debug for AfterResponseLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfterResponseLayer")
            .field("process_platform", &self.platform.is_none())
            .finish()
    }
}

impl AfterResponseLayer {
    /// A layer that releases each request's work to the process-level
    /// [platform](super::platform()).
    pub fn new() -> Self {
        Self::default()
    }

    /// A layer that releases each request's work to `platform`.
    pub fn with_platform(platform: impl Platform) -> Self {
        Self {
            platform: Some(Arc::new(platform)),
        }
    }
}

impl<S> Layer<S> for AfterResponseLayer {
    type Service = AfterResponseService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AfterResponseService {
            inner,
            platform: self.platform.clone(),
        }
    }
}

/// The service [`AfterResponseLayer`] makes.
#[derive(Clone)]
#[doc(hidden)]
pub struct AfterResponseService<S> {
    inner: S,
    platform: Option<Arc<dyn Platform>>,
}

impl<S: fmt::Debug> fmt::Debug for AfterResponseService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfterResponseService")
            .field("inner", &self.inner)
            .field("process_platform", &self.platform.is_none())
            .finish()
    }
}

fn request_id(headers: &HeaderMap) -> RequestId {
    headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= MAX_REQUEST_ID_LEN)
        .map_or_else(RequestId::next, RequestId::new)
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for AfterResponseService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<AfterResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let after = AfterResponse::build(request_id(request.headers()), self.platform.clone());
        request.extensions_mut().insert(after.clone());
        // A service may start work in `call` itself, so that runs in the scope too.
        let inner = after.sync_scope(|| self.inner.call(request));
        ResponseFuture {
            inner: after.scope(inner),
            release: Some(Release(after)),
        }
    }
}

/// Releases a request's queue when dropped.
struct Release(AfterResponse);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.release();
    }
}

pin_project! {
    /// The response future of [`AfterResponseService`].
    #[doc(hidden)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: TaskLocalFuture<AfterResponse, F>,
        // Released here if no response comes (an error, or this future dropped).
        release: Option<Release>,
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<AfterResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        let release = this.release.take();
        Poll::Ready(
            result.map(|response| response.map(|inner| AfterResponseBody { inner, release })),
        )
    }
}

pin_project! {
    /// A response body that releases its request's deferred work when it is finished: at its
    /// end of stream, or when it is dropped.
    #[doc(hidden)]
    pub struct AfterResponseBody<B> {
        #[pin]
        inner: B,
        release: Option<Release>,
    }
}

impl<B> fmt::Debug for AfterResponseBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfterResponseBody")
            .field("finished", &self.release.is_none())
            .finish_non_exhaustive()
    }
}

impl<B: Body> Body for AfterResponseBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        if frame.is_none() {
            // The end of the stream: every frame was taken by the connection.
            this.release.take();
        }
        // Not on `is_end_stream` after the last frame: that frame has not been written yet.
        // The server drops the body once it has, which releases then.
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The rejection of the [`AfterResponse`] extractor when [`AfterResponseLayer`] is not
/// installed: a 500 that names the missing layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the `AfterResponse` extractor needs `AfterResponseLayer`: add `.layer(AfterResponseLayer::new())` to the router, around the routes that defer work"
)]
pub struct MissingAfterResponseLayer;

impl IntoResponse for MissingAfterResponseLayer {
    fn into_response(self) -> AxumResponse {
        (StatusCode::INTERNAL_SERVER_ERROR, self.to_string()).into_response()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for AfterResponse {
    type Rejection = MissingAfterResponseLayer;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<AfterResponse>()
            .cloned()
            .ok_or(MissingAfterResponseLayer)
    }
}
