//! The fleet rate limiter without the `redis` feature: there is none. `Fleet` and `Store` have
//! no values, so a [`RateLimiter`](super::RateLimiter) always decides in this process and the
//! code that would use them compiles to nothing. With the feature, `fleet.rs` has the same
//! items.

use std::sync::Arc;

use super::{LimiterSnapshot, RateLimitConfig};
use crate::error::ResilienceError;

/// Stands in for the fleet's limiter: no value exists.
#[derive(Debug)]
pub(super) enum Fleet {}

/// Stands in for the fleet's store: no value exists.
#[derive(Debug)]
pub(super) enum Store {}

impl Fleet {
    pub(super) async fn acquire(&self) -> Result<(), ResilienceError> {
        match *self {}
    }

    pub(super) fn snapshot(&self) -> LimiterSnapshot {
        match *self {}
    }
}

/// Never called: no store exists to call it with.
pub(super) fn limiter<R>(
    store: Store,
    _name: Arc<str>,
    _config: RateLimitConfig,
    _made: impl FnOnce(Fleet) -> R,
) -> R {
    match store {}
}
