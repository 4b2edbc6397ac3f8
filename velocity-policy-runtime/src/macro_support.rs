//! What the attribute macros' expansions call, through the facade's `::velocity_policy::__private`.
//!
//! Not a public API: its items may change in any release. Each helper is a named step of the
//! expansion (`carrier.body(..)`, `breaker.observe(..)` on the mechanisms themselves) or a
//! type check that turns a missing bound into one error at the token that needs it, worded by
//! `#[diagnostic::on_unimplemented]`. None of them merges two mechanisms.

use std::future::Future;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The stale-if-error cache's static, built on first use.
pub use std::sync::LazyLock;

/// The mechanisms' settings, as the expansions write them in a `static`'s initializer: one
/// plain value per mechanism, from `velocity-policy-model`.
pub mod config {
    pub use crate::breaker::{BreakerConfig, OpenAfter, Sharing};
    pub use crate::bulkhead::{AdaptiveLimit, BulkheadConfig};
    pub use crate::deadline::DeadlineConfig;
    pub use crate::hedge::{HedgeConfig, HedgeDelay};
    pub use crate::limiter::{FailMode, RateLimitConfig};
    pub use crate::retry::{AllowanceConfig, Backoff, RetryConfig};
    pub use crate::shedding::SheddingConfig;
}

use crate::breaker::{Breaker, BreakerConfig};
use crate::bulkhead::{Bulkhead, BulkheadConfig};
use crate::deadline::{DeadlineConfig, OperationDeadline};
use crate::error::{CallError, DeadlineExceeded, ResilienceError};
use crate::fallback::Fallback;
use crate::hedge::{Hedge, HedgeConfig};
use crate::isolate::{IsolatedPool, PollMonitor, PoolKind};
use crate::limiter::RateLimitConfig;
use crate::registry::Registry;
use crate::retry::{ByTransient, RetryConfig, RetryPolicy, Transient};
use crate::shedding::{Shedder, SheddingConfig};

/// Pins a future's output type, so `?` inside the user's body converts to the declared
/// error.
#[inline]
pub fn typed<T, F: Future<Output = T>>(future: F) -> F {
    future
}

/// A mechanism the global [`Registry`] builds once under a name, from settings the
/// expansion declares.
pub trait Register: 'static {
    /// What the expansion declares: plain data, built in a `static`'s initializer.
    type Settings: Copy + Send + Sync + std::fmt::Debug + 'static;
    /// The settings before any is declared.
    const NONE: Self::Settings;
    /// What the registry calls this kind in a [`Conflict`](crate::registry::Conflict).
    const KIND: &'static str;
    /// What the registry hands back.
    type Handle: Send + Sync + 'static;
    /// Registers (or finds) the mechanism `name` in the global registry, its builder given
    /// `settings`.
    fn register(name: &'static str, settings: Self::Settings) -> Self::Handle;
}

/// Declares `settings` for `name` on behalf of `origin` (a refused second configuration is
/// logged and listed by the registry), then registers or finds the mechanism.
fn declare_and_register<T: Register>(
    name: &'static str,
    origin: &'static str,
    settings: T::Settings,
) -> T::Handle {
    // A conflict is logged and kept by `declare`; the mechanism in use stays the first one.
    let _ = Registry::global().declare(T::KIND, name, origin, format_args!("{settings:?}"));
    T::register(name, settings)
}

/// One named mechanism of one annotated function, kept in a `static`: its name, the function
/// that declares it and its settings, [declared](Registry::declare) and registered in the
/// global [`Registry`] (through the mechanism's own builder) the first time it is used, then
/// one atomic load per call. A second function that declares other settings for the same name
/// is refused loudly (see [`Conflict`](crate::registry::Conflict)).
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_runtime::Bulkhead;
/// use velocity_policy_runtime::__macro_support::{Handle, config};
///
/// static SEARCH: Handle<Bulkhead> = Handle::bulkhead(
///     "docs-search",
///     "docs::search",
///     config::BulkheadConfig::new(4).with_max_queued(2),
/// );
/// let search: &Bulkhead = &SEARCH;
/// assert_eq!(search.max_concurrent(), 4);
/// ```
pub struct Handle<T: Register> {
    name: &'static str,
    origin: &'static str,
    settings: T::Settings,
    handle: OnceLock<T::Handle>,
}

impl<T: Register> std::fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("name", &self.name)
            .field("origin", &self.origin)
            .field("registered", &self.handle.get().is_some())
            .finish()
    }
}

