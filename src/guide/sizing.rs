//! Sizing the numbers (what the proving ground measured), and bulkheads that size themselves.
//!
//! # Sizing the numbers
//!
//! What the proving ground (`examples/proving-ground`) measured (a dependency of 10 slots, Poisson
//! load, every fault; `BENCHMARKS.md` has the tables) comes down to three numbers:
//!
//! - **`max_queued = max_concurrent`** for a bulkhead at a dependency's capacity. A compartment
//!   that refuses rather than queues turned away one request in six or seven while everything was
//!   healthy at 70% load (a loss system: arrivals are bursty); a short line absorbs the bursts,
//!   the deadline bounds each wait, and sheddable work never joins it. The price is the wait:
//!   a p99 of 16 to 28 ms while healthy where tower's refusing stack kept 13 to 18 (and served
//!   86% of the requests).
//! - **A cooldown as short as the dependency's recovery**, about 1 s for a service that comes back
//!   at once: recovery after a fault can be no faster than one cooldown, and an open breaker costs
//!   one probe per cooldown while the dependency stays down.
//! - **Mark what may fail** (`sheddable`: [`guide::layers`](crate::guide::layers#how-much-a-request-matters)): in a spike of prefetches on top of user traffic
//!   the critical requests are then served first, and the idle capacity still goes to the rest.
//!
//! # Adaptive bulkheads
//!
//! A fixed `max_concurrent` is right for one load and wrong for the next: when a dependency can
//! serve fewer calls at once (a replica lost, a slower query plan), the calls past its capacity
//! wait inside it and everyone gets slower, while the bulkhead lets as many in as before. An
//! adaptive bulkhead moves its slot count between a `min` and a `max`, following the latency of
//! the calls it admits (Netflix's Vegas, adapted to small limits: the runtime's
//! `velocity_policy::bulkhead::adaptive` docs say how and why). Past its limit it is a bulkhead like any
//! other: a small queue, then a refusal.
//!
//! ```rust,ignore
//! // policies/partners.policy:
//! //   bulkhead partners { adaptive(min = 4, max = 64); max_queued = 8 }
//! //   operation call_partner: critical { bulkhead = partners; deadline = 1s }
//!
//! /// Bound to the file's operation: its adaptive bulkhead applies.
//! #[velocity_policy::critical]
//! async fn call_partner(id: u64) -> Result<Reply, AppError> { /* ... */ }
//!
//! /// Or inline.
//! #[velocity_policy::critical(bulkhead(adaptive(min = 4, max = 64), max_queued = 8), deadline = "1s")]
//! async fn call_other(id: u64) -> Result<Reply, AppError> { /* ... */ }
//! ```
//!
//! It starts at `min` and grows while the dependency answers as fast as it does unloaded and
//! every slot is in use; when latency rises because calls wait inside the dependency, it cuts the
//! limit to the capacity that latency implies. It never leaves `[min, max]`; a bulkhead with both
//! `max_concurrent` and `adaptive` is a compile error (`policy::adaptive-with-fixed-limit`). The
//! snapshot and the dashboard show the limit now, the bounds and the latencies it follows;
//! `policy_bulkhead_limit` is its gauge, and a `bulkhead_limit` event tells of each material move.
//! The tower layer, `operation_layer!` and the attribute share the one bulkhead by name:
//!
//! ```rust
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use velocity_policy::Registry;
//! use velocity_policy::bulkhead::AdaptiveLimit;
//!
//! // The entry `bulkhead partners { adaptive(min = 4, max = 64) }` registers.
//! let partners = Registry::global().bulkhead("partners", |b| b.adaptive(AdaptiveLimit::new(4, 64)));
//! assert_eq!(partners.max_concurrent(), 4); // it starts at min
//! let adaptive = partners.snapshot().adaptive.unwrap();
//! assert_eq!((adaptive.min, adaptive.max), (4, 64));
//! # }
//! ```
//!
//! Any bulkhead, fixed or adaptive, can also be resized by hand while it runs
//! (`Bulkhead::set_max_concurrent`, as a policy reload does): raising it wakes queued callers,
//! lowering it admits nobody new until the calls in flight drain below the new count, and never
//! takes a slot back. In BENCHMARKS.md, the capacity of a dependency drops from 32 to 8 calls at
//! once: the adaptive limit is at 9 within 0.3 s, where a fixed 32 keeps four times the latency
//! and crowds an unrelated route.
