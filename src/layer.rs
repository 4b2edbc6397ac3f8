//! Every mechanism as a tower layer (feature `tower`; the request's deadline needs `http`).
//!
//! A layer is the mechanism, not a copy of it: [`BreakerLayer`] holds the same
//! [`Breaker`](crate::Breaker) handle an attribute naming that breaker uses (take it from
//! [`Registry::global`](crate::Registry::global)), so a layer and an attribute that name
//! `search` share one state, one snapshot row and one set of events.
//!
//! | layer | mechanism | refuses with |
//! |---|---|---|
//! | [`DeadlineLayer`] (`http`) | one deadline per request, in scope for the handler and its body | an answer at once (504 or gRPC `DEADLINE_EXCEEDED`) below the minimum budget; the handler never runs |
//! | [`PropagateDeadlineLayer`] (`http`) | an outgoing request carries what is left, minus a reserve, and the request's criticality | never refuses |
//! | [`CriticalityLayer`] (`http`) | the request's [criticality](crate::criticality), from the route and (within its ceiling) the caller | never refuses; a [`BulkheadLayer`] admits by it |
//! | [`BreakerLayer`] | [`Breaker`](crate::Breaker) | [`ResilienceError`](crate::ResilienceError) kind `breaker_open` |
//! | [`BulkheadLayer`] | [`Bulkhead`](crate::Bulkhead) | kind `bulkhead_full` |
//! | [`ShedLayer`] | [`Shedder`](crate::Shedder) | kind `shed`, with its reason |
//! | `RateLimitLayer` (`ratelimit`) | [`RateLimiter`](crate::limiter::RateLimiter), in process or across the fleet | kind `rate_limited`, with the wait that would admit the call |
//! | [`RetryLayer`] | [`RetryPolicy`](crate::RetryPolicy), only over an [`Idempotent`](crate::Idempotent) service | never retries a refusal |
//! | [`HedgeLayer`] | a [`Hedge`](crate::hedge::Hedge) of a slow first attempt | never hedges a refusal |
//! | [`OperationLayer`] | a whole operation, in the documented order (or [`operation_layer!`](crate::operation_layer) from a `.policy` operation) | any of the above, or [`DeadlineExceeded`](crate::DeadlineExceeded) |
//!
//! The mechanism layers' error is tower's [`BoxError`]: downcast it to
//! [`ResilienceError`](crate::ResilienceError) or [`DeadlineExceeded`](crate::DeadlineExceeded);
//! anything else is the service's own error. Each layer's service and response future, which
//! code rarely names, are documented with the layer in `velocity-policy-runtime`'s `layer` module.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy::layer::{BoxError, BreakerLayer, BulkheadLayer};
//! use velocity_policy::{RefusalKind, Registry, ResilienceError};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // The same entries `#[resilient(breaker = "search", bulkhead = "search")]` uses.
//! let registry = Registry::global();
//! let breaker = registry.breaker("search", |b| b.open_after_failures(5, Duration::from_secs(30)));
//! let bulkhead = registry.bulkhead("search", |b| b.max_concurrent(4));
//!
//! let mut search = ServiceBuilder::new()
//!     .layer(BreakerLayer::new(breaker.clone()))
//!     .layer(BulkheadLayer::new(bulkhead))
//!     .service_fn(|query: &'static str| async move { Ok::<_, BoxError>(query.len()) });
//! assert_eq!(search.ready().await.unwrap().call("rust").await.unwrap(), 4);
//!
//! breaker.trip(Duration::from_secs(5), "429 Too Many Requests");
//! let error = search.ready().await.unwrap().call("rust").await.unwrap_err();
//! let refusal = error.downcast_ref::<ResilienceError>().unwrap();
//! assert_eq!(refusal.kind(), RefusalKind::BreakerOpen);
//! # }
//! ```

#[cfg(feature = "chaos")]
pub use velocity_policy_runtime::layer::ChaosLayer;
pub use velocity_policy_runtime::layer::RateLimitLayer;
pub use velocity_policy_runtime::layer::{
    BoxError, BreakerLayer, BulkheadLayer, ClaimedIdempotent, Classify, ErrorsAreFailures,
    HedgeLayer, IdempotentLayer, OperationLayer, RetryClassify, RetryLayer, ShedLayer,
    TransientErrors,
};
#[cfg(feature = "http")]
pub use velocity_policy_runtime::layer::{
    CriticalityLayer, DeadlineLayer, PropagateDeadline, PropagateDeadlineLayer,
    deadline::{HeaderTrust, IsInternal, MissingDeadlineLayer},
};

/// The request's deadline on the wire: the headers [`DeadlineLayer`] reads and
/// [`PropagateDeadlineLayer`] writes, and the parser of the millisecond header.
#[cfg(feature = "http")]
pub mod deadline {
    pub use velocity_policy_runtime::layer::deadline::{
        DEADLINE_MS_HEADER, GRPC_TIMEOUT_HEADER, parse_ms_header,
    };
}
