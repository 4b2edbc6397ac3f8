//! gRPC with tonic, and outgoing HTTP clients (hyper-util, reqwest): deadlines across the wire, statuses and pushback.
//!
//! # With tonic
//!
//! The same for a gRPC service (feature `tonic`): `DeadlineLayer` on tonic's `Server` reads the
//! caller's `grpc-timeout`, `PropagateDeadlineLayer` on a channel sends what is left, and a method
//! returning `Result<Response<T>, Status>` goes under the attributes: a refusal or an expiry becomes
//! the status gRPC's guidance gives it, with `grpc-retry-pushback-ms` when we know how long the
//! caller should wait.
//!
//! ```rust
//! # #[cfg(feature = "tonic")]
//! # mod example {
//! use std::time::Duration;
//! use velocity_policy::layer::{DeadlineLayer, PropagateDeadlineLayer};
//! use tonic::transport::{Endpoint, Server};
//! use tonic::{Request, Response, Status};
//! use tower::ServiceBuilder;
//! # mod pb {
//! #     #[derive(Clone, PartialEq, prost::Message)]
//! #     pub struct QuoteRequest { #[prost(uint64, tag = "1")] pub id: u64 }
//! #     #[derive(Clone, PartialEq, prost::Message)]
//! #     pub struct QuoteReply { #[prost(uint64, tag = "1")] pub cents: u64 }
//! #     pub mod quotes_server {
//! #         #[tonic::async_trait]
//! #         pub trait Quotes: Send + Sync + 'static {
//! #             async fn quote(&self, request: tonic::Request<super::QuoteRequest>)
//! #                 -> Result<tonic::Response<super::QuoteReply>, tonic::Status>;
//! #         }
//! #     }
//! # }
//! use pb::{QuoteReply, QuoteRequest, quotes_server::Quotes}; // tonic-build's output
//!
//! struct QuoteService;
//!
//! // tonic-build's trait is `#[async_trait]`: the attributes go on its methods as on any
//! // `async fn`. A breaker open: `UNAVAILABLE` with `grpc-retry-pushback-ms`; the bulkhead full:
//! // `RESOURCE_EXHAUSTED`; too little budget left, or an expiry: `DEADLINE_EXCEEDED`.
//! #[tonic::async_trait]
//! impl Quotes for QuoteService {
//!     #[velocity_policy::resilient(
//!         breaker(failures = 5, within = "30s", cooldown = "10s"),
//!         bulkhead(max_concurrent = 8, max_queued = 4),
//!         deadline = "1s"
//!     )]
//!     async fn quote(&self, request: Request<QuoteRequest>) -> Result<Response<QuoteReply>, Status> {
//!         Ok(Response::new(QuoteReply { cents: request.into_inner().id * 100 }))
//!     }
//! }
//!
//! # pub async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Outgoing: what is left of the request's deadline, less 20 ms, as `grpc-timeout`.
//! let inventory = ServiceBuilder::new()
//!     .layer(PropagateDeadlineLayer::new().reserve(Duration::from_millis(20)))
//!     .service(Endpoint::from_static("http://inventory:50051").connect_lazy());
//! // Incoming: one deadline per request, which the caller's `grpc-timeout` can only shorten;
//! // under 50 ms, `DEADLINE_EXCEEDED` and the method never runs.
//! let server = Server::builder()
//!     .layer(DeadlineLayer::new(Duration::from_secs(2)).min_budget(Duration::from_millis(50)))
//! # ;
//! # let _ = (server, inventory);
//! # assert_eq!(QuoteService.quote(Request::new(QuoteRequest { id: 3 })).await?.into_inner().cents, 300);
//! # /*
//!     .add_service(QuotesServer::new(QuoteService))
//!     .serve("0.0.0.0:50051".parse()?)
//!     .await?;
//! # */
//! # Ok(())
//! # }
//! # }
//! # #[cfg(feature = "tonic")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> { example::run().await }
//! # #[cfg(not(feature = "tonic"))]
//! # fn main() {}
//! ```
//!
//! On the client side a status is `Transient` when it is `UNAVAILABLE`, or `RESOURCE_EXHAUSTED`
//! with a pushback, and a retry of ours (`retry_within`, `#[resilient(retry = ...)]`) never comes
//! back sooner than `grpc-retry-pushback-ms` asked, nor at all when it is negative, nor past the
//! deadline. Two real tonic services, A calling B, run all of this in `examples/grpc` (`cargo run
//! --example grpc --features tonic`; its services are written by hand, so no `protoc`) and
//! `tests/grpc.rs`.
//!
//! **Other clients.** hyper-util's client (feature `http`) takes `PropagateDeadlineLayer` and
//! `velocity_policy::client::TripLayer`; reqwest (feature `reqwest`) takes
//! `velocity_policy::client::reqwest::DeadlineMiddleware` and `BreakerMiddleware` through
//! `reqwest-middleware`. Either way a `429` or `503` with `Retry-After` opens the named breaker for
//! exactly that long (`velocity_policy::client::RetryAfter`, the documented classifier), and the next calls
//! are refused without a request until it is over (`velocity-policy-runtime/tests/client.rs`, against a
//! real axum server).
