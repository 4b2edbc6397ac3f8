//! [`RetryLayer`]: is this failure worth repeating, out of whose budget? A
//! [`RetryPolicy`](crate::RetryPolicy) around a service that is declared idempotent.
//!
//! The layer wraps only an [`Idempotent`] service, the same claim
//! [`retry_within`](crate::retry_within) takes: retrying is a decision someone wrote down, as a
//! type ([`Idempotent::service`](crate::Idempotent::service), or [`IdempotentLayer`] in a
//! `ServiceBuilder`). Requests must be `Clone` (each attempt sends its own copy) and so must the
//! service (later attempts call a clone, polled ready first), as with tower's `Retry`.
//!
//! The rules are the policy's, with its counters and events:
//!
//! - **One budget.** Every attempt is a child of the current deadline (a
//!   [`DeadlineLayer`](crate::layer::DeadlineLayer) above, or an annotated caller; outside any
//!   scope, a deadline of [`RetryLayer::budget`] started at the call), bounded by the policy's
//!   attempt timeout and in scope while it runs. No pause starts that would end past it.
//! - **Full jitter** between attempts, and the policy's [`RetryAllowance`](crate::RetryAllowance)
//!   across requests.
//! - **Never a refusal.** A [`ResilienceError`] from below ends the call
//!   at once; an attempt's [`DeadlineExceeded`] is retried; other
//!   outcomes are the [`RetryClassify`]'s call ([`TransientErrors`] by default).

mod future;
mod layer;
mod service;

use std::fmt;

pub use future::ResponseFuture;
pub use layer::{IdempotentLayer, RetryLayer};
pub use service::RetryService;

use super::BoxError;
use crate::{DeadlineExceeded, Idempotent, ResilienceError, Transient};

impl<S> Idempotent<S> {
    /// Claims that every request `service` handles is safe to send more than once: a second
    /// send after a first that succeeded unseen does no harm. Only a claimed service can be
    /// wrapped in a [`RetryLayer`].
    pub fn service(service: S) -> Self {
        Idempotent { op: service }
    }
}

mod sealed {
    pub trait Sealed {}
    impl<S> Sealed for crate::Idempotent<S> {}
}

/// A service its author claimed idempotent: [`Idempotent<S>`] ([`Idempotent::service`], or
/// under an [`IdempotentLayer`]) and nothing else. What [`RetryLayer`] and a retrying
/// [`OperationLayer`](super::OperationLayer) require of the service they wrap, so that
/// retrying a service nobody said is safe to repeat is a compile error. Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not claimed idempotent, so it cannot be retried",
    label = "a retry would send this service's requests more than once",
    note = "say that repeating a request is safe: wrap the service in `Idempotent::service(..)`, or put `.layer(IdempotentLayer)` right below the `RetryLayer` in the `ServiceBuilder`"
)]
pub trait ClaimedIdempotent: sealed::Sealed {
    /// The service the claim is about.
    type Service;

    /// The service, claim taken.
    fn into_service(self) -> Self::Service;
}

impl<S> ClaimedIdempotent for Idempotent<S> {
    type Service = S;

    fn into_service(self) -> S {
        self.into_inner()
    }
}

/// Decides whether an outcome is worth another attempt. Refusals never are, whatever it says.
///
/// Implemented for [`TransientErrors`] (the default) and for any
/// `Fn(Result<&R, &BoxError>) -> bool`.
pub trait RetryClassify<R> {
    /// True when another attempt could succeed.
    fn is_transient(&self, outcome: Result<&R, &BoxError>) -> bool;
}

/// The default classifier: responses are final; an expiry ([`DeadlineExceeded`]) and an
/// [`std::io::Error`] the runtime's [`Transient`] calls transient are retried; any other error is
/// not (say which are with a closure).
#[derive(Debug, Clone, Copy, Default)]
pub struct TransientErrors;

impl<R> RetryClassify<R> for TransientErrors {
    fn is_transient(&self, outcome: Result<&R, &BoxError>) -> bool {
        let Err(error) = outcome else {
            return false;
        };
        if error.is::<ResilienceError>() {
            false
        } else if error.is::<DeadlineExceeded>() {
            true
        } else if let Some(io) = error.downcast_ref::<std::io::Error>() {
            io.is_transient()
        } else {
            false
        }
    }
}

impl<R, F> RetryClassify<R> for F
where
    F: Fn(Result<&R, &BoxError>) -> bool,
{
    fn is_transient(&self, outcome: Result<&R, &BoxError>) -> bool {
        self(outcome)
    }
}

/// An outcome, for the retry event: the error's text, or that a response was retried.
struct OutcomeText<'a, R>(&'a Result<R, BoxError>);

impl<R> fmt::Display for OutcomeText<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Ok(_) => f.write_str("a response classified as transient"),
            Err(error) => write!(f, "{error}"),
        }
    }
}
