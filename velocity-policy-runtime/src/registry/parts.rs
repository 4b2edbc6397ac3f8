//! What a feature keeps in the [`Registry`](super::Registry), chosen here, once: with the
//! feature, a type of the registry's submodule for it (`chaos`, `limiter_store`, `tunings`) or
//! of the feature's own module (the dashboard's `History`); without it, a zero-sized stand-in
//! whose hooks do nothing. The registry names only these types and calls only their hooks, so
//! it is the same whatever the features; what a feature adds to the registry's methods lives in
//! the registry's submodule for it (`chaos`, `history`, `limiter_store`, `tunings`), in an
//! `impl Registry` of its own, so the feature's module never names the registry.

#[cfg(feature = "chaos")]
pub(crate) use super::chaos::Drills;
#[cfg(feature = "redis")]
pub(crate) use super::limiter_store::LimiterStore;
#[cfg(feature = "overrides")]
pub(crate) use super::tunings::InForce;
#[cfg(feature = "dashboard")]
pub(crate) use crate::history::History;
#[cfg(not(feature = "chaos"))]
pub(crate) use no_chaos::Drills;
#[cfg(not(feature = "dashboard"))]
pub(crate) use no_dashboard::History;
#[cfg(not(feature = "overrides"))]
pub(crate) use no_overrides::InForce;
#[cfg(not(feature = "redis"))]
pub(crate) use no_redis::LimiterStore;

/// Without `chaos`: no drills.
#[cfg(not(feature = "chaos"))]
mod no_chaos {
    /// Stands in for the registry's drills: nothing to keep.
    #[derive(Debug, Default)]
    pub(crate) struct Drills {}
}

/// Without `dashboard`: no history.
#[cfg(not(feature = "dashboard"))]
mod no_dashboard {
    /// Stands in for the dashboard's history: nothing sampled, nothing kept.
    #[derive(Debug, Default)]
    pub(crate) struct History {}
}

/// Without `overrides`: every number is the compiled one.
#[cfg(not(feature = "overrides"))]
mod no_overrides {
    use crate::breaker::Breaker;
    use crate::bulkhead::Bulkhead;
    use crate::deadline::OperationDeadline;
    use crate::retry::RetryPolicy;
    use crate::shedding::Shedder;

    /// Stands in for the overrides in force: there are none, and applying them does nothing.
    #[derive(Debug, Default)]
    pub(crate) struct InForce {}

    impl InForce {
        #[inline]
        pub(crate) fn apply_to_breaker(&self, _: &Breaker) {}
        #[inline]
        pub(crate) fn apply_to_bulkhead(&self, _: &Bulkhead) {}
        #[inline]
        pub(crate) fn apply_to_retry(&self, _: &RetryPolicy) {}
        #[inline]
        pub(crate) fn apply_to_shedder(&self, _: &Shedder) {}
        #[inline]
        pub(crate) fn apply_to_operation(&self, _: &OperationDeadline) {}
        /// Any drill (the `chaos` feature's type, when it is on).
        #[inline]
        #[allow(dead_code, reason = "called only by the `chaos` feature's drills")]
        pub(crate) fn apply_to_chaos<C>(&self, _: &C) {}
    }
}

/// Without `redis`: every rate limiter decides in this process.
#[cfg(not(feature = "redis"))]
mod no_redis {
    use crate::limiter::RateLimiterBuilder;

    /// Stands in for the fleet's limiter store: there is none.
    #[derive(Debug, Default)]
    pub(crate) struct LimiterStore {}

    impl LimiterStore {
        /// The builder as it is: it decides in this process.
        #[inline]
        pub(crate) fn fleet(&self, builder: RateLimiterBuilder) -> RateLimiterBuilder {
            builder
        }
    }
}
