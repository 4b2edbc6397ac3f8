use tower_layer::Layer;

use super::RateLimitService;
use crate::limiter::RateLimiter;

/// Asks a [`RateLimiter`] before each call; see the [module docs](super).
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    limiter: RateLimiter,
}

impl RateLimitLayer {
    /// A layer over `limiter` (take it from the [`Registry`](crate::Registry::rate_limiter) to
    /// share it with the attributes and operations that name it).
    pub fn new(limiter: RateLimiter) -> Self {
        Self { limiter }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService::new(inner, self.limiter.clone())
    }
}