impl<T: Register> Handle<T> {
    /// The mechanism `name`, declared by `origin` (the annotated function's path), registered on
    /// first use. The expansion names the kind instead
    /// (`Handle::breaker("search")`), so the type is known before the first setting.
    pub const fn new(name: &'static str, origin: &'static str) -> Self {
        Self::declared(name, origin, T::NONE)
    }

    /// The mechanism `name`, declared by `origin` with `settings`.
    pub const fn declared(name: &'static str, origin: &'static str, settings: T::Settings) -> Self {
        Self {
            name,
            origin,
            settings,
            handle: OnceLock::new(),
        }
    }
}

impl<T: Register> Deref for Handle<T> {
    type Target = T::Handle;

    #[inline]
    fn deref(&self) -> &T::Handle {
        // Tests only (feature `test-registry`): a scope entered on this thread has mechanisms
        // of its own. A normal build has none of this: one atomic load.
        #[cfg(feature = "test-registry")]
        if let Some(scope) = crate::registry::current_scope() {
            return self.in_scope(scope);
        }
        match self.handle.get() {
            Some(handle) => handle,
            None => self.register(),
        }
    }
}

impl<T: Register> Handle<T> {
    /// The first use: declared and registered, out of the caller's way.
    #[cold]
    #[inline(never)]
    fn register(&self) -> &T::Handle {
        self.handle
            .get_or_init(|| declare_and_register::<T>(self.name, self.origin, self.settings))
    }

    /// The mechanism of this handle in `scope` (feature `test-registry`): declared and
    /// registered in the scope's registry on first use there, like the static's in the
    /// global one.
    #[cfg(feature = "test-registry")]
    #[cold]
    #[inline(never)]
    fn in_scope(&self, scope: crate::registry::TestScope) -> &'static T::Handle {
        let key = std::ptr::from_ref(self) as usize;
        scope.resolve(key, || {
            // `Registry::global()` is the scope's registry here.
            declare_and_register::<T>(self.name, self.origin, self.settings)
        })
    }
}

impl Register for Breaker {
    const KIND: &'static str = "breaker";
    type Settings = BreakerConfig;
    const NONE: BreakerConfig = BreakerConfig::DEFAULT;
    type Handle = Breaker;
    fn register(name: &'static str, config: BreakerConfig) -> Breaker {
        Registry::global().breaker(name, |breaker| breaker.config(config))
    }
}

impl Handle<Breaker> {
    /// The breaker `name`, declared by `origin` with `config`.
    pub const fn breaker(name: &'static str, origin: &'static str, config: BreakerConfig) -> Self {
        Self::declared(name, origin, config)
    }
}

/// Slots, queue places and kind of an isolated pool.
#[derive(Debug, Clone, Copy)]
pub struct SlotSettings {
    max_concurrent: Option<u32>,
    max_queued: Option<u32>,
    kind: Option<PoolKind>,
}

const NO_SLOTS: SlotSettings = SlotSettings {
    max_concurrent: None,
    max_queued: None,
    kind: None,
};

impl Register for Bulkhead {
    const KIND: &'static str = "bulkhead";
    type Settings = BulkheadConfig;
    const NONE: BulkheadConfig = BulkheadConfig::DEFAULT;
    type Handle = Bulkhead;
    fn register(name: &'static str, config: BulkheadConfig) -> Bulkhead {
        Registry::global().bulkhead(name, |bulkhead| bulkhead.config(config))
    }
}

impl Handle<Bulkhead> {
    /// The bulkhead `name`, declared by `origin` with `config`.
    pub const fn bulkhead(
        name: &'static str,
        origin: &'static str,
        config: BulkheadConfig,
    ) -> Self {
        Self::declared(name, origin, config)
    }
}

impl Register for IsolatedPool {
    const KIND: &'static str = "isolated pool";
    type Settings = SlotSettings;
    const NONE: SlotSettings = NO_SLOTS;
    type Handle = IsolatedPool;
    fn register(name: &'static str, settings: SlotSettings) -> IsolatedPool {
        Registry::global().isolated_pool(name, |mut pool| {
            if let Some(slots) = settings.max_concurrent {
                pool = pool.max_concurrent(slots);
            }
            if let Some(places) = settings.max_queued {
                pool = pool.max_queued(places);
            }
            if let Some(kind) = settings.kind {
                pool = pool.kind(kind);
            }
            pool
        })
    }
}

