//! [`ShedLayer`]: is this work worth doing under the current pressure? The
//! [`Shedder`](crate::Shedder)'s decision before each call.
//!
//! Two signals, as for the attributes: **load** is how full a compartment is (the
//! [`Bulkhead`](crate::Bulkhead) given to [`ShedLayer::load_of`]; none means no load), and
//! **budget** is what the current deadline has left against the work's expected cost (no
//! deadline in scope means no budget pressure). Critical work is never shed for load. A shed
//! call is an immediate [`ResilienceError`](crate::ResilienceError) of kind `shed` with its
//! reason, and the inner service is never called.

mod future;
mod layer;
mod service;

pub use future::ResponseFuture;
pub use layer::ShedLayer;
pub use service::ShedService;

/// What a [`ShedLayer`] decides with, shared by the layer (which builds it) and its services
/// (which decide with it per call).
#[derive(Debug, Clone)]
struct Config {
    shedder: std::sync::Arc<crate::Shedder>,
    class: crate::WorkClass,
    load_of: Option<crate::Bulkhead>,
    expected_cost: std::time::Duration,
}
