//! Hedging a slow tail: the attempt again when the first is slow, out of the retries' budget.
//!
//! # Hedging a slow tail
//!
//! A hedge is the attempt again when the first has not answered within the hedge delay ("The Tail
//! at Scale"; tower's `hedge`, Finagle's backup requests): the first answer wins and the other
//! attempt is dropped. The delay is fixed (`"50ms"`) or the operation's own latency at a
//! percentile (`"p95"`), which the runtime records per hedge in a small lock-free histogram.
//!
//! ```rust,ignore
//! // policies/search.policy:
//! //   hedge tail { after = p95; max = 2 }
//! //   operation lookup: critical, idempotent { retry = transient; hedge = tail; deadline = 1s }
//!
//! #[velocity_policy::critical(hedge(after = "p95", max = 2), deadline = "1s")]
//! #[velocity_policy::idempotent]
//! async fn price(sku: u64) -> Result<u64, AppError> { /* ... */ }
//! ```
//!
//! Only idempotent work can be hedged (`policy::hedge-not-idempotent`, a compile error like the
//! retry one). Each hedge is an attempt like the first: it goes through the breaker and the
//! bulkhead, and one they refuse is not an answer (the call waits for the attempts that run); a
//! first attempt refused is the call's answer, never hedged. Hedges draw from the same deadline
//! and from the same `RetryAllowance` as the operation's retries (its own when it does not
//! retry), so when every call is slow the allowance runs out at its share of the traffic and
//! hedging cannot double the load. `max` is the attempts in flight, the first included (2, one
//! hedge; at most 3). The expansion holds the attempts in the call's own future: a hedged call
//! allocates nothing. `Registry::snapshot().hedges` counts calls, hedges started, won, lost,
//! refused and stopped (by the allowance or the deadline), the dashboard shows them, and
//! `policy explain` adds each hedge's delay to the worst case. In a tower stack, `HedgeLayer`
//! takes the same entry from the registry (put it above the breaker and bulkhead layers):
//!
//! ```rust
//! # #[cfg(feature = "tower")]
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use std::time::Duration;
//! use velocity_policy::Registry;
//! use velocity_policy::layer::{BoxError, HedgeLayer, IdempotentLayer};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! // The entry `hedge = "tail"` and `operation { hedge = tail }` use.
//! let tail = Registry::global().hedge("tail", |h| h.after(Duration::from_millis(20)));
//! let attempts = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
//! let mut service = ServiceBuilder::new()
//!     .layer(HedgeLayer::new(tail.clone()))
//!     .layer(IdempotentLayer)
//!     .service_fn(move |sku: u64| {
//!         let n = attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
//!         async move {
//!             // The first attempt hits a slow replica; the hedge, started at 20 ms, does not.
//!             tokio::time::sleep(Duration::from_millis(if n == 0 { 400 } else { 5 })).await;
//!             Ok::<_, BoxError>(sku * 100)
//!         }
//!     });
//! let started = tokio::time::Instant::now();
//! assert_eq!(service.ready().await.unwrap().call(7).await.unwrap(), 700);
//! assert_eq!(started.elapsed(), Duration::from_millis(25));
//! assert_eq!((tail.snapshot().started, tail.snapshot().won), (1, 1));
//! # }
//! # #[cfg(not(feature = "tower"))]
//! # fn main() {}
//! ```
//!
//! BENCHMARKS.md has the scenario: a dependency whose p99 is 20 times its p50, its p99 with and
//! without a hedge, and the extra calls it cost.
