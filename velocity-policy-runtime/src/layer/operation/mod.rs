//! [`OperationLayer`]: a whole operation, the mechanisms in the documented order.
//!
//! What a `#[resilient]` function expands to, as a layer: the operation's own deadline (a
//! child of the current one, refused with `insufficient_budget` below its minimum), the
//! shedding decision, the rate limit(once per call, refused with
//! `rate_limited` and the wait that would admit it), then for each attempt (under a [`RetryPolicy`](crate::RetryPolicy), when
//! the operation has one and the service is [`Idempotent`](crate::Idempotent)): the breaker's
//! check, a bulkhead slot, the attempt under its own child deadline, the outcome recorded in
//! the breaker. A refusal ends the sequence at once.
//!
//! Each mechanism is the same one a layer of its own would be ([`BreakerLayer`](super::BreakerLayer),
//! [`BulkheadLayer`](super::BulkheadLayer), [`ShedLayer`](super::ShedLayer),
//! [`RetryLayer`](super::RetryLayer)), so the order is the only thing this adds. Give it the
//! registry's handles for the names a `.policy` operation declares, and the layer and the
//! attribute share them.
//!
//! **From a `.policy` operation by name:** `velocity_policy::operation_layer!("index_document")` (the
//! facade, feature `tower`) finds the operation in the crate's `.policy` files at compile
//! time, exactly as `#[velocity_policy::operation("index_document")]` does, checks it with the same
//! validator (an unknown name is a compile error naming the files searched and the closest
//! name), and expands to this builder chain over the very registry entries an attribute
//! naming the same mechanisms declares: one state per name, and a second, different
//! configuration of a name refused loudly as between two attributes. An operation with
//! `retry` must be `idempotent` in the file, and the layer then wraps only a service claimed
//! [`Idempotent`](crate::Idempotent). Deferred and background operations, and the settings
//! that need the function itself (`fallback`, `stale_if_error`, `poll_budget`, `isolate`),
//! are compile errors saying to use the attribute. This crate does not read `.policy` files
//! itself: the macro does, at compile time.
//!
//! Each call runs in one INFO span (target `policy`) with the fields `operation` and `class`
//! (`critical`), the mechanisms' events inside it: named after the operation when the layer
//! comes from `operation_layer!` (as an attribute's call span is), `operation` when built by
//! hand ([`OperationLayer::span`] names it). With [`OperationLayer::calls`] (which
//! `operation_layer!` sets) each call is also measured for the operation's metrics, as an
//! attribute's call is: its duration by outcome (a refusal or an expiry told apart from the
//! service's own error, whichever layer inside made it) and its attempts.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::layer::{BoxError, OperationLayer};
//! use velocity_policy_runtime::{Idempotent, Registry};
//! use tower::{Layer, Service, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // operation index_document: critical, idempotent {
//! //     breaker = search; bulkhead = search; retry = search; deadline = 2s; min_budget = 50ms }
//! let registry = Registry::global();
//! let layer = OperationLayer::new("index_document", Duration::from_secs(2))
//!     .min_budget(Duration::from_millis(50))
//!     .breaker(registry.breaker("search", |b| b))
//!     .bulkhead(registry.bulkhead("search", |b| b.max_concurrent(4)))
//!     .retry(registry.retry("search", |r| r.attempts(3)));
//! let index = tower::service_fn(|id: u64| async move { Ok::<_, BoxError>(id) });
//! let mut index = layer.layer(Idempotent::service(index));
//! assert_eq!(index.ready().await.unwrap().call(7).await.unwrap(), 7);
//! # }
//! ```

mod future;
mod layer;
mod optional;
mod service;

pub use future::ResponseFuture;
pub use layer::{NoRetry, OperationLayer, WithRetry};
pub use optional::{Optional, OptionalFuture};
pub use service::{CallSpan, OperationService};
