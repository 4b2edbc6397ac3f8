//! Is this failure worth repeating, and out of whose budget? Bounded retry.
//!
//! The easiest mechanism to add and the easiest to get wrong, and both mistakes multiply:
//! three attempts at a "reasonable" 30 s timeout is a 90 s request; three clients each
//! retrying three times is nine calls at the moment the dependency can least take them. The
//! rules here stop both:
//!
//! - **One budget.** [`retry_within`] takes the request's [`Deadline`] first: every attempt is
//!   a child of it, and no backoff sleep starts that would end past it. A retry can never
//!   extend the request.
//! - **Full jitter.** The pause before retry `n` is a uniform draw in
//!   `[0, min(cap, base × 2ⁿ))` ([`full_jitter`]): clients that failed together do not retry
//!   together.
//! - **Only what is worth repeating.** A per-attempt expiry is retryable (that is what the
//!   attempt timeout is for); a [`ResilienceError`] never is (the
//!   system already decided not to try); the function's own error decides through
//!   [`Transient`] or a classifier.
//! - **Never sooner than the dependency asked.** An error that carries a [`Pushback`] (gRPC's
//!   `grpc-retry-pushback-ms`, read by [`Transient::pushback`]) makes the next pause at least
//!   that long, or ends the retrying when it says not to retry. It is input like any other:
//!   a pause it asks for must still end before the deadline, and the attempts and the
//!   allowance bound it as they bound every retry.
//! - **Only idempotent work.** The operation is an [`Idempotent`], which only an explicit
//!   [`Idempotent::claim`] constructs: a network timeout is precisely when the first attempt
//!   may have succeeded unseen.
//! - **An allowance across requests.** A per-request bound is not enough: retries also draw
//!   from a [`RetryAllowance`] shared by every request through the policy, so retries add at
//!   most a share of the calls recently made (20% plus 10 per second by default, like Finagle's
//!   and tower's retry budgets). An exhausted allowance ends the retrying with the last error.
//!   A [hedge](crate::hedge) of the same operation withdraws from the same allowance
//!   ([`hedge_within_retry`](crate::hedge::hedge_within_retry)): one budget for both.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::{CallError, Deadline, Idempotent, RetryPolicy, retry_within};
//! use velocity_policy_runtime::retry::Transient;
//!
//! #[derive(Debug)]
//! struct Flaky;
//! impl Transient for Flaky {
//!     fn is_transient(&self) -> bool { true }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let policy = RetryPolicy::builder("transient")
//!     .attempts(3)
//!     .backoff(Duration::from_millis(50), Duration::from_secs(1))
//!     .attempt_timeout(Duration::from_millis(200))
//!     .build();
//! let deadline = Deadline::after(Duration::from_secs(2));
//!
//! let mut calls = 0;
//! let result: Result<u32, CallError<Flaky>> = retry_within(
//!     &deadline,
//!     &policy,
//!     Idempotent::claim(|attempt| {
//!         calls += 1;
//!         async move {
//!             if attempt.number < 3 { Err(CallError::Failed(Flaky)) } else { Ok(attempt.number) }
//!         }
//!     }),
//! )
//! .await;
//! assert_eq!(result.unwrap(), 3);
//! assert_eq!(calls, 3);
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use crate::deadline::{Deadline, Run, Scope};
use crate::error::{CallError, DeadlineExceeded, RefusalReason, ResilienceError};
use crate::instruments::RetryMetrics;
use crate::observe;
use crate::tuning::{self, Tuned};
use crate::window::{Clock, Window, saturating_nanos};

/// A retry policy's settings, its backoff and its allowance's numbers: defined once, in
/// `velocity-policy-model`, for the `.policy` language, the attribute macros, this runtime and
/// its overrides.
pub use velocity_policy_model::retry::{AllowanceConfig, Backoff, RetryConfig};

/// Whether an error is worth retrying: the dependency may answer differently next time.
///
/// Implement it for your error type, or pass a classifier to [`retry_within_by`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say which of its failures are worth retrying",
    label = "retried, so its error must implement `velocity_policy::Transient`",
    note = "implement `velocity_policy::Transient` for `{Self}`: `is_transient` is true for a timeout or a 503, false for a 400 or a constraint violation"
)]
pub trait Transient {
    /// True when another attempt could succeed (a timeout, a reset connection, a 503), false
    /// when it would fail the same way (a 400, a constraint violation).
    fn is_transient(&self) -> bool;

    /// What the dependency said, with this error, about trying again: not sooner than a wait,
    /// or not at all (gRPC's `grpc-retry-pushback-ms`). None by default: the backoff decides.
    /// Read only for an error [`is_transient`](Transient::is_transient) calls worth repeating.
    fn pushback(&self) -> Option<Pushback> {
        None
    }
}

/// What a dependency said, with a failure, about trying again ([`Transient::pushback`]):
/// gRPC's server pushback (its retry design, A6), as [`grpc`](crate::grpc) reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pushback {
    /// Not sooner than this after the failure: the next pause is at least this long, and no
    /// retry starts when it would end past the deadline.
    After(Duration),
    /// Not at all (a negative or unparsable pushback): the retrying stops with this error.
    Never,
}

