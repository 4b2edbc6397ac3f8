//! [`BreakerLayer`]: should we call this at all right now? A [`Breaker`](crate::Breaker) around
//! a service.
//!
//! `poll_ready`, once the inner service is ready, looks at the breaker (one atomic load): closed,
//! the next `call` hands the request on at once. Otherwise `call` checks it: open, the response
//! future is an immediate [`ResilienceError`](crate::ResilienceError) of kind `breaker_open` and
//! the inner service is never called (a breaker whose cooldown is over closes there).
//! Admitted, the outcome is recorded when the inner future completes: an error is a failure, a
//! success closes a probing breaker, as the attribute does. A refusal from a layer below (a full
//! bulkhead, a shed) is neither: that work never ran. A [`Classify`] decides otherwise (a `503`
//! response as a failure, say).
//!
//! A call that never answers is a failure too. The deadline in scope at `call` is the one a
//! `DeadlineLayer` (feature `http`), a [`RetryLayer`](crate::layer::RetryLayer)'s
//! attempt timeout or an `OperationLayer` above bounds the call by; when that layer stops
//! waiting and drops the call unfinished, the breaker records the expiry, as the attribute
//! records an attempt that ran out of its time: a failure, or a caller's expiry (never a
//! failure) when the caller's budget decided the deadline. So a dependency that hangs opens
//! the breaker rather than costing every request its whole timeout. A call dropped before its
//! deadline (a hedge's slower attempt, a caller gone) records nothing; so does one bounded only
//! by a timer the breaker cannot see (tower's `TimeoutLayer` above it, with no deadline in
//! scope).

mod future;
mod layer;
mod service;

pub use future::ResponseFuture;
pub use layer::BreakerLayer;
pub use service::BreakerService;

use super::BoxError;

/// Decides whether an outcome of the inner service counts as a failure of the dependency.
///
/// Implemented for [`ErrorsAreFailures`] (the default) and for any
/// `Fn(Result<&R, &BoxError>) -> bool`. Refusals from layers below are never recorded,
/// whatever the classifier says.
pub trait Classify<R> {
    /// True when the outcome is a failure to count.
    fn is_failure(&self, outcome: Result<&R, &BoxError>) -> bool;
}

/// The default classifier: every error is a failure, every response a success.
#[derive(Debug, Clone, Copy, Default)]
pub struct ErrorsAreFailures;

impl<R> Classify<R> for ErrorsAreFailures {
    #[inline]
    fn is_failure(&self, outcome: Result<&R, &BoxError>) -> bool {
        outcome.is_err()
    }
}

impl<R, F> Classify<R> for F
where
    F: Fn(Result<&R, &BoxError>) -> bool,
{
    #[inline]
    fn is_failure(&self, outcome: Result<&R, &BoxError>) -> bool {
        self(outcome)
    }
}
