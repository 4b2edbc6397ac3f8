//! Where a registry's rate limiters decide across the fleet (feature `redis`): what the
//! feature keeps in the [`Registry`] and the method it adds. Here rather than in
//! [`redis_store`](crate::redis_store), so that the registry names the store's module and that
//! module names nothing of the registry (nor of the limiters).

use std::sync::RwLock;

use super::Registry;
use crate::limiter::RateLimiterBuilder;
use crate::redis_store::RedisStore;

/// Where the registry's rate limiters decide across the fleet, if anywhere (its
/// [`parts`](super::parts) with `redis`).
#[derive(Debug, Default)]
pub(crate) struct LimiterStore(RwLock<Option<RedisStore>>);

impl LimiterStore {
    /// `builder`, deciding through the store when one was set.
    pub(crate) fn fleet(&self, builder: RateLimiterBuilder) -> RateLimiterBuilder {
        let store = self.0.read().unwrap_or_else(|p| p.into_inner()).clone();
        match store {
            Some(store) => builder.fleet(store),
            None => builder,
        }
    }
}

/// What `redis` adds to [`Registry`]: the fleet's rate limits.
impl Registry {
    /// Makes rate limiters built from now on decide across the fleet through `store`
    /// (feature `redis`), each with its own `on_timeout` and `on_error`; without one they
    /// decide in this process. Set it at startup, before the first call builds a limiter.
    pub fn set_limiter_store(&self, store: RedisStore) {
        *self
            .limiter_store
            .0
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Some(store);
    }
}