/// How a retry loop reads the function's own errors: whether one is worth repeating, and what
/// the dependency said about when. Any `Fn(&E) -> bool` is one (it never reads a pushback);
/// [`ByTransient`] asks the error's own [`Transient`].
pub trait Classifier<E> {
    /// True when another attempt could succeed.
    fn is_transient(&self, error: &E) -> bool;

    /// The dependency's [`Pushback`] with `error`, if it sent one.
    fn pushback(&self, error: &E) -> Option<Pushback> {
        let _ = error;
        None
    }
}

impl<E, F: Fn(&E) -> bool> Classifier<E> for F {
    #[inline]
    fn is_transient(&self, error: &E) -> bool {
        self(error)
    }
}

/// The [`Classifier`] that asks the error's own [`Transient`] implementation, its pushback
/// included: what [`retry_within`] and the attribute macros use. It holds `E`'s two methods,
/// so only its constructor asks for `E: Transient`: an error type without it is one
/// compile error there, not another at every loop that takes a classifier.
pub struct ByTransient<E> {
    is_transient: fn(&E) -> bool,
    pushback: fn(&E) -> Option<Pushback>,
}

impl<E: Transient> ByTransient<E> {
    /// The classifier of `E`.
    pub const fn new() -> Self {
        Self {
            is_transient: E::is_transient,
            pushback: E::pushback,
        }
    }
}

impl<E: Transient> Default for ByTransient<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> Clone for ByTransient<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for ByTransient<E> {}

impl<E> fmt::Debug for ByTransient<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ByTransient")
    }
}

impl<E> Classifier<E> for ByTransient<E> {
    #[inline]
    fn is_transient(&self, error: &E) -> bool {
        (self.is_transient)(error)
    }

    #[inline]
    fn pushback(&self, error: &E) -> Option<Pushback> {
        (self.pushback)(error)
    }
}

impl Transient for ResilienceError {
    /// Never: a refusal means the system already decided not to try.
    fn is_transient(&self) -> bool {
        false
    }
}

impl Transient for DeadlineExceeded {
    /// Yes: a per-attempt expiry is what attempt timeouts are for.
    fn is_transient(&self) -> bool {
        true
    }
}

impl<E: Transient> Transient for CallError<E> {
    fn is_transient(&self) -> bool {
        match self {
            Self::Refused(_) => false,
            Self::DeadlineExceeded(_) => true,
            Self::Failed(e) => e.is_transient(),
        }
    }

    /// The function's own error's; a refusal and an expiry carry none.
    fn pushback(&self) -> Option<Pushback> {
        match self {
            Self::Failed(e) => e.pushback(),
            Self::Refused(_) | Self::DeadlineExceeded(_) => None,
        }
    }
}

impl Transient for std::convert::Infallible {
    /// An error that cannot exist is never retried.
    fn is_transient(&self) -> bool {
        match *self {}
    }
}

impl Transient for std::io::Error {
    /// Timeouts, resets, refusals, aborts and interruptions are transient; the rest are not.
    fn is_transient(&self) -> bool {
        use std::io::ErrorKind as K;
        matches!(
            self.kind(),
            K::TimedOut
                | K::ConnectionReset
                | K::ConnectionRefused
                | K::ConnectionAborted
                | K::BrokenPipe
                | K::Interrupted
                | K::WouldBlock
                | K::UnexpectedEof
        )
    }
}

/// An operation its author claims is idempotent: safe to run more than once.
///
/// Only [`Idempotent::claim`] constructs one, so retrying is a decision someone wrote down, in
/// code with or without the attribute macros.
#[derive(Clone)]
pub struct Idempotent<F> {
    pub(crate) op: F,
}

impl<F> fmt::Debug for Idempotent<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Idempotent(..)")
    }
}

impl<F> Idempotent<F> {
    /// Claims that `op` is safe to run more than once: a second run after a first that
    /// succeeded unseen does no harm.
    pub fn claim<Fut>(op: F) -> Self
    where
        F: FnMut(Attempt) -> Fut,
    {
        Self { op }
    }

    /// The operation back.
    pub fn into_inner(self) -> F {
        self.op
    }
}

/// What an attempt is told: its number (from 1) and its own deadline (a child of the
/// request's, also in scope as [`Deadline::current`] while it runs).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Attempt {
    /// 1 for the first attempt.
    pub number: u32,
    /// The attempt's deadline.
    pub deadline: Deadline,
}

/// The pause before retry `n` (0 for the first retry): a uniform draw in
/// `[0, min(cap, base × 2ⁿ))`. Zero when that range is empty.
pub fn full_jitter(base: Duration, cap: Duration, n: u32) -> Duration {
    let upper = saturating_nanos(base)
        .saturating_mul(1u64.checked_shl(n).unwrap_or(u64::MAX))
        .min(saturating_nanos(cap));
    if upper == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(rand::random_range(0..upper))
}

