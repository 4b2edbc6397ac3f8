//! Should we call this at all right now? A circuit breaker per dependency.
//!
//! The cost of a failing dependency is rarely the failures: it is that every request still
//! pays the full timeout to discover the same answer. A breaker remembers the answer.
//!
//! Two ways to open, and the difference matters:
//! - [`Breaker::trip`] is for a dependency that **told** us to back off (a 429 with
//!   `Retry-After` is an instruction, not a signal to infer by counting to five first): the
//!   breaker opens at once for exactly that long, up to the breaker's
//!   [`max_retry_after`](BreakerBuilder::max_retry_after) (5 minutes by default), so a
//!   dependency that answers `Retry-After: 86400` is probed again after the cap, not tomorrow.
//! - [`Breaker::record_failure`] is the inferred case: failures counted inside a sliding
//!   window, opening at a threshold ([`OpenAfter::Failures`]) or, because a fixed count means
//!   something different at 10 and at 10,000 requests a second, at a failure ratio once a
//!   minimum number of calls was seen ([`OpenAfter::FailureRatio`]). The window is what stops a
//!   slow drip of unrelated errors over an hour from ever adding up to an outage.
//!
//! There is deliberately **no half-open state**. After the cooldown the breaker closes and
//! the first callers are the probes; until one of them succeeds (or the probation passes: one
//! window, unless [`probation`](BreakerBuilder::probation) says otherwise), one more failure
//! reopens it at once. A true half-open needs a second lock and another round trip,
//! and a handful of simultaneous probes is cheaper than that coordination.
//!
//! [`Breaker::check`] on a closed breaker is one atomic load: no allocation, no lock, not even
//! a clock read. State sits in an in-process mirror; a [`BreakerStore`] shares openings with
//! other instances (the embedded default, [`InProcessStore`], shares nothing).
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::{Breaker, RefusalKind};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let payments = Breaker::builder("payments")
//!     .open_after_failures(3, Duration::from_secs(30))
//!     .cooldown(Duration::from_secs(20))
//!     .build();
//!
//! for _ in 0..3 {
//!     payments.check().unwrap();
//!     payments.record_failure(); // the call failed
//! }
//! let refusal = payments.check().unwrap_err();
//! assert_eq!(refusal.kind(), RefusalKind::BreakerOpen);
//!
//! // A 429 with Retry-After: 5 is an instruction, not something to count.
//! let search = Breaker::builder("search").build();
//! search.trip(Duration::from_secs(5), "429 Too Many Requests");
//! assert!(search.check().is_err());
//! tokio::time::advance(Duration::from_secs(5)).await;
//! assert!(search.check().is_ok());
//! # }
//! ```

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::time::Instant;

pub use crate::error::OpenCause;
use crate::error::{CallError, DeadlineExceeded, RefusalReason, ResilienceError};
use crate::instruments::BreakerMetrics;
use crate::observe;
use crate::tuning::Tuned;
use crate::window::{Clock, MAX_RING, Ring, Window, saturating_nanos};

/// A breaker's settings, and the rule and sharing they hold: defined once, in `velocity-policy-model`,
/// for the `.policy` language, the attribute macros, this runtime and its overrides.
pub use velocity_policy_model::breaker::{BreakerConfig, OpenAfter, Sharing};

/// Where breaker state is shared between instances.
///
/// The breaker always keeps its state in an in-process mirror, writes the mirror **first** and
/// reads only the mirror on the hot path; a store is told of failures and openings after the
/// fact and may push openings from other instances into the mirror with
/// [`Breaker::apply_shared_opening`]. Every method must return quickly and never block: a
/// shared store hands the work to a background task. A store never closes a breaker.
pub trait BreakerStore: Send + Sync + fmt::Debug + 'static {
    /// Called once when a breaker using this store is built. A shared store loads the
    /// breaker's current shared state into the mirror here, before its first admission
    /// decision, and keeps a [`WeakBreaker`] to push later openings.
    fn attach(&self, breaker: &Breaker) {
        let _ = breaker;
    }

    /// A failure was recorded in the mirror (and did not, by itself, open it).
    fn failure_recorded(&self, breaker: &Breaker) {
        let _ = breaker;
    }

    /// The mirror opened until `until` because of `cause` (trips included).
    fn opened(&self, breaker: &Breaker, until: Instant, cause: &OpenCause) {
        let _ = (breaker, until, cause);
    }

    /// A probe succeeded after a cooldown: the breaker is fully closed again.
    fn probe_succeeded(&self, breaker: &Breaker) {
        let _ = breaker;
    }

    /// The store's own health, for dashboards.
    fn status(&self) -> StoreStatus {
        StoreStatus::in_process()
    }
}

