//! One call to the dependency as a tower service, shared by every contender: the same hyper
//! client, the same request, the same reading of the answer. Only what wraps it differs.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::Service;

use crate::model::ACCOUNTING_HEADER;

/// hyper-util's pooled HTTP/1 client, as every contender uses it.
pub type Hyper = Client<HttpConnector, Full<Bytes>>;

/// A pooled client: connections kept alive between calls, no Nagle delay.
pub fn hyper_client() -> Hyper {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(1)));
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

/// One call (it carries nothing: the dependency's work is the same for every request).
#[derive(Debug, Clone, Copy, Default)]
pub struct DepCall;

/// Why a call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DepError {
    /// It answered 429 and asked for this pause.
    #[error("the dependency answered 429 (retry after {}s)", .0.as_secs())]
    TooManyRequests(Duration),
    /// It answered another error status.
    #[error("the dependency answered {0}")]
    Status(u16),
    /// No answer: connecting, sending or reading failed.
    #[error("transport: {0}")]
    Transport(Arc<str>),
}

/// The call as a service over any HTTP client service `S` (hyper's, or hyper's under
/// `PropagateDeadlineLayer`). It tells the dependency, for its wasted-work count only, how long
/// this contender's attempt waits.
#[derive(Clone)]
pub struct DepClient<S> {
    inner: S,
    uri: Uri,
    waits: HeaderValue,
}

impl<S> fmt::Debug for DepClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DepClient")
            .field("uri", &self.uri)
            .field("waits", &self.waits)
            .finish()
    }
}

impl<S> DepClient<S> {
    /// Calls `GET {base}/work` through `inner`; the caller's attempt waits `waits`.
    pub fn new(inner: S, base: &str, waits: Duration) -> Result<Self, http::uri::InvalidUri> {
        Ok(Self {
            inner,
            uri: format!("{}/work", base.trim_end_matches('/')).parse()?,
            waits: HeaderValue::from(waits.as_millis() as u64),
        })
    }
}

impl<S, B> Service<DepCall> for DepClient<S>
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>>,
    S::Future: Send + 'static,
    S::Error: fmt::Display,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: fmt::Display,
{
    type Response = ();
    type Error = DepError;
    type Future = Pin<Box<dyn Future<Output = Result<(), DepError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), DepError>> {
        self.inner
            .poll_ready(cx)
            .map_err(|e| DepError::Transport(e.to_string().into()))
    }

    fn call(&mut self, _call: DepCall) -> Self::Future {
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.uri_mut() = self.uri.clone();
        request
            .headers_mut()
            .insert(ACCOUNTING_HEADER, self.waits.clone());
        // Called here, not in the future: a propagated deadline is read from the scope now.
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response
                .await
                .map_err(|e| DepError::Transport(e.to_string().into()))?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            response
                .into_body()
                .collect()
                .await
                .map_err(|e| DepError::Transport(e.to_string().into()))?;
            if status.is_success() {
                Ok(())
            } else if status == http::StatusCode::TOO_MANY_REQUESTS {
                Err(DepError::TooManyRequests(
                    retry_after.unwrap_or(Duration::from_secs(1)),
                ))
            } else {
                Err(DepError::Status(status.as_u16()))
            }
        })
    }
}