/// Retries shared across requests: each call deposits, each retry withdraws, and a retry is
/// allowed while retries in the window stay below `ratio × calls + min_per_sec × ttl`: the SRE
/// book's retry budget, as tower's `TpsBudget` keeps it, with the counts a dashboard reads.
///
/// Calls and retries are counted in sliding windows of atomic buckets: a deposit is one atomic
/// update, never a lock. Concurrent withdrawals that race for the last unit may overshoot by
/// the number of racing threads; the allowance still bounds retries to a share of traffic.
pub struct RetryAllowance {
    ttl: Duration,
    min_per_sec: u32,
    ratio: f64,
    clock: Clock,
    /// Retries (withdrawals) in `hits`, calls (deposits) in `calls`.
    window: Window,
}

impl fmt::Debug for RetryAllowance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryAllowance")
            .field("ttl", &self.ttl)
            .field("min_per_sec", &self.min_per_sec)
            .field("ratio", &self.ratio)
            .finish()
    }
}

impl Default for RetryAllowance {
    /// Retries may add 20% of the calls of the last 10 s, plus 10 per second
    /// ([`AllowanceConfig::DEFAULT`]).
    fn default() -> Self {
        Self::from_config(AllowanceConfig::DEFAULT)
    }
}

/// A point-in-time view of a retry allowance.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RetryAllowanceSnapshot {
    /// Calls deposited in the window.
    pub calls: u64,
    /// Retries withdrawn in the window.
    pub retries: u64,
    /// Retries the window allows in all.
    pub allowed: u64,
}

impl RetryAllowance {
    /// The window calls and retries are counted in unless told otherwise
    /// ([`AllowanceConfig::DEFAULT_WINDOW`]: 10 s).
    pub const DEFAULT_WINDOW: Duration = AllowanceConfig::DEFAULT_WINDOW;

    /// An allowance with `config`'s numbers: its ratio of the calls seen in its window, plus
    /// its floor per second of the window.
    pub fn from_config(config: AllowanceConfig) -> Self {
        Self::new(config.window, config.floor_per_second, config.ratio)
    }

    /// Its numbers.
    pub fn config(&self) -> AllowanceConfig {
        AllowanceConfig::new(self.ratio, self.min_per_sec).with_window(self.ttl)
    }

    /// Retries may add `ratio` of the calls seen in the last `ttl`, plus `min_per_sec` per
    /// second of `ttl`. A negative or NaN ratio counts as 0.
    pub fn new(ttl: Duration, min_per_sec: u32, ratio: f64) -> Self {
        let ratio = if ratio.is_nan() { 0.0 } else { ratio.max(0.0) };
        Self {
            ttl,
            min_per_sec,
            ratio,
            clock: Clock::new(),
            window: Window::new(ttl),
        }
    }

    /// Counts one call (a first attempt).
    #[inline]
    pub fn deposit(&self) {
        self.window.record_call(self.clock.now_nanos());
    }

    /// Counts one call made at `at` (a moment the caller already read, such as when the
    /// call's deadline was made: no clock read here).
    #[inline]
    pub(crate) fn deposit_as_of(&self, at: Instant) {
        self.window.record_call(self.clock.nanos_at(at));
    }

    /// Counts one call made `before_nanos` before `at`: the moment a deadline expiring at `at`
    /// with a budget of `before_nanos` was made, without an instant subtraction to find it.
    #[inline]
    pub(crate) fn deposit_before(&self, at: Instant, before_nanos: u64) {
        self.window
            .record_call(self.clock.nanos_at(at).saturating_sub(before_nanos));
    }

    /// Calls and retries in the window ending at `now`.
    fn counts(&self, now: u64) -> crate::window::Counts {
        self.window.counts(now)
    }

    fn allowed(&self, calls: u64) -> u64 {
        let floor = u64::from(self.min_per_sec).saturating_mul(self.ttl.as_secs().max(1));
        ((self.ratio * calls as f64) as u64).saturating_add(floor)
    }

    /// Takes one retry from the allowance; false when it is exhausted.
    pub fn try_withdraw(&self) -> bool {
        let now = self.clock.now_nanos();
        let counts = self.counts(now);
        if counts.hits >= self.allowed(counts.calls) {
            return false;
        }
        self.window.record_hit_only(now);
        true
    }

    /// The retries the window still allows: allowed less withdrawn, for the
    /// `policy_retry_budget_balance` gauge.
    fn balance(&self) -> u64 {
        let counts = self.counts(self.clock.now_nanos());
        self.allowed(counts.calls).saturating_sub(counts.hits)
    }

    /// A point-in-time view.
    pub fn snapshot(&self) -> RetryAllowanceSnapshot {
        let counts = self.counts(self.clock.now_nanos());
        RetryAllowanceSnapshot {
            calls: counts.calls,
            retries: counts.hits,
            allowed: self.allowed(counts.calls),
        }
    }
}

#[derive(Debug, Default)]
struct Stats {
    retries: AtomicU64,
    stopped_by_allowance: AtomicU64,
    stopped_by_deadline: AtomicU64,
    stopped_by_pushback: AtomicU64,
    exhausted: AtomicU64,
}

