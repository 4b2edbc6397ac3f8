//! Every mechanism as a tower layer (feature `tower`; the request's deadline needs `http`).
//!
//! A layer is the mechanism, not a copy of it: [`BreakerLayer`] holds the same [`Breaker`]
//! handle an attribute naming that breaker uses (take it from [`Registry::global`]), so a
//! layer and an attribute that name `search` share one state, one snapshot row and one set of
//! events.
//!
//! | layer | mechanism | refuses with |
//! |---|---|---|
//! | [`DeadlineLayer`] (`http`) | one deadline per request, in scope for the handler and its body | an answer at once (504 or gRPC `DEADLINE_EXCEEDED`) below the minimum budget; the handler never runs |
//! | [`PropagateDeadlineLayer`] (`http`) | an outgoing request carries what is left, minus a reserve, and the request's criticality | never refuses |
//! | [`CriticalityLayer`] (`http`) | the request's [criticality](crate::criticality), from the route and (within its ceiling) the caller | never refuses; a [`BulkheadLayer`] admits by it |
//! | [`BreakerLayer`] | [`Breaker`] | [`ResilienceError`] kind `breaker_open` |
//! | [`BulkheadLayer`] | [`Bulkhead`] | kind `bulkhead_full` |
//! | [`ShedLayer`] | [`Shedder`](crate::Shedder) | kind `shed`, with its reason |
//! | [`RateLimitLayer`] (`ratelimit`) | [`RateLimiter`](crate::limiter::RateLimiter), in process or across the fleet | kind `rate_limited`, with the wait that would admit the call |
//! | [`RetryLayer`] | [`RetryPolicy`](crate::RetryPolicy), only over an [`Idempotent`](crate::Idempotent) service | never retries a refusal |
//! | [`OperationLayer`] | a whole operation, in the documented order | any of the above, or [`DeadlineExceeded`] |
//!
//! # Layout
//!
//! One folder per mechanism in tower's shape (`tower/src/load_shed/`): `mod.rs` (docs and
//! re-exports), `layer.rs` (the cheap, `Clone` [`Layer`](tower_layer::Layer)), `service.rs`
//! (the [`Service`](tower_service::Service)) and `future.rs` (its response future). The error
//! types are the runtime's own, shared by every interface: [`ResilienceError`] (the work never
//! ran) and [`DeadlineExceeded`] (we stopped waiting).
//!
//! # Errors
//!
//! The mechanism layers' error is tower's [`BoxError`], as tower's own middleware's is, so
//! layers stack without nesting and `HandleErrorLayer` (axum) maps them in one place: downcast
//! to [`ResilienceError`] (its [`kind`](crate::ResilienceError::kind) says which mechanism refused)
//! or to [`DeadlineExceeded`]; anything else is the service's own error. Only a refusal or a
//! failure is boxed; the admitted path allocates nothing.
//!
//! `poll_ready` only forwards the inner service's readiness: no layer waits for a slot there
//! (that is what tower#793 is about). A refusal is an immediate error from `call`'s future.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::layer::{BoxError, BreakerLayer, BulkheadLayer};
//! use velocity_policy_runtime::{RefusalKind, Registry, ResilienceError};
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
//!
//! [`Breaker`]: crate::Breaker
//! [`Bulkhead`]: crate::Bulkhead
//! [`Registry::global`]: crate::Registry::global
//! [`ResilienceError`]: crate::ResilienceError
//! [`DeadlineExceeded`]: crate::DeadlineExceeded

pub mod breaker;
pub mod bulkhead;
#[cfg(feature = "chaos")]
pub mod chaos;
#[cfg(feature = "http")]
pub mod criticality;
#[cfg(feature = "http")]
pub mod deadline;
pub mod hedge;
pub mod operation;
pub mod ratelimit;
pub mod retry;
pub mod shedding;

pub use breaker::{BreakerLayer, Classify, ErrorsAreFailures};
pub use bulkhead::BulkheadLayer;
#[cfg(feature = "chaos")]
pub use chaos::ChaosLayer;
#[cfg(feature = "http")]
pub use criticality::CriticalityLayer;
#[cfg(feature = "http")]
pub use deadline::{DeadlineLayer, PropagateDeadline, PropagateDeadlineLayer};
pub use hedge::HedgeLayer;
pub use operation::OperationLayer;
pub use ratelimit::RateLimitLayer;
pub use retry::{ClaimedIdempotent, IdempotentLayer, RetryClassify, RetryLayer, TransientErrors};
pub use shedding::ShedLayer;

/// The error of the mechanism layers, as tower's: any error, boxed. Downcast it to
/// [`ResilienceError`](crate::ResilienceError) or [`DeadlineExceeded`](crate::DeadlineExceeded).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Whether a boxed error is one of the runtime's refusals: the work never ran.
pub(crate) fn is_refusal(error: &BoxError) -> bool {
    error.is::<crate::ResilienceError>()
}

/// A boxed error that is an expiry under a budget the caller shortened
/// ([`DeadlineExceeded::is_callers`](crate::DeadlineExceeded::is_callers)).
pub(crate) fn callers_expiry(error: &BoxError) -> Option<crate::DeadlineExceeded> {
    error
        .downcast_ref::<crate::DeadlineExceeded>()
        .filter(|expired| expired.is_callers())
        .copied()
}

/// A response future polled again after it completed: the caller's bug, answered with an
/// error rather than a panic.
#[derive(Debug, thiserror::Error)]
#[error("a policy layer's response future was polled after it completed")]
struct PolledAfterCompletion;

pub(crate) fn polled_after_completion() -> BoxError {
    Box::new(PolledAfterCompletion)
}