/// A breaker store's health and traffic, for dashboards.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct StoreStatus {
    /// `in_process` or `redis`.
    pub kind: &'static str,
    /// Whether the store's last call succeeded (always true in process).
    pub healthy: bool,
    /// This instance's id in a shared store.
    pub instance: Option<Arc<str>>,
    /// Calls made to the shared store.
    pub sent: u64,
    /// Of those, calls that failed or timed out.
    pub failed: u64,
    /// Reports dropped because the store's queue was full.
    pub dropped: u64,
    /// Openings learned from other instances.
    pub received: u64,
    /// Messages from the store dropped as malformed, out of the local bounds, unsigned,
    /// wrongly signed or stale.
    pub rejected: u64,
    /// Openings kept for breakers not built here yet.
    pub pending: u64,
    /// Openings for breakers not built here yet, dropped because that map was full.
    pub pending_dropped: u64,
    /// Attempts to (re)subscribe to the store's events that failed (not calls: these are
    /// not in `sent` or `failed`).
    pub subscribe_failed: u64,
}

impl StoreStatus {
    /// The status of the embedded in-process store.
    pub fn in_process() -> Self {
        Self {
            kind: "in_process",
            healthy: true,
            instance: None,
            sent: 0,
            failed: 0,
            dropped: 0,
            received: 0,
            rejected: 0,
            pending: 0,
            pending_dropped: 0,
            subscribe_failed: 0,
        }
    }
}

/// The embedded default store: state lives in this process only.
#[derive(Debug, Clone, Copy, Default)]
pub struct InProcessStore;

impl BreakerStore for InProcessStore {}

/// How much later a shared opening must end than the local one to count as another opening.
const SHARED_TOLERANCE_NANOS: u64 = 250_000_000;

/// A breaker's state, as a snapshot reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum BreakerState {
    /// Admitting calls.
    Closed,
    /// Admitting calls after a cooldown; one failure reopens it.
    Probation,
    /// Refusing calls.
    Open,
}

/// A point-in-time view of one breaker, for dashboards.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BreakerSnapshot {
    /// The breaker's name.
    pub name: Arc<str>,
    /// Its state now.
    pub state: BreakerState,
    /// How long it stays open, when open.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "open_for_ms", serialize_with = "crate::json::millis_opt")
    )]
    pub open_for: Option<Duration>,
    /// What opened it last.
    pub last_cause: Option<OpenCause>,
    /// Its configuration.
    pub config: BreakerConfig,
    /// Failures inside the current window.
    pub window_failures: u64,
    /// Calls inside the current window (counted in ratio mode only).
    pub window_calls: u64,
    /// Openings since it was built (trips and shared openings included).
    pub openings: u64,
    /// Calls it refused.
    pub refusals: u64,
    /// Failures recorded.
    pub failures: u64,
    /// Calls that expired under a budget the caller shortened: the caller's, never counted as
    /// failures ([`Breaker::record_callers_expiry`]).
    pub caller_expiries: u64,
}

#[derive(Debug, Default)]
struct Stats {
    openings: AtomicU64,
    refusals: AtomicU64,
    failures: AtomicU64,
    caller_expiries: AtomicU64,
}