/// A named retry policy: attempts, full-jitter backoff, an optional per-attempt timeout, and
/// the retry allowance its requests share.
pub struct RetryPolicy {
    name: Arc<str>,
    /// Attempts, backoff base and cap, attempt timeout ([`NO_TIMEOUT`] for none): one cell, so
    /// a reload changes them together.
    numbers: Tuned<[u64; 4]>,
    allowance: Arc<RetryAllowance>,
    stats: Stats,
    metrics: RetryMetrics,
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("name", &self.name)
            .field("numbers", &self.numbers())
            .field("allowance", &self.allowance)
            .finish()
    }
}

/// Builds a [`RetryPolicy`]; see [`RetryPolicy::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RetryPolicyBuilder {
    name: Arc<str>,
    config: RetryConfig,
    allowance: Option<Arc<RetryAllowance>>,
}

impl RetryPolicyBuilder {
    /// Every setting at once (see [`RetryConfig`]); the setters below change one each. Its
    /// allowance is the policy's own unless [`allowance`](Self::allowance) shares one.
    pub fn config(mut self, config: RetryConfig) -> Self {
        self.config = config;
        self
    }

    /// Attempts in all, the first included (at least 1).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.config = self.config.with_attempts(attempts);
        self
    }

    /// Full-jitter backoff from `base`, capped at `cap`.
    pub fn backoff(mut self, base: Duration, cap: Duration) -> Self {
        self.config = self.config.with_backoff(Backoff::full_jitter(base, cap));
        self
    }

    /// Each attempt's own timeout, as a child of the request's deadline. Expiring it is
    /// retryable.
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.config = self.config.with_attempt_timeout(timeout);
        self
    }

    /// The allowance shared across requests, instead of one of the policy's own (made from
    /// the config's [`allowance`](RetryConfig::allowance), or [`RetryAllowance::default`]).
    /// Share one allowance between policies by passing the same `Arc`.
    pub fn allowance(mut self, allowance: Arc<RetryAllowance>) -> Self {
        self.allowance = Some(allowance);
        self
    }

    /// Builds the policy.
    pub fn build(self) -> RetryPolicy {
        let config = self.config;
        RetryPolicy {
            metrics: RetryMetrics::new(&self.name),
            name: self.name,
            numbers: Tuned::new(words(&config)),
            allowance: self.allowance.unwrap_or_else(|| {
                Arc::new(RetryAllowance::from_config(config.allowance_or_default()))
            }),
            stats: Stats::default(),
        }
    }
}

/// The attempt-timeout word that means none.
const NO_TIMEOUT: u64 = u64::MAX;

/// The numbers a reload may change, as the policy's one tuned cell holds them: attempts,
/// backoff base and cap, attempt timeout ([`NO_TIMEOUT`] for none).
fn words(config: &RetryConfig) -> [u64; 4] {
    [
        u64::from(config.attempts.max(1)),
        tuning::word(config.backoff.base()),
        tuning::word(config.backoff.cap().max(config.backoff.base())),
        config.attempt_timeout.map_or(NO_TIMEOUT, |timeout| {
            tuning::word(timeout).min(NO_TIMEOUT - 1)
        }),
    ]
}

/// [`words`] back, with the allowance in use.
fn from_words([attempts, base, cap, timeout]: [u64; 4], allowance: AllowanceConfig) -> RetryConfig {
    let mut config = RetryConfig::new(u32::try_from(attempts).unwrap_or(u32::MAX))
        .with_backoff(Backoff::full_jitter(
            tuning::duration(base),
            tuning::duration(cap),
        ))
        .with_allowance(allowance);
    config.attempt_timeout = (timeout != NO_TIMEOUT).then(|| tuning::duration(timeout));
    config
}

/// A point-in-time view of a retry policy, for dashboards.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RetrySnapshot {
    /// The policy's name.
    pub name: Arc<str>,
    /// Attempts in all.
    pub attempts: u32,
    /// Retries started.
    pub retries: u64,
    /// Retrying stopped because the allowance was exhausted.
    pub stopped_by_allowance: u64,
    /// Retrying stopped because the next pause would end past the deadline, or it passed.
    pub stopped_by_deadline: u64,
    /// Retrying stopped because the dependency asked not to retry ([`Pushback::Never`]).
    pub stopped_by_pushback: u64,
    /// Every attempt was used and the last failed.
    pub exhausted: u64,
    /// The shared allowance.
    pub allowance: RetryAllowanceSnapshot,
}

