//! The same mechanisms as tower layers, sharing one registry with the attributes, and a request's criticality.
//!
//! # The same mechanisms as tower layers
//!
//! A tower or axum service puts the same mechanisms in its `ServiceBuilder` (features `tower`,
//! and `http` for the request's deadline). A layer and an attribute that name the same breaker
//! share one registry entry, so one state, one snapshot row and one set of events:
//!
//! ```rust
//! # #[cfg(feature = "http")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::Duration;
//! use velocity_policy::layer::{BoxError, BreakerLayer, BulkheadLayer, DeadlineLayer};
//! use velocity_policy::{Registry, ResilienceError};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! // The entries `#[velocity_policy::resilient(breaker = "search", bulkhead = "search")]` uses.
//! let registry = Registry::global();
//! let mut search = ServiceBuilder::new()
//!     // One deadline per request: the `request { deadline }` budget, tightened by the caller's
//!     // `grpc-timeout` or `x-deadline-ms`; below 50 ms it is answered at once (504).
//!     .layer(DeadlineLayer::new(Duration::from_secs(2)).min_budget(Duration::from_millis(50)))
//!     .layer(BreakerLayer::new(registry.breaker("search", |b| b)))
//!     .layer(BulkheadLayer::new(registry.bulkhead("search", |b| b.max_concurrent(4))))
//!     .service_fn(|_request: http::Request<()>| async {
//!         // `#[critical]` functions called here take children of the request's deadline.
//!         Ok::<_, BoxError>(http::Response::new(()))
//!     });
//! let response = search.ready().await.unwrap().call(http::Request::new(())).await.unwrap();
//! assert!(response.status().is_success());
//!
//! // A refusal is the runtime's own error, boxed as tower's: `HandleErrorLayer` maps it.
//! registry.find_breaker("search").unwrap().trip(Duration::from_secs(5), "429");
//! let error = search.ready().await.unwrap().call(http::Request::new(())).await.unwrap_err();
//! assert!(error.downcast_ref::<ResilienceError>().is_some());
//! # }
//! # #[cfg(not(feature = "http"))]
//! # fn main() {}
//! ```
//!
//! Put the deadline above the breaker, as here: a call that never answers is then a failure of
//! the breaker when the deadline gives up on it (or a caller's expiry, never a failure, when the
//! caller's header decided the deadline), so a dependency that hangs opens the breaker instead of
//! costing every request its whole budget. A retry's attempt timeout above the breaker counts the
//! same way. tower's own `TimeoutLayer` puts no deadline in scope: a breaker below it cannot tell
//! a timeout from a caller gone, and records neither.
//!
//! A whole `.policy` operation is one layer, `velocity_policy::operation_layer!("name")`: the macro reads
//! the crate's `.policy` files at compile time as the attributes do (an unknown name is a compile
//! error naming the files searched and the closest name) and builds an `OperationLayer` over the
//! same registry entries, so the layer and any `#[velocity_policy::resilient]` function naming its breaker
//! share one breaker (tested in `tests/operation_layer.rs`):
//!
//! ```rust,ignore
//! // policies/search.policy:
//! //   operation index_document: critical, idempotent {
//! //       breaker = search; bulkhead = search; retry = transient; deadline = 2s; min_budget = 50ms
//! //   }
//! let index = ServiceBuilder::new()
//!     // Deadline, then per attempt (retried: the service must be claimed idempotent, as the
//!     // file claims the operation is) the breaker, a bulkhead slot, the call.
//!     .layer(velocity_policy::operation_layer!("index_document"))
//!     .service(Idempotent::service(tower::service_fn(index_document)));
//! ```
//!
//! `ShedLayer`, `RetryLayer` (only over a service claimed `Idempotent`, for `Clone` requests) and
//! `OperationLayer` (a whole operation in the documented order) complete the set, and
//! `PropagateDeadlineLayer` puts what is left of the deadline (minus a reserve) on outgoing
//! requests, for hyper's client, tonic channels or any tower HTTP client (`only_to_hosts` keeps it
//! from third parties). An axum handler reads the request's deadline with the `Deadline` extractor.
//! See `velocity_policy::layer`.
//!
//! # How much a request matters
//!
//! A full bulkhead cannot tell a user's checkout from a prefetch unless something says which is
//! which. A request's **criticality** (the SRE book's four levels: `critical_plus`, `critical`, the
//! default, `sheddable_plus`, `sheddable`) is in scope like its deadline, and a bulkhead admits by
//! it: a sheddable request is turned away (kind `Shed`, reason `criticality`) only when it would
//! take a slot the levels above it are measured to need and could not otherwise get, never at a
//! fixed fraction; it never waits in the queue, so a slot that frees goes to work that matters.
//! Mark a route with `CriticalityLayer::new(Criticality::Sheddable)`, or a call with
//! `velocity_policy::criticality::scope(Criticality::Sheddable, fut)`. A caller's `x-criticality` header
//! can lower its own request's level, and raise it only up to the route's ceiling
//! (`CriticalityLayer::at_most`), from callers you trust (`trust_headers`, as for deadlines);
//! `PropagateDeadlineLayer` carries the level on. See `velocity_policy::criticality`.