struct Inner {
    name: Arc<str>,
    /// Its settings, in the one reload cell (read on the failure path and by openings).
    settings: Tuned<BreakerConfig>,
    /// What counts toward its rule, with the rule it counts for: state, not a setting, swapped
    /// whole when a reload changes the rule (one load on the failure path, none on a closed
    /// count breaker's success).
    tally: ArcSwap<Tally>,
    /// Whether the rule is a failure ratio (whose successes are counted too): the one thing a
    /// success reads.
    ratio: AtomicBool,
    clock: Clock,
    /// Nanoseconds on `clock` at which the current opening ends; 0 when closed.
    open_until: AtomicU64,
    /// Nanoseconds on `clock` until which one failure reopens; 0 when not on probation.
    probation_until: AtomicU64,
    /// The last opening's cause. Held while an opening is written, so a refusal never sees an
    /// opening without its cause. Only openings and refusals take it.
    cause: Mutex<Option<OpenCause>>,
    store: Arc<dyn BreakerStore>,
    stats: Stats,
    metrics: BreakerMetrics,
}

/// What counts toward the rule: kept across a reload that keeps the rule (a new cooldown, say),
/// started afresh when the rule itself changes.
struct Tally {
    /// The rule it counts for (a reader takes the rule from here, so rule and count agree).
    open_after: OpenAfter,
    window: Window,
    /// A count breaker's last failure times (count mode up to [`MAX_RING`]): the exact window.
    ring: Option<Ring>,
    /// The rule's window, in nanoseconds.
    window_nanos: u64,
}

impl Tally {
    fn new(open_after: OpenAfter) -> Self {
        Self {
            open_after,
            window: Window::new(open_after.window()),
            ring: match open_after {
                OpenAfter::Failures { count, .. } if count <= MAX_RING => Some(Ring::new(count)),
                _ => None,
            },
            window_nanos: saturating_nanos(open_after.window()),
        }
    }
}

/// A named circuit breaker. Cloning is cheap and clones share state.
#[derive(Clone)]
pub struct Breaker {
    inner: Arc<Inner>,
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("name", &self.inner.name)
            .field("state", &self.state())
            .field("config", &self.config())
            .field("store", &self.inner.store)
            .finish()
    }
}

/// A handle that does not keep a breaker alive; for stores that push shared openings.
#[derive(Clone, Debug)]
pub struct WeakBreaker {
    inner: Weak<Inner>,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker").field("name", &self.name).finish()
    }
}

impl WeakBreaker {
    /// The breaker, if it is still alive.
    pub fn upgrade(&self) -> Option<Breaker> {
        self.inner.upgrade().map(|inner| Breaker { inner })
    }
}

/// Builds a [`Breaker`]; see [`Breaker::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct BreakerBuilder {
    name: Arc<str>,
    config: BreakerConfig,
    store: Arc<dyn BreakerStore>,
}

impl BreakerBuilder {
    /// Open after `count` failures inside a sliding `window` (a count of 0 is taken as 1). Up
    /// to 1024 the window is exact: the last `count` failure times are kept (one `AtomicU64`
    /// each, allocated here), and failures 31 s apart never add up in a 30 s window; a higher
    /// count is counted in buckets (see [`OpenAfter::Failures`]).
    pub fn open_after_failures(mut self, count: u32, window: Duration) -> Self {
        self.config = self
            .config
            .with_open_after(OpenAfter::failures(count, window));
        self
    }

    /// Open when at least `ratio` of the calls inside `window` failed, once `min_calls` were
    /// seen. The ratio is clamped into `(0, 1]`; record successes with
    /// [`Breaker::record_success`] for the ratio to mean anything.
    pub fn open_after_ratio(mut self, ratio: f64, min_calls: u32, window: Duration) -> Self {
        self.config = self
            .config
            .with_open_after(OpenAfter::ratio(ratio, min_calls, window));
        self
    }

    /// How long an opening from counted failures lasts.
    pub fn cooldown(mut self, cooldown: Duration) -> Self {
        self.config = self.config.with_cooldown(cooldown);
        self
    }

    /// The longest opening a `Retry-After` may ask for (default 5 minutes): a
    /// [`Breaker::trip`] asking for more opens for this long, and a trip another instance
    /// shares may last no longer here.
    pub fn max_retry_after(mut self, max: Duration) -> Self {
        self.config = self.config.with_max_retry_after(max);
        self
    }