impl RetryPolicy {
    /// A builder from [`RetryConfig::DEFAULT`]: 3 attempts, full jitter from 50 ms capped at
    /// 1 s, no attempt timeout, the default allowance.
    pub fn builder(name: impl Into<Arc<str>>) -> RetryPolicyBuilder {
        RetryPolicyBuilder {
            name: name.into(),
            config: RetryConfig::DEFAULT,
            allowance: None,
        }
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Attempts in all.
    pub fn attempts(&self) -> u32 {
        self.numbers().attempts
    }

    /// The per-attempt timeout.
    pub fn attempt_timeout(&self) -> Option<Duration> {
        self.numbers().attempt_timeout
    }

    /// Its settings now, read together: what one call uses from its start to its end (its
    /// allowance is the one in use, [`allowance`](Self::allowance)'s numbers).
    #[inline]
    pub fn numbers(&self) -> RetryConfig {
        from_words(self.numbers.read(), self.allowance.config())
    }

    /// Uses `config`'s attempts, backoff and attempt timeout from the next call on (attempts
    /// at least 1, the cap at least the base; the allowance stays as built: its state is
    /// shared); true when they changed. Calls under way keep the numbers they started with.
    #[cfg(feature = "overrides")]
    pub(crate) fn retune(&self, config: RetryConfig) -> bool {
        self.numbers.write(words(&config))
    }

    /// The shared allowance.
    pub fn allowance(&self) -> &Arc<RetryAllowance> {
        &self.allowance
    }

    /// The pause before retry `n` (0 for the first retry).
    pub fn backoff(&self, n: u32) -> Duration {
        let backoff = self.numbers().backoff;
        full_jitter(backoff.base(), backoff.cap(), n)
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> RetrySnapshot {
        RetrySnapshot {
            name: self.name.clone(),
            attempts: self.numbers().attempts,
            retries: self.stats.retries.load(Ordering::Relaxed),
            stopped_by_allowance: self.stats.stopped_by_allowance.load(Ordering::Relaxed),
            stopped_by_deadline: self.stats.stopped_by_deadline.load(Ordering::Relaxed),
            stopped_by_pushback: self.stats.stopped_by_pushback.load(Ordering::Relaxed),
            exhausted: self.stats.exhausted.load(Ordering::Relaxed),
            allowance: self.allowance.snapshot(),
        }
    }

    fn stop(&self, counter: &AtomicU64, code: &'static str, why: &'static str, attempt: u32) {
        counter.fetch_add(1, Ordering::Relaxed);
        observe::retry_stopped(&self.name, code, why, attempt);
        self.metrics.stopped(code, self.allowance.balance());
    }
}

/// Runs `op` until it succeeds, fails for good, or the policy, the allowance or the deadline says
/// stop, classifying the function's own errors with [`Transient`].
///
/// Each attempt runs under its own child deadline (the attempt timeout, clamped to what is
/// left), which is also in scope as [`Deadline::current`]. Returns the success, or the last
/// error: a refusal at once, a final `DeadlineExceeded` when the request's deadline passed, or
/// the function's own error.
pub fn retry_within<'a, T, E, F, Fut>(
    deadline: &'a Deadline,
    policy: &'a RetryPolicy,
    op: Idempotent<F>,
) -> impl Future<Output = Result<T, CallError<E>>>
where
    E: Transient,
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, CallError<E>>>,
{
    retry_loop(deadline, policy, ByTransient::new(), op, BoundHere)
}

/// Like [`retry_within`], with a classifier for the function's own errors instead of the
/// [`Transient`] trait.
pub fn retry_within_by<'a, T, E, F, Fut, C>(
    deadline: &'a Deadline,
    policy: &'a RetryPolicy,
    is_transient: C,
    op: Idempotent<F>,
) -> impl Future<Output = Result<T, CallError<E>>>
where
    C: Fn(&E) -> bool,
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, CallError<E>>>,
{
    retry_loop(deadline, policy, is_transient, op, BoundHere)
}

/// Like [`retry_within_by`], for an operation that bounds each attempt itself: it runs its
/// work under `attempt.deadline` (with [`Deadline::run`], and [`Deadline::scope`] for nested
/// calls) and reports an expiry as [`CallError::DeadlineExceeded`]. One timer per attempt
/// instead of two, and the operation sees its own expiry (to record it in a breaker). This is
/// what the attribute macros expand to; an operation that does not bound its attempts is not
/// bounded here.
///
/// `deadline` must be fresh (made just before, as the expansion's `Deadline::for_operation`
/// is): the first attempt's timeout and the allowance's deposit count from the moment it was
/// made, so that a call whose first attempt succeeds reads no clock here.
#[doc(hidden)]
pub fn retry_within_self_bounded<'a, T, E, F, Fut, C>(
    deadline: &'a Deadline,
    policy: &'a RetryPolicy,
    is_transient: C,
    op: Idempotent<F>,
) -> impl Future<Output = Result<T, CallError<E>>>
where
    C: Classifier<E>,
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, CallError<E>>>,
{
    retry_loop(deadline, policy, is_transient, op, BoundByOperation)
}

/// Who bounds each attempt, and so what one attempt's future is.
trait Bounding<F, Fut: Future> {
    /// The future of one attempt.
    type Attempt: Future;
    /// The moment the first attempt starts: a read of the clock, or `None` for the moment the
    /// call's deadline was made (its expiry less its budget), so the first attempt's deadline
    /// is a child as of its creation ([`Deadline::child_at_creation_nanos`]).
    fn first_start() -> Option<Instant>;
    /// The future of `attempt`.
    fn start(op: &mut F, attempt: Attempt) -> Self::Attempt;
    /// What the attempt's future yielded, as the operation's own outcome.
    fn ended(out: <Self::Attempt as Future>::Output) -> Fut::Output;
}

