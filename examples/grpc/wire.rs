//! The wire of the gRPC example (and of `tests/grpc.rs`), written by hand the way `tonic-build`
//! would generate it, so the build needs no `protoc`: two messages with prost's derive, a
//! server that routes one service's unary methods to a [`Handler`], and a client call.
//!
//! ```proto
//! service Example { rpc Budget (Ask) returns (Answer); rpc Relay (Ask) returns (Answer); ... }
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::server::NamedService;
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

/// The request: what to do is the method, so it carries nothing.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Ask {}

/// The answer: what the service that answered saw of its deadline, and of the one it called.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Answer {
    /// What the answering service had left of its deadline when it started, in milliseconds.
    #[prost(uint64, tag = "1")]
    pub(crate) remaining_ms: u64,
    /// The budget its caller sent (`x-deadline-ms`), in milliseconds; 0 when none was sent.
    #[prost(uint64, tag = "2")]
    pub(crate) told_ms: u64,
    /// What the service it called had left, when it called one.
    #[prost(uint64, tag = "3")]
    pub(crate) downstream_remaining_ms: u64,
    /// What it told the service it called, when it called one.
    #[prost(uint64, tag = "4")]
    pub(crate) downstream_told_ms: u64,
}

/// A method's answer, as a tonic service method returns it.
pub(crate) type Reply = Pin<Box<dyn Future<Output = Result<Response<Answer>, Status>> + Send>>;

/// One service's methods: what a generated service trait is.
pub(crate) trait Handler: Send + Sync + 'static {
    /// The service's full name (`package.Service`).
    const NAME: &'static str;

    /// Runs `method` (the last segment of the request's path); `Status::unimplemented` for a
    /// method it does not have.
    fn call(self: Arc<Self>, method: &str, request: Request<Ask>) -> Reply;
}

/// A [`Handler`] as a tonic service: what a generated `...Server` is.
pub(crate) struct Server<H>(Arc<H>);

impl<H> Server<H> {
    /// Serves `handler`.
    pub(crate) fn new(handler: Arc<H>) -> Self {
        Self(handler)
    }
}

impl<H> Clone for Server<H> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<H: Handler> NamedService for Server<H> {
    const NAME: &'static str = H::NAME;
}

impl<H, B> tower::Service<http::Request<B>> for Server<H>
where
    H: Handler,
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let handler = Arc::clone(&self.0);
        let method = request
            .uri()
            .path()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        Box::pin(async move {
            let method = tower::service_fn(move |request: Request<Ask>| {
                Arc::clone(&handler).call(&method, request)
            });
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Answer, Ask>::default());
            Ok(grpc.unary(method, request).await)
        })
    }
}

/// Calls `method` of the service `H` names through `client` (a channel, with any layers).
pub(crate) async fn call<H, T>(
    client: &mut tonic::client::Grpc<T>,
    method: &str,
    request: Request<Ask>,
) -> Result<Response<Answer>, Status>
where
    H: Handler,
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error:
        Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    client
        .ready()
        .await
        .map_err(|e| Status::unavailable(format!("the channel is not ready: {}", e.into())))?;
    let path = format!("/{}/{method}", H::NAME)
        .parse::<http::uri::PathAndQuery>()
        .map_err(|e| Status::internal(format!("method {method:?}: {e}")))?;
    let codec: ProstCodec<Ask, Answer> = ProstCodec::default();
    client.unary(request, path, codec).await
}

/// The budget a caller sent, from the request's `x-deadline-ms` (0 when none).
pub(crate) fn told_ms<T>(request: &Request<T>) -> u64 {
    request
        .metadata()
        .get(velocity_policy::layer::deadline::DEADLINE_MS_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// What is left of the deadline in scope, in milliseconds (0 outside any).
pub(crate) fn remaining_ms() -> u64 {
    velocity_policy::Deadline::current().map_or(0, |d| {
        u64::try_from(d.remaining().as_millis()).unwrap_or(u64::MAX)
    })
}
