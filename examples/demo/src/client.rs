//! A small HTTP/1.1 client over `hyper-util`, shared by the service (to call its providers) and
//! the load driver (to call the service).

use std::time::Duration;

use axum::body::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::{Service, ServiceExt as _};

/// A client that keeps connections alive between requests. Cloning is cheap.
pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A new client with a connection pool.
pub fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(2)));
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

/// A whole response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
}

impl Reply {
    /// A header's value as text, if present and readable.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The request could not be built (a malformed URL or header).
    #[error("cannot build the request: {0}")]
    Build(String),
    /// Connecting, sending or reading failed.
    #[error("transport: {0}")]
    Transport(String),
}

/// Sends one request and reads the whole response.
pub async fn send(
    client: &HttpClient,
    method: Method,
    url: &str,
    headers: &[(&'static str, &str)],
    body: Bytes,
) -> Result<Reply, ClientError> {
    send_through(client.clone(), method, url, headers, body).await
}

/// [`send`] through any client service: the service's provider calls go through
/// [`HttpClient`] wrapped in `PropagateDeadlineLayer`, which adds the current deadline's
/// headers.
pub async fn send_through<S, B>(
    service: S,
    method: Method,
    url: &str,
    headers: &[(&'static str, &str)],
    body: Bytes,
) -> Result<Reply, ClientError>
where
    S: Service<Request<Full<Bytes>>, Response = http::Response<B>>,
    S::Error: std::fmt::Display,
    B: http_body::Body,
    B::Error: std::fmt::Display,
{
    let mut request = Request::builder()
        .method(method)
        .uri(url)
        .body(Full::new(body))
        .map_err(|e| ClientError::Build(e.to_string()))?;
    for (name, value) in headers {
        let value = HeaderValue::from_str(value).map_err(|e| ClientError::Build(e.to_string()))?;
        request
            .headers_mut()
            .insert(HeaderName::from_static(name), value);
    }
    let response = service
        .oneshot(request)
        .await
        .map_err(|e| ClientError::Transport(e.to_string()))?;
    let (parts, body) = response.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| ClientError::Transport(e.to_string()))?
        .to_bytes();
    Ok(Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// GETs `url`.
pub async fn get(client: &HttpClient, url: &str) -> Result<Reply, ClientError> {
    send(client, Method::GET, url, &[], Bytes::new()).await
}
