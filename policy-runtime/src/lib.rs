//! The mechanisms behind `policy`: deadline, breaker, bulkhead, shedding and retry.

/// Where compute and services run, derived from the environment; regions only, never hosts.
#[cfg(feature = "locality")]
pub mod locality;