/// The slots and kind of an [`IsolatedPoolBuilder`](crate::isolate::IsolatedPoolBuilder),
/// declared in a `static`.
impl Handle<IsolatedPool> {
    /// The isolated pool `name`, declared by `origin`.
    pub const fn pool(name: &'static str, origin: &'static str) -> Self {
        Self::new(name, origin)
    }

    /// [`IsolatedPoolBuilder::max_concurrent`](crate::isolate::IsolatedPoolBuilder::max_concurrent).
    pub const fn max_concurrent(mut self, slots: u32) -> Self {
        self.settings.max_concurrent = Some(slots);
        self
    }

    /// [`IsolatedPoolBuilder::max_queued`](crate::isolate::IsolatedPoolBuilder::max_queued).
    pub const fn max_queued(mut self, places: u32) -> Self {
        self.settings.max_queued = Some(places);
        self
    }

    /// [`IsolatedPoolBuilder::kind`](crate::isolate::IsolatedPoolBuilder::kind).
    pub const fn kind(mut self, kind: PoolKind) -> Self {
        self.settings.kind = Some(kind);
        self
    }

    /// `pool = "rayon"`: [`PoolKind::Rayon`], which compiles only with the `rayon` feature
    /// (`F` is `()`, which is a [`RayonFeature`] only then; the error says how to turn it on).
    pub const fn rayon<F: RayonFeature>(self) -> Self {
        self.kind(PoolKind::Rayon)
    }
}

pub use crate::isolate::dedicated::RayonFeature;

impl Register for RetryPolicy {
    const KIND: &'static str = "retry policy";
    type Settings = RetryConfig;
    const NONE: RetryConfig = RetryConfig::DEFAULT;
    type Handle = Arc<RetryPolicy>;
    fn register(name: &'static str, config: RetryConfig) -> Arc<RetryPolicy> {
        Registry::global().retry(name, |retry| retry.config(config))
    }
}

impl Handle<RetryPolicy> {
    /// The retry policy `name`, declared by `origin` with `config`.
    pub const fn retry(name: &'static str, origin: &'static str, config: RetryConfig) -> Self {
        Self::declared(name, origin, config)
    }
}

impl Register for Hedge {
    const KIND: &'static str = "hedge";
    type Settings = HedgeConfig;
    const NONE: HedgeConfig = HedgeConfig::DEFAULT;
    type Handle = Arc<Hedge>;
    fn register(name: &'static str, config: HedgeConfig) -> Arc<Hedge> {
        Registry::global().hedge(name, |hedge| hedge.config(config))
    }
}

impl Handle<Hedge> {
    /// The hedging policy `name`, declared by `origin` with `config`.
    pub const fn hedge(name: &'static str, origin: &'static str, config: HedgeConfig) -> Self {
        Self::declared(name, origin, config)
    }
}

/// The rate limiter an expansion's handle holds: [`RateLimiter`](crate::limiter::RateLimiter).
pub type RateLimit = crate::limiter::RateLimiter;

impl Register for crate::limiter::RateLimiter {
    const KIND: &'static str = "rate limiter";
    type Settings = RateLimitConfig;
    const NONE: RateLimitConfig = RateLimitConfig::new(1, Duration::from_secs(1));
    type Handle = crate::limiter::RateLimiter;
    fn register(name: &'static str, config: RateLimitConfig) -> Self::Handle {
        Registry::global().rate_limiter(name, config.limit, config.per, |limiter| {
            limiter.config(config)
        })
    }
}

impl Handle<RateLimit> {
    /// The rate limiter `name`, declared by `origin` with `config`.
    pub const fn ratelimit(
        name: &'static str,
        origin: &'static str,
        config: RateLimitConfig,
    ) -> Self {
        Self::declared(name, origin, config)
    }
}

impl Register for Shedder {
    const KIND: &'static str = "shedder";
    type Settings = SheddingConfig;
    const NONE: SheddingConfig = SheddingConfig::DEFAULT;
    type Handle = Arc<Shedder>;
    fn register(name: &'static str, config: SheddingConfig) -> Arc<Shedder> {
        Registry::global().shedder(name, config)
    }
}

impl Handle<Shedder> {
    /// The shedder `name`, declared by `origin` with `config`.
    pub const fn shedder(name: &'static str, origin: &'static str, config: SheddingConfig) -> Self {
        Self::declared(name, origin, config)
    }
}

impl Register for Fallback {
    const KIND: &'static str = "fallback";
    /// The function that answers (or `stale-if-error`).
    type Settings = &'static str;
    const NONE: &'static str = "";
    type Handle = Arc<Fallback>;
    fn register(operation: &'static str, answered_by: &'static str) -> Arc<Fallback> {
        Registry::global().fallback(operation, answered_by)
    }
}