    /// How long after an opening ends one failure reopens it at once (default: one window of
    /// the rule); see [`BreakerConfig::probation`].
    pub fn probation(mut self, probation: Duration) -> Self {
        self.config = self.config.with_probation(probation);
        self
    }

    /// What a shared store shares for this breaker.
    pub fn sharing(mut self, sharing: Sharing) -> Self {
        self.config = self.config.with_sharing(sharing);
        self
    }

    /// Replaces the whole configuration.
    pub fn config(mut self, config: BreakerConfig) -> Self {
        self.config = config;
        self
    }

    /// Where openings are shared; [`InProcessStore`] by default.
    pub fn store(mut self, store: Arc<dyn BreakerStore>) -> Self {
        self.store = store;
        self
    }

    /// Builds the breaker and attaches it to its store (which may load shared state into it).
    pub fn build(self) -> Breaker {
        let breaker = Breaker {
            inner: Arc::new(Inner {
                settings: Tuned::new(self.config),
                tally: ArcSwap::from_pointee(Tally::new(self.config.open_after)),
                ratio: AtomicBool::new(matches!(
                    self.config.open_after,
                    OpenAfter::FailureRatio { .. }
                )),
                clock: Clock::new(),
                open_until: AtomicU64::new(0),
                probation_until: AtomicU64::new(0),
                cause: Mutex::new(None),
                store: self.store,
                stats: Stats::default(),
                metrics: BreakerMetrics::new(&self.name),
                name: self.name,
            }),
        };
        breaker.inner.store.attach(&breaker);
        breaker
    }
}

