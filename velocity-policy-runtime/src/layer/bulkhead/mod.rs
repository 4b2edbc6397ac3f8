//! [`BulkheadLayer`]: how much of the pool may this dependency hold? A
//! [`Bulkhead`](crate::Bulkhead) around a service.
//!
//! `call` takes a free slot (one compare-and-swap) and holds it until the inner future
//! completes or is dropped. With every slot busy:
//!
//! - when the bulkhead has queue places and a deadline is in scope (a
//!   [`DeadlineLayer`](crate::layer::DeadlineLayer) above, or an annotated caller), the call
//!   waits in the queue at most until that deadline, as the attribute's does;
//! - otherwise it is refused at once: a [`ResilienceError`](crate::ResilienceError) of kind
//!   `bulkhead_full`. Without a deadline there is no bound on a wait, so there is none.
//!
//! The inner service's `call` is made when the layer's `call` is (tower's contract: it was
//! polled ready for it), but its future is polled only once a slot is held: a service that
//! starts its work lazily, as axum handlers and hyper's client do, runs nothing while queued.
//!
//! An [adaptive](crate::bulkhead::adaptive) bulkhead measures each call from the slot taken to
//! the slot given back, here when the inner future completes or is dropped: the latency the
//! layer's callers see from the dependency, which its limit follows.
//!
//! `poll_ready` forwards the inner readiness only; the slot is taken in `call`. Unlike tower's
//! `ConcurrencyLimit`, a full compartment is a refusal, never a wait in `poll_ready`.

mod future;
mod layer;
mod service;

pub use future::ResponseFuture;
pub use layer::BulkheadLayer;
pub use service::BulkheadService;