impl Handle<Fallback> {
    /// The fallback record of the operation `name`, declared by `origin`.
    pub const fn fallback(name: &'static str, origin: &'static str) -> Self {
        Self::new(name, origin)
    }

    /// The function that answers, or `stale-if-error`.
    pub const fn answered_by(mut self, answered_by: &'static str) -> Self {
        self.settings = answered_by;
        self
    }
}

impl Register for PollMonitor {
    const KIND: &'static str = "poll monitor";
    /// The budget per poll.
    type Settings = Duration;
    const NONE: Duration = Duration::ZERO;
    type Handle = Arc<PollMonitor>;
    fn register(name: &'static str, budget: Duration) -> Arc<PollMonitor> {
        Registry::global().poll_monitor(name, budget)
    }
}

impl Handle<PollMonitor> {
    /// The poll monitor of the operation `name`, declared by `origin`.
    pub const fn poll_monitor(name: &'static str, origin: &'static str) -> Self {
        Self::new(name, origin)
    }

    /// The longest one poll may take before it is reported.
    pub const fn budget(mut self, budget: Duration) -> Self {
        self.settings = budget;
        self
    }
}

impl Register for OperationDeadline {
    const KIND: &'static str = "operation";
    type Settings = DeadlineConfig;
    const NONE: DeadlineConfig = DeadlineConfig::DEFAULT;
    type Handle = Arc<OperationDeadline>;
    fn register(name: &'static str, config: DeadlineConfig) -> Self::Handle {
        Registry::global().operation_deadline(name, config.deadline, config.min_budget)
    }
}

impl Handle<OperationDeadline> {
    /// The operation `name` (made unique by its module path), declared by `origin` with
    /// `config`.
    pub const fn operation(
        name: &'static str,
        origin: &'static str,
        config: DeadlineConfig,
    ) -> Self {
        Self::declared(name, origin, config)
    }
}

/// An error type that can carry a refusal and an expiry back to the caller.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot carry a refusal or an expiry back to the caller",
    label = "a policy function returns `Result<T, E>` with `E: From<velocity_policy::ResilienceError> + From<velocity_policy::DeadlineExceeded>`",
    note = "implement `From<velocity_policy::ResilienceError>` (the work never ran) and `From<velocity_policy::DeadlineExceeded>` (we stopped waiting) for `{Self}`, so the caller can tell them from its own failures"
)]
pub trait CarriesRefusals: Sized {
    /// The refusal, as this error.
    fn refused(refusal: ResilienceError) -> Self;
    /// The expiry, as this error.
    fn expired(expired: DeadlineExceeded) -> Self;
}

// `do_not_recommend`: a type missing either `From` (or both) is one error, in the words above,
// instead of one per missing impl followed by rustc's list of the type's other `From` impls.
#[diagnostic::do_not_recommend]
impl<E> CarriesRefusals for E
where
    E: From<ResilienceError> + From<DeadlineExceeded>,
{
    #[inline]
    fn refused(refusal: ResilienceError) -> Self {
        E::from(refusal)
    }
    #[inline]
    fn expired(expired: DeadlineExceeded) -> Self {
        E::from(expired)
    }
}

/// The return type `R` of a function under `#[critical]` or `#[resilient]`, and the way its
/// refusals and expiries become its own error. Built once per call by [`carrier`], the only
/// place that states the `From` bounds, so a missing `From` is one error at the return type
/// rather than one at every refusal point.
pub struct Carrier<R: PolicyResult> {
    /// A refusal, as the function's error.
    pub refused: fn(ResilienceError) -> R::Error,
    /// An expiry, as the function's error.
    pub expired: fn(DeadlineExceeded) -> R::Error,
}

impl<R: PolicyResult> std::fmt::Debug for Carrier<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Carrier")
    }
}

impl<R: PolicyResult> Clone for Carrier<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R: PolicyResult> Copy for Carrier<R> {}

impl<R: PolicyResult> Carrier<R> {
    /// The function's body, its output pinned to the declared return type (so `?` inside it
    /// converts to the declared error).
    #[inline]
    pub fn body<F>(self, body: F) -> F
    where
        F: Future<Output = Result<R::Value, R::Error>>,
    {
        body
    }

    /// One attempt of a retried function, its output pinned to a success or a
    /// [`CallError`] (so `?` on a refusal converts).
    #[inline]
    pub fn attempt<F>(self, attempt: F) -> F
    where
        F: Future<Output = Attempted<R>>,
    {
        attempt
    }