impl Breaker {
    /// A builder for a breaker named `name`, with [`BreakerConfig::default`] and the
    /// in-process store.
    pub fn builder(name: impl Into<Arc<str>>) -> BreakerBuilder {
        BreakerBuilder {
            name: name.into(),
            config: BreakerConfig::default(),
            store: Arc::new(InProcessStore),
        }
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The name, shared.
    pub fn name_arc(&self) -> &Arc<str> {
        &self.inner.name
    }

    /// Its configuration now.
    pub fn config(&self) -> BreakerConfig {
        self.inner.settings.read()
    }

    /// Uses `config` from now on, except its sharing (which stays as built: who shares what is
    /// structure, not a number to tune); true when the configuration changed. The breaker's
    /// state survives: an opening runs to the end it was given, a probation stays, the
    /// counters go on; the failures counted toward the rule are kept when the rule is the same
    /// and start afresh when it changes (a window of another length or another count counts
    /// differently).
    #[cfg(feature = "overrides")]
    pub(crate) fn retune(&self, config: BreakerConfig) -> bool {
        let inner = &*self.inner;
        let current = inner.settings.read();
        let config = config.with_sharing(current.sharing);
        let open_after = config.open_after;
        if !inner.settings.write(config) {
            return false;
        }
        if open_after != current.open_after {
            inner.tally.store(Arc::new(Tally::new(open_after)));
        }
        inner.ratio.store(
            matches!(open_after, OpenAfter::FailureRatio { .. }),
            Ordering::Release,
        );
        true
    }

    /// A handle that does not keep the breaker alive.
    pub fn downgrade(&self) -> WeakBreaker {
        WeakBreaker {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Whether the breaker is closed now (one atomic load), without counting or deciding
    /// anything: the tower layer looks in `poll_ready`, and leaves an open breaker to
    /// [`Breaker::check`] in `call`.
    #[cfg(feature = "tower")]
    #[inline]
    pub(crate) fn closed_at_once(&self) -> bool {
        self.inner.open_until.load(Ordering::Acquire) == 0
    }

    /// Admits or refuses a call. On a closed breaker this is one atomic load.
    #[inline]
    pub fn check(&self) -> Result<(), ResilienceError> {
        let until = self.inner.open_until.load(Ordering::Acquire);
        if until == 0 {
            return Ok(());
        }
        self.check_open(until)
    }

    #[cold]
    fn check_open(&self, until: u64) -> Result<(), ResilienceError> {
        let inner = &*self.inner;
        let now = inner.clock.now_nanos();
        if now < until {
            let cause = self.lock_cause().clone().unwrap_or(OpenCause::Shared {
                detail: Arc::from("unknown"),
            });
            inner.stats.refusals.fetch_add(1, Ordering::Relaxed);
            let refusal = ResilienceError::new(
                inner.name.clone(),
                RefusalReason::BreakerOpen {
                    remaining: Duration::from_nanos(until - now),
                    cause,
                },
            );
            observe::refused(&refusal);
            inner.metrics.refusals.count(refusal.reason().code());
            return Err(refusal);
        }
        // The cooldown is over: close, so the next checks are one load again. The winner of
        // the race logs the transition once.
        if inner
            .open_until
            .compare_exchange(until, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            observe::breaker_closed(&inner.name, "cooldown");
            inner.metrics.closed("cooldown");
        }
        Ok(())
    }

    /// Records that an admitted call succeeded. On a closed breaker counting failures (not a
    /// ratio) this is one atomic load.
    #[inline]
    pub fn record_success(&self) {
        let inner = &*self.inner;
        if inner.probation_until.load(Ordering::Relaxed) != 0 {
            self.probe_succeeded();
        }
        if inner.ratio.load(Ordering::Relaxed) {
            inner
                .tally
                .load()
                .window
                .record_call(inner.clock.now_nanos());
        }
    }

    #[cold]
    fn probe_succeeded(&self) {
        let inner = &*self.inner;
        let now = inner.clock.now_nanos();
        let until = inner.open_until.load(Ordering::Acquire);
        if until != 0 && now < until {
            // A straggler admitted before the opening: not a probe.
            return;
        }
        if inner.probation_until.swap(0, Ordering::AcqRel) != 0 {
            observe::breaker_closed(&inner.name, "probe_succeeded");
            inner.metrics.closed("probe_succeeded");
            inner.store.probe_succeeded(self);
        }
    }

    /// Records that an admitted call failed in a way that says the dependency is unhealthy
    /// (an error, a timeout). Opens the breaker at the threshold, or at once on probation.
    #[inline]
    pub fn record_failure(&self) {
        self.failed(None);
    }

    /// Records a failure a fault injector caused, naming its drill `drill`: counted as a real
    /// failure would be, never reported to the fleet through the store (a drill's share of
    /// instances stays its own), and if it opens the breaker the opening's cause is
    /// [`OpenCause::Injected`], so its event, the snapshot's last cause and the dashboard say
    /// it was a drill. The mark is this call's argument: it is for this breaker and this
    /// failure only. What a fault injector (feature `chaos`) and the breaker's layer call: a
    /// breaker knows nothing else of drills.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use velocity_policy_runtime::Breaker;
    ///
    /// let breaker = Breaker::builder("search").open_after_failures(1, Duration::from_secs(30)).build();
    /// breaker.record_injected_failure(Arc::from("search_drill"));
    /// let cause = breaker.snapshot().last_cause.unwrap();
    /// assert_eq!(cause.injected_by(), Some("search_drill"));
    /// assert_eq!(cause.code(), "failures");
    /// ```
    pub fn record_injected_failure(&self, drill: Arc<str>) {
        self.failed(Some(drill));
    }

    /// A failure, injected by the drill `injected` if one is named.
    fn failed(&self, injected: Option<Arc<str>>) {
        let inner = &*self.inner;
        let opened_by = |cause: OpenCause| match &injected {
            Some(drill) => OpenCause::Injected {
                drill: drill.clone(),
                opened_by: Box::new(cause),
            },
            None => cause,
        };
        // An injected failure counts here, as a real one would, and is never reported to the
        // fleet: a drill's share of instances stays its own.
        let reported = injected.is_none();
        let now = inner.clock.now_nanos();
        inner.stats.failures.fetch_add(1, Ordering::Relaxed);
        let until = inner.open_until.load(Ordering::Acquire);
        if until != 0 && now < until {
            // A straggler admitted before the opening: the breaker is already open.
            return;
        }
        let (config, tally) = (inner.settings.read(), inner.tally.load());
        let probation = inner.probation_until.load(Ordering::Acquire);
        if probation != 0 {
            if now < probation {
                self.open(now, config.cooldown, opened_by(OpenCause::ProbeFailed));
                return;
            }
            // Probation lapsed without a verdict: back to plain counting.
            if inner
                .probation_until
                .compare_exchange(probation, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                inner.metrics.closed("lapsed");
            }
        }
        let to_u32 = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        if let (Some(ring), OpenAfter::Failures { count, window }) = (&tally.ring, tally.open_after)
        {
            if ring.record(now, tally.window_nanos) {
                let cause = OpenCause::Failures { count, window };
                self.open(now, config.cooldown, opened_by(cause));
            } else if reported {
                inner.store.failure_recorded(self);
            }
            return;
        }
        tally.window.record_hit(now);
        let counts = tally.window.counts(now);
        let cause = match tally.open_after {
            OpenAfter::Failures { count, window } if counts.hits >= u64::from(count) => {
                Some(OpenCause::Failures {
                    count: to_u32(counts.hits),
                    window,
                })
            }
            OpenAfter::FailureRatio {
                ratio,
                min_calls,
                window,
            } if counts.calls >= u64::from(min_calls)
                && counts.hits as f64 >= ratio * counts.calls as f64 =>
            {
                Some(OpenCause::FailureRatio {
                    failures: to_u32(counts.hits),
                    calls: to_u32(counts.calls),
                    ratio,
                    window,
                })
            }
            _ => None,
        };
        match cause {
            Some(cause) => {
                self.open(now, config.cooldown, opened_by(cause));
            }
            None if reported => inner.store.failure_recorded(self),
            None => {}
        }
    }

    /// Records how a call it admitted ended, and hands the outcome on as a [`CallError`]: a
    /// success closes the count ([`record_success`](Self::record_success)), the call's own
    /// error and an expiry are failures ([`record_failure`](Self::record_failure)), except an
    /// expiry under a budget the caller shortened ([`DeadlineExceeded::is_callers`]), which
    /// says nothing about the dependency: it is counted apart
    /// ([`record_callers_expiry`](Self::record_callers_expiry)) and never opens the breaker,
    /// reopens it on probation, or reaches a shared store.
    ///
    /// ```
    /// use std::time::Duration;
    /// use velocity_policy_runtime::{Breaker, CallError, Deadline};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let breaker = Breaker::builder("search").open_after_failures(1, Duration::from_secs(30)).build();
    /// let deadline = Deadline::after(Duration::from_millis(100));
    /// breaker.check().unwrap();
    /// let ran = deadline.run(async { Err::<(), _>("index unavailable") }).await;
    /// assert!(matches!(breaker.observe(ran), Err(CallError::Failed("index unavailable"))));
    /// assert!(breaker.check().is_err());
    /// # }
    /// ```
    #[inline]
    pub fn observe<T, E>(
        &self,
        ran: Result<Result<T, E>, DeadlineExceeded>,
    ) -> Result<T, CallError<E>> {
        match ran {
            Ok(Ok(value)) => {
                self.record_success();
                Ok(value)
            }
            Ok(Err(error)) => {
                self.record_failure();
                Err(CallError::Failed(error))
            }
            Err(expired) => {
                self.record_expiry(expired);
                Err(CallError::DeadlineExceeded(expired))
            }
        }
    }

    /// Records an expiry of a call it admitted: a failure, unless the budget was the caller's.
    #[inline]
    pub fn record_expiry(&self, expired: DeadlineExceeded) {
        if expired.is_callers() {
            self.record_callers_expiry(expired);
        } else {
            self.record_failure();
        }
    }

    /// Records a call that expired under a budget the **caller** shortened: counted (the
    /// snapshot's `caller_expiries`) and traced (`kind = "caller_expired"`), never a failure.
    /// Whoever sends a request chooses how long it waits for its own answer, never whether the
    /// dependency is considered down for every other user.
    #[cold]
    pub fn record_callers_expiry(&self, expired: DeadlineExceeded) {
        self.inner
            .stats
            .caller_expiries
            .fetch_add(1, Ordering::Relaxed);
        observe::caller_expired(&self.inner.name, "breaker", expired.budget());
    }

    /// Records an outcome: a success, or a failure.
    #[inline]
    pub fn record(&self, success: bool) {
        if success {
            self.record_success();
        } else {
            self.record_failure();
        }
    }

    /// Opens the breaker at once for exactly `retry_after`: the dependency told us to back off
    /// (a 429 or 503 with `Retry-After`). Replaces any current opening. A `retry_after` past
    /// the breaker's [`max_retry_after`](BreakerBuilder::max_retry_after) opens it for the cap
    /// instead (logged as `retry_after_capped`); the cause still says what was asked.
    pub fn trip(&self, retry_after: Duration, reason: impl Into<Arc<str>>) {
        let cause = OpenCause::Tripped {
            retry_after,
            reason: reason.into(),
        };
        self.trip_as(retry_after, cause);
    }

    /// [`trip`](Self::trip) for a 429 the chaos drill `drill` injected: the opening's cause is
    /// [`OpenCause::Injected`], so this instance's breaker opens as for a real one and its
    /// store never shares it with the fleet (a drill's share of instances stays its own).
    pub fn trip_injected(
        &self,
        retry_after: Duration,
        reason: impl Into<Arc<str>>,
        drill: Arc<str>,
    ) {
        let cause = OpenCause::Injected {
            drill,
            opened_by: Box::new(OpenCause::Tripped {
                retry_after,
                reason: reason.into(),
            }),
        };
        self.trip_as(retry_after, cause);
    }

    fn trip_as(&self, retry_after: Duration, cause: OpenCause) {
        let inner = &*self.inner;
        let now = inner.clock.now_nanos();
        let cap = inner.settings.read().max_retry_after;
        let open_for = retry_after.min(cap);
        if open_for < retry_after {
            observe::retry_after_capped(&inner.name, retry_after, cap);
        }
        let until = now.saturating_add(saturating_nanos(open_for)).max(1);
        {
            let mut slot = self.lock_cause();
            inner.open_until.store(until, Ordering::Release);
            self.begin_opening(&mut slot, now, until, cause.clone());
        }
        self.after_opening(until, open_for, &cause);
    }

    /// Opens the mirror with an opening another instance shared, until `until`. Does nothing
    /// when the breaker is already open at least that long (give or take 250 ms: the same
    /// opening, echoed back by the store, is not a second one). Returns whether it opened. Stores
    /// call this; it is not echoed back to the store.
    ///
    /// What a store passes on is input, not truth: an opening never lasts longer here than the
    /// longest this breaker's own configuration allows (the larger of its cooldown and its
    /// [`max_retry_after`](BreakerBuilder::max_retry_after)); a later `until` is cut to that.
    /// Stores check the finer bound per kind first ([`BreakerConfig::longest_opening`]).
    pub fn apply_shared_opening(&self, until: Instant, cause: OpenCause) -> bool {
        let inner = &*self.inner;
        let now = inner.clock.now_nanos();
        let config = inner.settings.read();
        let longest = saturating_nanos(config.cooldown.max(config.max_retry_after));
        let until_nanos = inner
            .clock
            .nanos_at(until)
            .min(now.saturating_add(longest))
            .max(1);
        if until_nanos <= now {
            return false;
        }
        {
            let mut slot = self.lock_cause();
            let current = inner.open_until.load(Ordering::Acquire);
            // Already open until then, or as good as: the same opening coming back from the
            // store a few milliseconds later is not a second opening.
            if current > now && current.saturating_add(SHARED_TOLERANCE_NANOS) >= until_nanos {
                return false;
            }
            inner.open_until.store(until_nanos, Ordering::Release);
            self.begin_opening(&mut slot, now, until_nanos, cause.clone());
        }
        observe::breaker_opened(&inner.name, &cause, Duration::from_nanos(until_nanos - now));
        inner.metrics.opened();
        true
    }

    fn open(&self, now: u64, open_for: Duration, cause: OpenCause) {
        let inner = &*self.inner;
        let until = now.saturating_add(saturating_nanos(open_for)).max(1);
        {
            let mut slot = self.lock_cause();
            let current = inner.open_until.load(Ordering::Acquire);
            if current != 0 && now < current {
                // Another thread opened it first: one opening, one event.
                return;
            }
            inner.open_until.store(until, Ordering::Release);
            self.begin_opening(&mut slot, now, until, cause.clone());
        }
        self.after_opening(until, open_for, &cause);
    }

    fn begin_opening(
        &self,
        slot: &mut MutexGuard<'_, Option<OpenCause>>,
        _now: u64,
        until: u64,
        cause: OpenCause,
    ) {
        let inner = &*self.inner;
        let tally = inner.tally.load();
        let probation = saturating_nanos(inner.settings.read().probation_or_window());
        inner
            .probation_until
            .store(until.saturating_add(probation), Ordering::Release);
        tally.window.clear();
        if let Some(ring) = &tally.ring {
            ring.clear();
        }
        inner.stats.openings.fetch_add(1, Ordering::Relaxed);
        **slot = Some(cause);
    }

    fn after_opening(&self, until: u64, open_for: Duration, cause: &OpenCause) {
        let inner = &*self.inner;
        observe::breaker_opened(&inner.name, cause, open_for);
        inner.metrics.opened();
        inner
            .store
            .opened(self, inner.clock.instant_at(until), cause);
    }

    fn lock_cause(&self) -> MutexGuard<'_, Option<OpenCause>> {
        // A poisoned lock only means a panic elsewhere while holding it; the cause is still
        // a valid value.
        self.inner
            .cause
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The state now.
    pub fn state(&self) -> BreakerState {
        let inner = &*self.inner;
        let now = inner.clock.now_nanos();
        let until = inner.open_until.load(Ordering::Acquire);
        if until != 0 && now < until {
            return BreakerState::Open;
        }
        let probation = inner.probation_until.load(Ordering::Acquire);
        if probation != 0 && now < probation {
            BreakerState::Probation
        } else {
            BreakerState::Closed
        }
    }

    /// When the current opening ends, if open.
    pub fn open_until(&self) -> Option<Instant> {
        let inner = &*self.inner;
        let until = inner.open_until.load(Ordering::Acquire);
        (until != 0 && inner.clock.now_nanos() < until).then(|| inner.clock.instant_at(until))
    }

    /// Closes the breaker and forgets what it counted (feature `test-registry`): no opening, no
    /// probation, an empty window, the last cause and the counters (openings, refusals,
    /// failures) back to zero, as if just built. Its configuration and its store stay; the
    /// store is not told (an opening another instance shares may reopen it). For tests that run
    /// one after another in one process: [`Registry::reset_state`](crate::Registry::reset_state).
    #[cfg(feature = "test-registry")]
    pub fn reset(&self) {
        let inner = &*self.inner;
        let mut slot = self.lock_cause();
        inner.open_until.store(0, Ordering::Release);
        inner.probation_until.store(0, Ordering::Release);
        let tally = inner.tally.load();
        tally.window.clear();
        if let Some(ring) = &tally.ring {
            ring.clear();
        }
        inner.stats.openings.store(0, Ordering::Relaxed);
        inner.stats.refusals.store(0, Ordering::Relaxed);
        inner.stats.failures.store(0, Ordering::Relaxed);
        inner.stats.caller_expiries.store(0, Ordering::Relaxed);
        *slot = None;
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> BreakerSnapshot {
        let inner = &*self.inner;
        let now = inner.clock.now_nanos();
        let tally = inner.tally.load();
        let mut counts = tally.window.counts(now);
        if let Some(ring) = &tally.ring {
            counts.hits = ring.count(now, tally.window_nanos);
        }
        let state = self.state();
        let until = inner.open_until.load(Ordering::Acquire);
        BreakerSnapshot {
            name: inner.name.clone(),
            state,
            open_for: (state == BreakerState::Open)
                .then(|| Duration::from_nanos(until.saturating_sub(now))),
            last_cause: self.lock_cause().clone(),
            config: inner.settings.read(),
            window_failures: counts.hits,
            window_calls: counts.calls,
            openings: inner.stats.openings.load(Ordering::Relaxed),
            refusals: inner.stats.refusals.load(Ordering::Relaxed),
            failures: inner.stats.failures.load(Ordering::Relaxed),
            caller_expiries: inner.stats.caller_expiries.load(Ordering::Relaxed),
        }
    }
}