/// The loop bounds each attempt: `run(scope(attempt))` ([`retry_within`], [`retry_within_by`]).
struct BoundHere;

/// The operation bounds each attempt itself ([`retry_within_self_bounded`]).
struct BoundByOperation;

impl<T, E, F, Fut> Bounding<F, Fut> for BoundHere
where
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, CallError<E>>>,
{
    type Attempt = Run<Scope<Fut>>;

    #[inline]
    fn first_start() -> Option<Instant> {
        // A caller's deadline may have been made long before: read the clock.
        Some(Instant::now())
    }

    #[inline]
    fn start(op: &mut F, attempt: Attempt) -> Run<Scope<Fut>> {
        attempt.deadline.run_in_scope(op(attempt))
    }

    #[inline]
    fn ended(out: Result<Fut::Output, DeadlineExceeded>) -> Fut::Output {
        out.unwrap_or_else(|expired| Err(CallError::DeadlineExceeded(expired)))
    }
}

impl<T, E, F, Fut> Bounding<F, Fut> for BoundByOperation
where
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, CallError<E>>>,
{
    type Attempt = Fut;

    #[inline]
    fn first_start() -> Option<Instant> {
        // The expansion passes the operation's deadline, made just before: the first attempt
        // starts as it was made, a moment already read.
        None
    }

    #[inline]
    fn start(op: &mut F, attempt: Attempt) -> Fut {
        op(attempt)
    }

    #[inline]
    fn ended(out: Fut::Output) -> Fut::Output {
        out
    }
}

/// The retried call of `op` under `deadline`, each attempt bounded as `B` says.
fn retry_loop<'a, T, E, F, Fut, C, B>(
    deadline: &'a Deadline,
    policy: &'a RetryPolicy,
    is_transient: C,
    op: Idempotent<F>,
    _bound: B,
) -> Retried<'a, E, F, B::Attempt, C, B>
where
    C: Classifier<E>,
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, CallError<E>>>,
    B: Bounding<F, Fut>,
{
    Retried {
        policy,
        deadline,
        is_transient,
        op: op.op,
        number: 0,
        numbers: [0; 4],
        step: Step::Start,
        bound: PhantomData,
    }
}

pin_project! {
    /// A retried call, written out by hand rather than as an `async` loop: the first poll
    /// sets the first attempt up and polls it at once; only an attempt that failed in a way
    /// worth repeating reaches the retry's decisions ([`after_failure`]) and its
    /// pause, which shares its place with the attempt's future.
    ///
    /// A call whose first attempt succeeds pays for no retry decision, no clock read and no
    /// backoff: with [`BoundByOperation`] the attempt's deadline and the allowance's deposit
    /// both use the moment the call's deadline was made.
    #[must_use = "futures do nothing unless polled"]
    // Generic over the attempt's future `A` itself, not `B`'s associated type for it: an
    // auto trait (`Send`, for work that is deferred) is then decided on `A` as it is, where a
    // projection inside an `async` block fails with "one type is more general than the other".
    struct Retried<'a, E, F, A, C, B> {
        policy: &'a RetryPolicy,
        deadline: &'a Deadline,
        is_transient: C,
        op: F,
        // The attempt under way, from 1 (0 before the first poll).
        number: u32,
        // Attempts, backoff base and cap, the attempt timeout: read once, as
        // words, when the call starts, so it keeps them to its end whatever a reload
        // publishes, and a call that succeeds first time converts none of them.
        numbers: [u64; 4],
        #[pin]
        step: Step<A, CallError<E>>,
        bound: PhantomData<fn() -> B>,
    }
}

