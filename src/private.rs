//! What the attribute macros' expansions call, reached as `::velocity_policy::__private<patch>::..`
//! (the build script names the module; `velocity-policy-macros` writes the same name): the runtime's
//! hidden `__macro_support`, and the runtime's own items the expansions name, so that the
//! expansions depend on nothing in the public face.

pub use velocity_policy_runtime::__macro_support::*;
#[cfg(feature = "tower")]
pub use velocity_policy_runtime::layer;
pub use velocity_policy_runtime::{
    Breaker, Bulkhead, CallError, Deadline, Idempotent, RetryPolicy, Sharing, Shedder, WorkClass,
    background, deadline, defer, fallback, hedge, isolate, limiter, queue, retry,
};
