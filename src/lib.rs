//! `policy`: latency and resilience policy for tokio services.
#![doc(inline)]
pub use policy_runtime::*;