pin_project! {
    #[project = StepProj]
    #[project_replace = StepReplaced]
    enum Step<A, Error> {
        // Not polled yet: the first attempt is made on the first poll, as an `async fn`
        // would make it.
        Start,
        Attempt { #[pin] fut: A },
        // Between attempts, keeping the last one's error for when no other may start.
        Pause { #[pin] sleep: Sleep, last: Option<Error> },
        Done,
    }
}

impl<T, E, F, Fut, A, C, B> Future for Retried<'_, E, F, A, C, B>
where
    C: Classifier<E>,
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, CallError<E>>>,
    A: Future,
    B: Bounding<F, Fut, Attempt = A>,
{
    type Output = Result<T, CallError<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            // Each change of step is made in place, never moved out of the match: the
            // attempt's future is built where it is polled. Every step but `Done` ends with
            // an attempt under way, polled below.
            match this.step.as_mut().project() {
                StepProj::Attempt { .. } => {}
                StepProj::Start => {
                    match first_attempt(this.policy, this.deadline, this.numbers, B::first_start())
                    {
                        Ok(first) => {
                            *this.number = 1;
                            // Replaced rather than `set`: the step it replaces is `Start`, which
                            // has nothing to drop, and the replacement's own match says so where
                            // `set` calls the whole enum's drop.
                            this.step.as_mut().project_replace(Step::Attempt {
                                fut: B::start(this.op, first),
                            });
                        }
                        Err(refused) => {
                            this.step.set(Step::Done);
                            return Poll::Ready(Err(CallError::Refused(refused)));
                        }
                    }
                }
                StepProj::Pause { sleep, last } => {
                    ready!(sleep.poll(cx));
                    match next_attempt(this.policy, this.deadline, this.numbers, *this.number) {
                        Some(attempt) => {
                            *this.number = attempt.number;
                            this.step.set(Step::Attempt {
                                fut: B::start(this.op, attempt),
                            });
                        }
                        None => {
                            let last = last.take();
                            this.step.set(Step::Done);
                            if let Some(last) = last {
                                return Poll::Ready(Err(last));
                            }
                            unreachable!("a pause keeps the last attempt's error");
                        }
                    }
                }
                // Polled again after it ended with an error: it has nothing more to give.
                StepProj::Done => return Poll::Pending,
            }
            let StepProj::Attempt { fut } = this.step.as_mut().project() else {
                unreachable!("every step but `Done` leaves an attempt under way");
            };
            let error = match B::ended(ready!(fut.poll(cx))) {
                // The completed attempt stays in place (dropped with the call, not now):
                // polled again, it says it completed.
                Ok(value) => return Poll::Ready(Ok(value)),
                Err(error) => error,
            };
            let number = *this.number;
            match after_failure(
                this.policy,
                this.deadline,
                this.numbers,
                number,
                &*this.is_transient,
                error,
            ) {
                Ok((delay, last)) => this.step.set(Step::Pause {
                    sleep: tokio::time::sleep(delay),
                    last: Some(last),
                }),
                Err(error) => {
                    this.step.set(Step::Done);
                    return Poll::Ready(Err(error));
                }
            }
        }
    }
}

/// The first attempt, starting at `start` (`None`: as the call's deadline was made): its
/// deadline (the call's, or a child of it within the attempt timeout), the allowance's
/// deposit, and the numbers the call keeps; a refusal when nothing is left to start it with.
#[inline]
fn first_attempt(
    policy: &RetryPolicy,
    deadline: &Deadline,
    numbers: &mut [u64; 4],
    start: Option<Instant>,
) -> Result<Attempt, ResilienceError> {
    let [attempts, base, cap, timeout] = policy.numbers.read();
    *numbers = [attempts, base, cap, timeout];
    // Compared as nanoseconds, the words the cell holds. A budget is at most
    // `Deadline::MAX_BUDGET`, so a longer timeout (or none, `NO_TIMEOUT`) leaves the attempt
    // all of the call's deadline; below it, it is the child's maximum.
    let first = match start {
        // As the deadline was made: the child expires `timeout` after that moment.
        None => deadline.child_at_creation_nanos(timeout),
        Some(_) if timeout >= deadline.budget_nanos() => *deadline,
        Some(now) => deadline.child_as_of(now, tuning::duration(timeout)),
    };
    if first.budget_nanos() == 0 {
        // Nothing left to start the first attempt with: the work never ran.
        return Err(no_budget(policy));
    }
    match start {
        Some(now) => policy.allowance.deposit_as_of(now),
        None => policy
            .allowance
            .deposit_before(deadline.instant(), deadline.budget_nanos()),
    }
    Ok(Attempt {
        number: 1,
        deadline: first,
    })
}

/// The refusal of a first attempt with no budget left, counted and logged.
#[cold]
#[inline(never)]
fn no_budget(policy: &RetryPolicy) -> ResilienceError {
    let refusal = ResilienceError::new(
        policy.name.clone(),
        RefusalReason::InsufficientBudget {
            remaining: Duration::ZERO,
            min_budget: Duration::ZERO,
        },
    );
    observe::refused(&refusal);
    refusal
}

