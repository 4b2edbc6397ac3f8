//! A crate whose `Cargo.toml` says `[package.metadata.policy] bind = "explicit"`: a function
//! binds to a `.policy` operation only through `#[velocity_policy::operation("...")]`, never by its own
//! name. Its tests show both sides: `fetch_price` shares its name with the file's operation and
//! runs with only its attribute's values; `fetch_price_bound` names the operation and runs
//! behind the file's breaker.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use policy_explicit_binding::{PriceError, fetch_price};
//!
//! // Not bound: the file's breaker (open after one failure) is not in its way.
//! for _ in 0..3 {
//!     assert!(matches!(fetch_price(true).await, Err(PriceError::Upstream)));
//! }
//! # });
//! ```

use velocity_policy::{DeadlineExceeded, ResilienceError};

/// What the pricing calls return when they fail.
#[derive(Debug)]
pub enum PriceError {
    /// The upstream failed (the test asked it to).
    Upstream,
    /// A mechanism refused the call (the breaker, once open).
    Refused(ResilienceError),
    /// The deadline passed.
    TimedOut(DeadlineExceeded),
}

impl From<ResilienceError> for PriceError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for PriceError {
    fn from(e: DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

/// Named like the file's operation, but not bound to it: `bind = "explicit"`.
///
/// # Errors
///
/// [`PriceError::Upstream`] when `fail` is set.
#[velocity_policy::critical(deadline = "500ms")]
pub async fn fetch_price(fail: bool) -> Result<u32, PriceError> {
    if fail {
        Err(PriceError::Upstream)
    } else {
        Ok(42)
    }
}

/// Bound to the file's `fetch_price` operation by name: behind its breaker.
///
/// # Errors
///
/// [`PriceError::Upstream`] when `fail` is set, [`PriceError::Refused`] once the breaker is
/// open.
#[velocity_policy::critical]
#[velocity_policy::operation("fetch_price")]
pub async fn fetch_price_bound(fail: bool) -> Result<u32, PriceError> {
    if fail {
        Err(PriceError::Upstream)
    } else {
        Ok(42)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_function_named_like_an_operation_is_not_bound_to_it() {
        for _ in 0..3 {
            assert!(matches!(fetch_price(true).await, Err(PriceError::Upstream)));
        }
        // Bound, the second call would have been refused: the file's breaker opens after one
        // failure.
        assert!(matches!(fetch_price(false).await, Ok(42)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_function_that_names_the_operation_runs_behind_its_breaker() {
        assert!(matches!(
            fetch_price_bound(true).await,
            Err(PriceError::Upstream)
        ));
        assert!(matches!(
            fetch_price_bound(false).await,
            Err(PriceError::Refused(_))
        ));
    }
}
