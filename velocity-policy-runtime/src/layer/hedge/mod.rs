//! [`HedgeLayer`]: is the first attempt just slow? A [`Hedge`](crate::hedge::Hedge) around a
//! service that is declared idempotent: another call of it when the first has not answered
//! within the hedge's delay, the first answer wins and the rest are dropped.
//!
//! The layer runs the runtime's own hedging loop ([`hedge_within`](crate::hedge::hedge_within)):
//! the same registry entry by name as an attribute's or a `.policy` operation's `hedge`, with
//! its delay (fixed, or the percentile of the latencies it records), its counters, events and
//! allowance. Only an [`Idempotent`](crate::Idempotent) service can be wrapped
//! ([`IdempotentLayer`](super::IdempotentLayer) below it in a `ServiceBuilder`), and requests
//! and the service must be `Clone`: each attempt calls its own clone with its own copy, polled
//! ready first.
//!
//! - **Through the breaker and the bulkhead.** Put the [`BreakerLayer`](super::BreakerLayer)
//!   and the [`BulkheadLayer`](super::BulkheadLayer) below it: each hedge is then an attempt
//!   like the first, and one they refuse (a [`ResilienceError`](crate::ResilienceError)) is not
//!   an answer: the call waits for the attempts that run. A first attempt refused is the call's
//!   answer at once, never hedged.
//! - **One budget.** Hedges withdraw from the hedge's allowance; below a
//!   [`RetryLayer`](super::RetryLayer), [`HedgeLayer::within_retry`] makes them withdraw from
//!   the retry policy's instead, as the attributes do.
//! - **One deadline.** Every attempt runs under the current deadline (a
//!   [`DeadlineLayer`](super::DeadlineLayer) above, or an annotated caller; outside any scope,
//!   one of [`HedgeLayer::budget`] started at the call), in scope while it runs.
//! - **One allocation per call**: the hedging loop's state is boxed, since a layer's response
//!   future must be a type that can be named. The attribute's expansion, which can hold the
//!   loop's future inline, allocates nothing.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::Registry;
//! use velocity_policy_runtime::layer::{BoxError, HedgeLayer, IdempotentLayer};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let hedge = Registry::global().hedge("docs-layer-hedge", |h| h.after(Duration::from_millis(20)));
//! let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
//! let mut service = ServiceBuilder::new()
//!     .layer(HedgeLayer::new(hedge.clone()))
//!     .layer(IdempotentLayer)
//!     .service_fn(move |id: u64| {
//!         // The first call is slow, the hedge quick.
//!         let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
//!         async move {
//!             tokio::time::sleep(Duration::from_millis(if n == 0 { 500 } else { 5 })).await;
//!             Ok::<_, BoxError>(id)
//!         }
//!     });
//! assert_eq!(service.ready().await.unwrap().call(7).await.unwrap(), 7);
//! assert_eq!(hedge.snapshot().won, 1);
//! # }
//! ```

mod layer;
mod service;

pub use layer::HedgeLayer;
pub use service::{HedgeService, ResponseFuture};