/// Attempt `number` ended with `error`: the pause before the next attempt, with the error kept
/// for when the pause leaves no budget; or the error that ends the call, when it is not worth
/// repeating or the policy, the deadline or the allowance says stop (each counted and logged).
#[cold]
#[inline(never)]
fn after_failure<E>(
    policy: &RetryPolicy,
    deadline: &Deadline,
    &[attempts, base, cap, _]: &[u64; 4],
    number: u32,
    classify: &impl Classifier<E>,
    error: CallError<E>,
) -> Result<(Duration, CallError<E>), CallError<E>> {
    let pushback = match &error {
        CallError::Refused(_) => return Err(error),
        CallError::Failed(e) if !classify.is_transient(e) => return Err(error),
        CallError::Failed(e) => classify.pushback(e),
        CallError::DeadlineExceeded(_) => None,
    };
    if let CallError::DeadlineExceeded(expired) = &error
        && (expired.is_callers() || deadline.is_expired())
    {
        // The request's own deadline passed, not just the attempt's; or the attempt had only
        // what the caller left it, which a retry would not lengthen: the caller's expiry is
        // never a reason to repeat the work.
        let budget = if expired.is_callers() {
            *expired
        } else {
            deadline.exceeded()
        };
        policy.stop(
            &policy.stats.stopped_by_deadline,
            "deadline",
            "the deadline passed",
            number,
        );
        return Err(CallError::DeadlineExceeded(budget));
    }
    if u64::from(number) >= attempts {
        policy.stop(
            &policy.stats.exhausted,
            "exhausted",
            "every attempt was used",
            number,
        );
        return Err(error);
    }
    let mut delay = full_jitter(tuning::duration(base), tuning::duration(cap), number - 1);
    match pushback {
        None => {}
        Some(Pushback::Never) => {
            policy.stop(
                &policy.stats.stopped_by_pushback,
                "pushback",
                "the dependency asked not to retry",
                number,
            );
            return Err(error);
        }
        // Never sooner than the dependency asked; the deadline below bounds it.
        Some(Pushback::After(wait)) => delay = delay.max(wait),
    }
    // Timers fire on a millisecond grid, so a pause may end up to a tick late: leave room
    // for it, and for an attempt to start after it. (Saturating: a pushback may be any length.)
    if delay.saturating_add(TIMER_TICK) >= deadline.remaining() {
        policy.stop(
            &policy.stats.stopped_by_deadline,
            "deadline",
            "the next pause would end past the deadline",
            number,
        );
        return Err(error);
    }
    if !policy.allowance.try_withdraw() {
        policy.stop(
            &policy.stats.stopped_by_allowance,
            "budget",
            "the retry allowance is exhausted",
            number,
        );
        return Err(error);
    }
    policy.stats.retries.fetch_add(1, Ordering::Relaxed);
    let code = match &error {
        CallError::Refused(refusal) => refusal.kind().as_str(),
        CallError::DeadlineExceeded(_) => "expired",
        CallError::Failed(_) => "failed",
    };
    observe::retry(&policy.name, number, delay, code, &ErrorKindOnly(&error));
    policy.metrics.retried(policy.allowance.balance());
    Ok((delay, error))
}

/// The attempt after attempt `number`'s pause, under a fresh child of the call's deadline;
/// none when the budget ran out during the pause (counted and logged).
#[cold]
#[inline(never)]
fn next_attempt(
    policy: &RetryPolicy,
    deadline: &Deadline,
    &[_, _, _, timeout]: &[u64; 4],
    number: u32,
) -> Option<Attempt> {
    // No timeout (`NO_TIMEOUT`) is the longest duration there is: the child takes what is left.
    let child = deadline.child(tuning::duration(timeout));
    if child.budget().is_zero() {
        policy.stop(
            &policy.stats.stopped_by_deadline,
            "deadline",
            "the deadline passed",
            number,
        );
        return None;
    }
    Some(Attempt {
        number: number + 1,
        deadline: child,
    })
}

/// The granularity of tokio's timer: a sleep may end up to this much after its deadline.
pub(crate) const TIMER_TICK: Duration = Duration::from_millis(1);

/// Displays which of the three outcomes an error is, without requiring `E: Display`.
struct ErrorKindOnly<'a, E>(&'a CallError<E>);

impl<E> fmt::Display for ErrorKindOnly<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            CallError::Refused(r) => write!(f, "{r}"),
            CallError::DeadlineExceeded(d) => write!(f, "{d}"),
            CallError::Failed(_) => f.write_str("the operation failed with a transient error"),
        }
    }
}

/// The loop's accounting, for the tower layer's own loop (`layer::retry`): one policy, one set
/// of counters and events, whichever interface retried.
#[cfg(feature = "tower")]
impl RetryPolicy {
    pub(crate) fn stopped_by_deadline(&self, why: &'static str, attempt: u32) {
        self.stop(&self.stats.stopped_by_deadline, "deadline", why, attempt);
    }

    pub(crate) fn stopped_by_allowance(&self, attempt: u32) {
        self.stop(
            &self.stats.stopped_by_allowance,
            "budget",
            "the retry allowance is exhausted",
            attempt,
        );
    }

    pub(crate) fn exhausted(&self, attempt: u32) {
        self.stop(
            &self.stats.exhausted,
            "exhausted",
            "every attempt was used",
            attempt,
        );
    }

    /// `code` is what the attempt ended with: `failed`, `expired` or `transient_response`.
    pub(crate) fn retrying(
        &self,
        attempt: u32,
        delay: Duration,
        code: &'static str,
        error: &dyn fmt::Display,
    ) {
        self.stats.retries.fetch_add(1, Ordering::Relaxed);
        observe::retry(&self.name, attempt, delay, code, error);
        self.metrics.retried(self.allowance.balance());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deposits from many threads at once are all counted: a deposit is one atomic update of
    /// the window's bucket, never lost to a concurrent one.
    #[test]
    fn deposits_of_many_threads_are_all_counted() {
        let allowance = Arc::new(RetryAllowance::new(Duration::from_secs(60), 0, 1.0));
        let at = Instant::now();
        let start = Arc::new(std::sync::Barrier::new(16));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let (allowance, start) = (allowance.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..1_000 {
                        allowance.deposit_as_of(at);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread
                .join()
                .unwrap_or_else(|_| unreachable!("a depositing thread panicked"));
        }
        assert_eq!(allowance.counts(allowance.clock.nanos_at(at)).calls, 16_000);
    }
}