    /// One of the three outcomes, as the function's own error.
    #[inline]
    pub fn flatten(self, error: CallError<R::Error>) -> R::Error {
        match error {
            CallError::Refused(refusal) => (self.refused)(refusal),
            CallError::DeadlineExceeded(expired) => (self.expired)(expired),
            CallError::Failed(error) => error,
        }
    }

    /// The sequence's outcome as the function's return value.
    #[inline]
    pub fn outcome(self, outcome: Attempted<R>) -> Result<R::Value, R::Error> {
        outcome.map_err(|error| self.flatten(error))
    }

    /// A run under a deadline as the function's return value: its own result, or the expiry
    /// as its error.
    #[inline]
    pub fn ran(
        self,
        ran: Result<Result<R::Value, R::Error>, DeadlineExceeded>,
    ) -> Result<R::Value, R::Error> {
        match ran {
            Ok(result) => result,
            Err(expired) => Err((self.expired)(expired)),
        }
    }
}

/// The carrier for return type `R`; checks, where the return type is written, that its error
/// carries refusals and expiries.
#[inline]
pub fn carrier<R>() -> Carrier<R>
where
    R: PolicyResult,
    R::Error: CarriesRefusals,
{
    Carrier {
        refused: refused_call::<R::Error>,
        expired: expired_call::<R::Error>,
    }
}

/// A refusal as the call's error, noted as its outcome for its metrics (`refused`, by kind).
#[inline]
fn refused_call<E: CarriesRefusals>(refusal: ResilienceError) -> E {
    crate::observe::call_refused(refusal.kind());
    E::refused(refusal)
}

/// An expiry as the call's error, noted as its outcome for its metrics (`expired`).
#[inline]
fn expired_call<E: CarriesRefusals>(expired: DeadlineExceeded) -> E {
    crate::observe::call_expired();
    E::expired(expired)
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

/// The retried function's classifier (its error's [`Transient`], pushback included); checks,
/// where the return type is written, that its error says which failures are worth repeating.
#[inline]
pub fn classifier<R>() -> ByTransient<R::Error>
where
    R: PolicyResult,
    R::Error: Transient,
{
    ByTransient::new()
}

/// What one attempt of a retried function yields.
pub type Attempted<R> = Result<<R as PolicyResult>::Value, CallError<<R as PolicyResult>::Error>>;

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

/// The error of deferred or background work is logged, so it must be printable.
#[diagnostic::on_unimplemented(
    message = "the error of deferred or background work must implement `Display`: `{Self}` does not",
    label = "nobody awaits this work: an `Err` is logged with the task's name, so its error must be printable",
    note = "implement `std::fmt::Display` for `{Self}` (thiserror's `#[error(\"...\")]` does it)"
)]
pub trait LoggedError: std::fmt::Display {}

impl<E: std::fmt::Display> LoggedError for E {}

/// A deferred function's error with the way to print it, taken where its `Display` was checked
/// ([`logged`]), so that the missing `Display` is one error there, in our words.
pub struct Logged<E> {
    error: E,
    show: fn(&E, &mut std::fmt::Formatter<'_>) -> std::fmt::Result,
}

impl<E> std::fmt::Display for Logged<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (self.show)(&self.error, f)
    }
}

impl<E> std::fmt::Debug for Logged<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (self.show)(&self.error, f)
    }
}

/// How a deferred function's error is printed; checks, where the function is named, that it
/// can be (the error's `Display`), so that a missing `Display` is one error, in our words.
#[inline]
pub fn logged<E: LoggedError>() -> fn(&E, &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    <E as std::fmt::Display>::fmt
}

