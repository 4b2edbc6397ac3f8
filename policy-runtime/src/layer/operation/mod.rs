//! [`OperationLayer`]: a whole operation, the mechanisms in the documented order.
//!
//! What a `#[resilient]` function expands to, as a layer: the operation's own deadline (a
//! child of the current one, refused with `insufficient_budget` below its minimum), the
//! shedding decision, then for each attempt (under a [`RetryPolicy`](crate::RetryPolicy), when
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
//! ```
//! use std::time::Duration;
//! use policy_runtime::layer::{BoxError, OperationLayer};
//! use policy_runtime::{Idempotent, Registry};
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
pub use service::OperationService;
