#![doc = include_str!("../README.md")]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub use policy_macros::{
    background, critical, deferred, idempotent, isolate, operation, resilient,
};
pub use policy_runtime::*;

#[cfg(feature = "html-dimensions")]
pub use policy_delivery::image_dimensions::{self, ImageDimensionsLayer, ImageManifest};
#[cfg(feature = "locality")]
pub use policy_delivery::locality;

/// What the attribute macros' expansions call. Not a public API: its items may change in any
/// release.
#[doc(hidden)]
pub mod __private {
    pub use std::sync::{Arc, LazyLock};

    use std::future::Future;

    use policy_runtime::{CallError, DeadlineExceeded, ResilienceError, RetryAllowance, Transient};

    /// Pins a future's output type, so `?` inside the user's body converts to the declared
    /// error.
    #[inline(always)]
    pub fn typed<T, F: Future<Output = T>>(future: F) -> F {
        future
    }

    /// An error type that can carry a refusal and an expiry back to the caller.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot carry a refusal or an expiry back to the caller",
        label = "a policy function returns `Result<T, E>` with `E: From<policy::ResilienceError> + From<policy::DeadlineExceeded>`",
        note = "implement `From<policy::ResilienceError>` (the work never ran) and `From<policy::DeadlineExceeded>` (we stopped waiting) for `{Self}`, so the caller can tell them from its own failures"
    )]
    pub trait CarriesRefusals: Sized {
        /// The refusal, as this error.
        fn refused(refusal: ResilienceError) -> Self;
        /// The expiry, as this error.
        fn expired(expired: DeadlineExceeded) -> Self;
    }

    impl<E> CarriesRefusals for E
    where
        E: From<ResilienceError> + From<DeadlineExceeded>,
    {
        #[inline(always)]
        fn refused(refusal: ResilienceError) -> Self {
            E::from(refusal)
        }
        #[inline(always)]
        fn expired(expired: DeadlineExceeded) -> Self {
            E::from(expired)
        }
    }

    /// Turns refusals and expiries into the function's own error. Built once per call by
    /// [`carrier`], the only place that states the `From` bounds, so a missing `From` is one
    /// error at the return type rather than one at every refusal point.
    #[derive(Debug)]
    pub struct Carrier<E> {
        /// A refusal, as the function's error.
        pub refused: fn(ResilienceError) -> E,
        /// An expiry, as the function's error.
        pub expired: fn(DeadlineExceeded) -> E,
    }

    impl<E> Clone for Carrier<E> {
        fn clone(&self) -> Self {
            *self
        }
    }

    impl<E> Copy for Carrier<E> {}

    impl<E> Carrier<E> {
        /// One of the three outcomes, as the function's own error.
        #[inline(always)]
        pub fn flatten(self, error: CallError<E>) -> E {
            match error {
                CallError::Refused(refusal) => (self.refused)(refusal),
                CallError::DeadlineExceeded(expired) => (self.expired)(expired),
                CallError::Failed(error) => error,
            }
        }
    }

    /// The carrier for return type `R`; checks, where the return type is written, that its
    /// error carries refusals and expiries.
    #[inline(always)]
    pub fn carrier<R>() -> Carrier<R::Error>
    where
        R: PolicyResult,
        R::Error: CarriesRefusals,
    {
        Carrier {
            refused: <R::Error as CarriesRefusals>::refused,
            expired: <R::Error as CarriesRefusals>::expired,
        }
    }

    /// The return type of a function under `#[critical]` or `#[resilient]`.
    pub trait PolicyResult {
        /// The success value.
        type Value;
        /// The function's own error.
        type Error;
    }

    impl<T, E> PolicyResult for Result<T, E> {
        type Value = T;
        type Error = E;
    }

    /// The retried function's classifier; checks, where the return type is written, that its
    /// error says which failures are worth repeating.
    #[inline(always)]
    pub fn classifier<R>() -> fn(&R::Error) -> bool
    where
        R: PolicyResult,
        R::Error: Transient,
    {
        <R::Error as Transient>::is_transient
    }

    /// What one attempt of a retried function yields.
    pub type Attempted<R> =
        Result<<R as PolicyResult>::Value, CallError<<R as PolicyResult>::Error>>;

    /// A deferred or background function's declared return type: `()` or `Result<(), E>`.
    pub trait UnitResult {
        /// Its error.
        type Error;
    }

    impl<E> UnitResult for Result<(), E> {
        type Error = E;
    }

    /// What deferred or background work yields: its own failure, a refusal or an expiry, all
    /// logged with the task's name.
    pub type ScheduledResult<R> = Result<(), CallError<<R as UnitResult>::Error>>;

    /// Deferred or background work's outcome, with its refusals told apart from its failures.
    pub async fn scheduled<E, F>(work: F) -> policy_runtime::defer::Scheduled<E>
    where
        F: Future<Output = Result<(), CallError<E>>>,
    {
        policy_runtime::defer::Scheduled(work.await)
    }

    /// A unit body as a result that cannot fail.
    pub async fn unit_ok<F: Future<Output = ()>>(body: F) -> Result<(), core::convert::Infallible> {
        body.await;
        Ok(())
    }

    /// Each attempt of a retried function gets its own copy of the arguments.
    #[diagnostic::on_unimplemented(
        message = "a retried function's arguments must be `Clone`: `{Self}` is not",
        label = "each attempt gets its own copy of this argument",
        note = "derive or implement `Clone`, or pass an `Arc`"
    )]
    pub trait RetryArg: Clone {
        /// The copy for the next attempt.
        #[inline(always)]
        fn for_attempt(&self) -> Self {
            self.clone()
        }
    }

    impl<T: Clone> RetryArg for T {}

    /// Deferred and background work outlives its caller.
    #[diagnostic::on_unimplemented(
        message = "deferred and background work must be `Send + 'static`",
        label = "this work runs after the caller returned, possibly on another thread",
        note = "take owned arguments (`String`, `Vec<T>`, `Arc<T>`) instead of borrows, and keep non-`Send` values out of the function's `.await`s"
    )]
    pub trait Deferrable: Future + Send + 'static {}

    impl<F: Future + Send + 'static> Deferrable for F {}

    /// Checks that work can be scheduled, where the function is named.
    #[inline(always)]
    pub fn deferrable<F: Deferrable>(work: F) -> F {
        work
    }

    /// The stale-if-error cache of one leaf.
    #[cfg(feature = "stale")]
    pub use policy_runtime::fallback::StaleCache;

    /// The stale-if-error cache of one leaf (`max_age` in nanoseconds), holding at most
    /// `capacity` argument sets.
    #[cfg(feature = "stale")]
    pub fn stale_cache<K, V>(max_age: core::time::Duration, capacity: u64) -> StaleCache<K, V>
    where
        K: std::hash::Hash + Eq + Send + Sync + 'static,
        V: Clone + Send + Sync + 'static,
    {
        StaleCache::new(max_age, capacity)
    }

    /// Without the `stale` feature there is no cache; using `stale_if_error` is then one error
    /// that says how to turn it on.
    #[cfg(not(feature = "stale"))]
    #[diagnostic::on_unimplemented(
        message = "`stale_if_error` needs the `stale` feature of `policy`",
        label = "stale-if-error is used here",
        note = "turn it on in Cargo.toml: `policy = {{ version = \"..\", features = [\"stale\"] }}`"
    )]
    pub trait StaleFeature {}

    /// Stands in for the cache when the `stale` feature is off; it cannot be built (see
    /// [`StaleFeature`]).
    #[cfg(not(feature = "stale"))]
    #[derive(Debug)]
    pub struct StaleCache<K, V>(core::marker::PhantomData<(K, V)>);

    #[cfg(not(feature = "stale"))]
    impl<K, V> StaleCache<K, V> {
        /// Never reached: building the cache does not compile without the feature.
        pub fn store(&self, _key: K, _value: V) {}
        /// Never reached: building the cache does not compile without the feature.
        pub fn get(&self, _key: &K) -> Option<(V, core::time::Duration)> {
            None
        }
    }

    /// Does not compile without the `stale` feature, with a message saying how to turn it on.
    #[cfg(not(feature = "stale"))]
    pub fn stale_cache<K, V>(_max_age: core::time::Duration, _capacity: u64) -> StaleCache<K, V>
    where
        K: StaleFeature,
    {
        StaleCache(core::marker::PhantomData)
    }

    /// A retry allowance from a `.policy` file's `allowance = R% + N/s` (over the default 10 s
    /// window).
    pub fn retry_allowance(ratio: f64, floor_per_second: u32) -> Arc<RetryAllowance> {
        Arc::new(RetryAllowance::new(
            std::time::Duration::from_secs(10),
            floor_per_second,
            ratio,
        ))
    }
}
