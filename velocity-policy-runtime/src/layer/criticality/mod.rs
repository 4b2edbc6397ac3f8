//! A request's [criticality](crate::criticality) from its route and its caller (feature
//! `http`): which requests a full bulkhead keeps room for.
//!
//! [`CriticalityLayer`] puts one level in scope for the handler and everything it calls. A
//! route says what it is worth ([`CriticalityLayer::new`], `critical` for a checkout,
//! `sheddable` for a prefetch) and the highest level a caller may claim for it
//! ([`CriticalityLayer::at_most`], the route's own level unless raised). A caller's
//! `x-criticality` header is **input, not truth**: it is believed only from callers the layer
//! trusts ([`HeaderTrust`], as the deadline's headers are), and never above the route's
//! ceiling, so a public client can lower its own request's claim and never raise it past what
//! the service set. A header that names no level is ignored (debug event) and the route's
//! level applies.
//!
//! [`PropagateDeadlineLayer`](super::PropagateDeadlineLayer) carries the level on to the
//! services this one calls.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::criticality::Criticality;
//! use velocity_policy_runtime::layer::{BulkheadLayer, CriticalityLayer, DeadlineLayer};
//! use velocity_policy_runtime::layer::deadline::HeaderTrust;
//! use velocity_policy_runtime::Registry;
//! use tower::ServiceBuilder;
//! # use http::{Request, Response};
//! # type BoxError = Box<dyn std::error::Error + Send + Sync>;
//!
//! let search = Registry::global().bulkhead("search", |b| b.max_concurrent(16));
//! // Prefetches are sheddable whatever the client says; checkouts critical, and an internal
//! // caller may mark one critical_plus.
//! let prefetch = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_millis(800)))
//!     .layer(CriticalityLayer::new(Criticality::Sheddable))
//!     .layer(BulkheadLayer::new(search.clone()))
//!     .service_fn(|_: Request<String>| async { Ok::<_, BoxError>(Response::new(String::new())) });
//! let checkout = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(2)))
//!     .layer(
//!         CriticalityLayer::new(Criticality::Critical)
//!             .at_most(Criticality::CriticalPlus)
//!             .trust_headers(HeaderTrust::None),
//!     )
//!     .layer(BulkheadLayer::new(search))
//!     .service_fn(|_: Request<String>| async { Ok::<_, BoxError>(Response::new(String::new())) });
//! # let _ = (prefetch, checkout);
//! ```
//!
//! [`HeaderTrust`]: super::deadline::HeaderTrust

mod layer;
mod service;

pub use layer::CriticalityLayer;
pub use service::CriticalityService;

/// What a [`CriticalityLayer`] puts in scope, shared by the layer (which builds it) and its
/// services (which read it per request).
#[derive(Debug)]
struct Config {
    /// The route's level: what a request gets when its caller says nothing (or is not
    /// believed).
    level: crate::criticality::Criticality,
    /// The highest level a caller may claim on this route.
    ceiling: crate::criticality::Criticality,
    trust: super::deadline::HeaderTrust,
}