/// Deferred or background work's outcome, with its refusals told apart from its failures.
pub async fn scheduled<E, F>(
    work: F,
    show: fn(&E, &mut std::fmt::Formatter<'_>) -> std::fmt::Result,
) -> crate::defer::Scheduled<Logged<E>>
where
    F: Future<Output = Result<(), CallError<E>>>,
{
    crate::defer::Scheduled(work.await.map_err(|error| match error {
        CallError::Failed(error) => CallError::Failed(Logged { error, show }),
        CallError::Refused(refusal) => CallError::Refused(refusal),
        CallError::DeadlineExceeded(expired) => CallError::DeadlineExceeded(expired),
    }))
}

/// A unit body as a result that cannot fail.
pub async fn unit_ok<F: Future<Output = ()>>(body: F) -> Result<(), std::convert::Infallible> {
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
    #[inline]
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
#[inline]
pub fn deferrable<F: Deferrable>(work: F) -> F {
    work
}

/// The stale-if-error cache of one operation.
#[cfg(feature = "stale")]
pub use crate::fallback::StaleCache;

/// The stale-if-error cache of one operation, keeping each result at most `max_age`, holding
/// at most `capacity` argument sets.
#[cfg(feature = "stale")]
pub fn stale_cache<K, V>(max_age: Duration, capacity: u64) -> StaleCache<K, V>
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
pub struct StaleCache<K, V>(std::marker::PhantomData<(K, V)>);

#[cfg(not(feature = "stale"))]
impl<K, V> StaleCache<K, V> {
    /// Never reached: building the cache does not compile without the feature.
    pub fn store(&self, _key: K, _value: V) {}
    /// Never reached: building the cache does not compile without the feature.
    pub fn get(&self, _key: &K) -> Option<(V, Duration)> {
        None
    }
}

/// Does not compile without the `stale` feature, with a message saying how to turn it on.
#[cfg(not(feature = "stale"))]
pub fn stale_cache<K, V>(_max_age: Duration, _capacity: u64) -> StaleCache<K, V>
where
    K: StaleFeature,
{
    StaleCache(std::marker::PhantomData)
}

/// `tracing`, for the call's span in the expansion (`::velocity_policy::__private::tracing::info_span!`).
pub use tracing;

pub use crate::calls::Calls;
pub use crate::observe::CallOutput;
pub use crate::traced::Traced;

/// One call of the operation of `calls` (the expansion's `static`, one per annotated
/// function), polled inside `span` (the expansion's `info_span!` named after the operation)
/// with the operation in scope for the mechanisms' events (their `operation` field), and
/// measured for its metrics (feature `metrics`).
#[inline]
pub fn traced<F>(calls: &'static Calls, span: tracing::Span, call: F) -> Traced<F>
where
    F: Future,
    F::Output: CallOutput,
{
    Traced::new(calls, span, call)
}

/// Work on a durable queue is encoded when enqueued and decoded by a worker, perhaps on
/// another instance.
#[diagnostic::on_unimplemented(
    message = "the arguments of work on a queue must be `Serialize` and `Deserialize`: `{Self}` is not",
    label = "these arguments are encoded (serde, JSON) and run later by whichever instance takes the task",
    note = "derive `serde::Serialize` and `serde::Deserialize` for each argument's type, and make them owned (`String` for `&str`)"
)]
pub trait QueueArgs:
    serde_core::Serialize + serde_core::de::DeserializeOwned + Send + 'static
{
}

impl<A: serde_core::Serialize + serde_core::de::DeserializeOwned + Send + 'static> QueueArgs for A {}

/// The queue of one `#[background(queue = "...")]` function: looked up among the
/// [installed](crate::queue::install) queues until one is found, then kept.
#[derive(Debug)]
pub struct QueueSlot {
    name: &'static str,
    lookup: crate::queue::Lookup,
}

impl QueueSlot {
    /// The slot of queue `name`.
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            lookup: crate::queue::Lookup::new(),
        }
    }

    /// Enqueues `args` as a task of `operation` when the queue is installed (a refusal is
    /// counted and logged by the queue), and gives them back when it is not, for the
    /// in-process pool.
    pub fn enqueue<A: QueueArgs>(&'static self, operation: &'static str, args: A) -> Option<A> {
        self.lookup.enqueue(self.name, operation, args)
    }
}

/// What a worker runs for one `#[background(queue = "...")]` function.
pub fn queue_handler<A, F, Fut>(operation: &'static str, work: F) -> crate::queue::Handler
where
    A: QueueArgs,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: crate::defer::DeferredOutcome,
{
    crate::queue::Handler::new(operation, work)
}

// Fault injection's step of the attempt: `Handle::chaos(..)`, then per attempt, after the
// breaker's check and the bulkhead's admission, `chaos.draw(breaker)?`, the body run through
// `injection.run(body)` under the attempt's deadline, and `injection.observe(breaker, ran)`.
// Emitted only for an operation that names a drill. With the `chaos` feature, the registry's
// drills; without it, a stand-in whose draw does not compile and says how to turn it on.
#[cfg(feature = "chaos")]
#[path = "chaos/macro_hook/on.rs"]
mod chaos_hook;
#[cfg(not(feature = "chaos"))]
#[path = "chaos/macro_hook/off.rs"]
mod chaos_hook;
pub use chaos_hook::*;
