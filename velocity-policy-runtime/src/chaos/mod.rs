//! Fault injection for drills (feature `chaos`): latency, errors, refusals and 429s, injected
//! *inside* an attempt, so the real mechanisms handle them as they would handle real ones.
//!
//! A [`Chaos`] is a named set of faults, each at a rate: [latency](Fault::Latency) (fixed, a
//! uniform range, or log-normal by p50 and p99), the function's own [error](Fault::Error) (built
//! by a function you register with [`error_with`]), a [refusal](Fault::Refuse) (a
//! [`ResilienceError`] whose reason is [`RefusalReason::Injected`]), and a
//! [429 with `Retry-After`](Fault::TooManyRequests) (the breaker is tripped for that long, as
//! for a real 429, and the call is refused as rate limited with the wait). Optionally only
//! within a window of time after the chaos was made (its registry entry, for a declared one:
//! its first use or switch; [`ChaosBuilder::during`], on tokio's clock) and only on a share of instances ([`ChaosBuilder::instances`], decided once per
//! instance from its id, so 30% of a fleet is hit and the same 30% every time).
//!
//! The injection point is inside the attempt: after the breaker's check and the bulkhead's
//! admission, before (or in place of) the real call, under the attempt's deadline. So the
//! breaker counts injected failures, the deadline bounds injected latency, a retry sees an
//! injected error and a hedge races injected latency. Chaos is its own mechanism in the
//! registry, named like the others: `Registry::global().chaos("search_drill")` is the switch,
//! at run time, without a rebuild ([`Chaos::enable`], [`Chaos::disable`], [`Chaos::set_rate`],
//! [`Chaos::set`]). When a chaos is off, the cost on the call path is one relaxed atomic load;
//! without the feature none of this exists.
//!
//! # Armed only at run time, on each instance
//!
//! Nothing injects until the process **arms** drills with [`arm`], an explicit switch the
//! service makes at run time (behind a flag, an environment variable or an admin endpoint of its
//! own); it is off by default, even in a build with the feature. A drill's declaration (a
//! stanza's `enabled`, on unless it says `enabled = false`), an override file of the
//! environment and [`Chaos::enable`] then decide *which* drills run. Nothing from outside the
//! process arms drills: the fleet's override set may not name a `chaos` stanza at all, and a
//! request carries no switch. [`disarm`] stops every drill at once.
//!
//! What a drill does stays on its instance: an injected 429 trips this instance's breaker (its
//! cause is [`OpenCause::Injected`](crate::OpenCause::Injected)), and injected failures count
//! in this instance's breaker, but neither is ever shared with the fleet through the
//! [Redis store](crate::redis_store), so a drill on 30% of the instances stays on those.
//!
//! Every injected fault is a tracing event (target `policy`, `mechanism` `chaos`, `kind`
//! `injected`, `injected = true`, `fault` the fault's kind) and, with `metrics`, a count of
//! `policy_injected_faults_total{name, fault}`; [`Registry::chaos_snapshots`](crate::Registry::chaos_snapshots) (the dashboard's
//! `chaos`) lists every chaos with its faults, rates, whether it is on and what it injected.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::chaos::{self, Chaos, Fault, Latency};
//! use velocity_policy_runtime::{Breaker, CallError, Deadline, RefusalKind};
//!
//! #[derive(Debug, PartialEq)]
//! enum SearchError { Injected }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // Off by default, even with the feature: the service arms drills at run time.
//! chaos::arm();
//! let drill = Chaos::builder("search_drill")
//!     .fault(Fault::Error, 1.0)
//!     .build();
//! chaos::error_with(&drill, || SearchError::Injected);
//! let breaker = Breaker::builder("search").open_after_failures(2, Duration::from_secs(10)).build();
//!
//! // What an annotated function's attempt does, by hand.
//! for _ in 0..2 {
//!     breaker.check().unwrap();
//!     let injection = drill.draw(Some(&breaker)).unwrap();
//!     let ran = Deadline::after(Duration::from_secs(1))
//!         .run(injection.run(async { Ok::<u32, SearchError>(7) }))
//!         .await;
//!     // The injection records the outcome, telling the breaker what it injected.
//!     let outcome = injection.observe(&breaker, ran);
//!     assert!(matches!(outcome, Err(CallError::Failed(SearchError::Injected))));
//! }
//! // The breaker counted the injected failures, and says the opening was a drill.
//! let refusal = breaker.check().unwrap_err();
//! assert_eq!(refusal.kind(), RefusalKind::BreakerOpen);
//! assert_eq!(breaker.snapshot().last_cause.unwrap().injected_by(), Some("search_drill"));
//!
//! // Off at run time: the real call runs.
//! drill.disable();
//! let ran = drill.draw(None).unwrap().run(async { Ok::<u32, SearchError>(7) }).await;
//! assert_eq!(ran, Ok(7));
//! assert_eq!(drill.snapshot().faults[0].injected, 2);
//!
//! // Latency from a distribution, at 10% of calls.
//! drill.set(Fault::Latency(Latency::Uniform { min: Duration::from_millis(200), max: Duration::from_millis(800) }), 0.1);
//! # }
//! ```

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::breaker::Breaker;
use crate::error::{CallError, DeadlineExceeded, RefusalReason, ResilienceError};
use crate::instruments::{Counter, INJECTED, counter};
use crate::window::saturating_nanos;

pub use crate::error::InjectedError;

/// Rates are kept in parts per million.
const MILLION: u32 = 1_000_000;

/// How long an injected latency lasts.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "distribution", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Latency {
    /// Always this long.
    Fixed {
        /// The delay.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "delay_ms", serialize_with = "crate::json::millis")
        )]
        delay: Duration,
    },
    /// Uniformly between `min` and `max`.
    Uniform {
        /// The shortest delay.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "min_ms", serialize_with = "crate::json::millis")
        )]
        min: Duration,
        /// The longest delay.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "max_ms", serialize_with = "crate::json::millis")
        )]
        max: Duration,
    },
    /// Log-normal with this median and 99th percentile: the long tail of a real dependency.
    LogNormal {
        /// Half of the delays are shorter than this.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "p50_ms", serialize_with = "crate::json::millis")
        )]
        p50: Duration,
        /// 99% of the delays are shorter than this.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "p99_ms", serialize_with = "crate::json::millis")
        )]
        p99: Duration,
    },
}

impl Latency {
    /// One delay drawn from the distribution.
    pub fn sample(&self) -> Duration {
        match *self {
            Self::Fixed { delay } => delay,
            Self::Uniform { min, max } => {
                let (lo, hi) = (saturating_nanos(min), saturating_nanos(max));
                if hi <= lo {
                    return min;
                }
                Duration::from_nanos(rand::random_range(lo..=hi))
            }
            Self::LogNormal { p50, p99 } => {
                // ln X ~ N(mu, sigma): the median is e^mu, the 99th percentile e^(mu + 2.326 sigma).
                let median = p50.as_secs_f64().max(1e-9);
                let sigma = ((p99.as_secs_f64().max(median) / median).ln() / 2.326_348).max(0.0);
                // Box-Muller: one standard normal from two uniforms in (0, 1].
                let u1 = 1.0 - rand::random::<f64>();
                let u2 = rand::random::<f64>();
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                let secs = median * (sigma * z).exp();
                Duration::try_from_secs_f64(secs.min(3600.0)).unwrap_or(p99)
            }
        }
    }

    fn encode(self) -> (u8, u64, u64) {
        match self {
            Self::Fixed { delay } => (0, saturating_nanos(delay), 0),
            Self::Uniform { min, max } => (1, saturating_nanos(min), saturating_nanos(max)),
            Self::LogNormal { p50, p99 } => (2, saturating_nanos(p50), saturating_nanos(p99)),
        }
    }

    fn decode(kind: u8, a: u64, b: u64) -> Self {
        let (a, b) = (Duration::from_nanos(a), Duration::from_nanos(b));
        match kind {
            1 => Self::Uniform { min: a, max: b },
            2 => Self::LogNormal { p50: a, p99: b },
            _ => Self::Fixed { delay: a },
        }
    }
}

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "fault", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Fault {
    /// The attempt waits this long before the real call (under the attempt's deadline).
    Latency(Latency),
    /// The attempt returns the function's own error, built by the function registered with
    /// [`error_with`] (without one, or for another error type, nothing is injected and an
    /// `injection_skipped` event says why).
    Error,
    /// The attempt is refused: a [`ResilienceError`] with [`RefusalReason::Injected`]; the work
    /// never ran.
    Refuse,
    /// The dependency answered 429 with `Retry-After`: the breaker (if the operation has one) is
    /// tripped for `retry_after`, and the attempt is refused as rate limited with that wait.
    #[cfg_attr(feature = "serde", serde(rename = "status_429"))]
    TooManyRequests {
        /// The `Retry-After` it answered with.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "retry_after_ms", serialize_with = "crate::json::millis")
        )]
        retry_after: Duration,
    },
}

impl Fault {
    /// The fault's kind, the `fault` field of its events and the label of its metric:
    /// `latency`, `error`, `refuse` or `status_429`.
    pub const fn kind(&self) -> &'static str {
        FaultKind::of(self).as_str()
    }
}

/// Which fault, without its settings: what [`Chaos::set_rate`] changes the rate of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum FaultKind {
    /// [`Fault::Latency`].
    Latency,
    /// [`Fault::Error`].
    Error,
    /// [`Fault::Refuse`].
    Refuse,
    /// [`Fault::TooManyRequests`].
    #[cfg_attr(feature = "serde", serde(rename = "status_429"))]
    TooManyRequests,
}

impl FaultKind {
    /// Every kind, in the order they are drawn: a refusal or a 429 ends the attempt before it
    /// starts; latency then comes before an error or the real call.
    pub const ALL: [FaultKind; 4] = [
        FaultKind::Refuse,
        FaultKind::TooManyRequests,
        FaultKind::Latency,
        FaultKind::Error,
    ];

    const fn of(fault: &Fault) -> Self {
        match fault {
            Fault::Latency(_) => Self::Latency,
            Fault::Error => Self::Error,
            Fault::Refuse => Self::Refuse,
            Fault::TooManyRequests { .. } => Self::TooManyRequests,
        }
    }

    const fn index(self) -> usize {
        match self {
            Self::Refuse => 0,
            Self::TooManyRequests => 1,
            Self::Latency => 2,
            Self::Error => 3,
        }
    }

    /// `latency`, `error`, `refuse` or `status_429`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Latency => "latency",
            Self::Error => "error",
            Self::Refuse => "refuse",
            Self::TooManyRequests => "status_429",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rate as a share from 0 to 1, clamped, in parts per million.
fn ppm(share: f64) -> u32 {
    if share.is_nan() {
        return 0;
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "clamped to 0..=1e6 first"
    )]
    let parts = (share.clamp(0.0, 1.0) * f64::from(MILLION)).round() as u32;
    parts
}

/// One fault's slot: whether it is declared, its rate, and its counts.
#[derive(Debug, Default)]
struct Slot {
    declared: AtomicBool,
    rate: AtomicU32,
    /// Calls that reached this slot while the chaos was on: the position in its spread.
    seen: AtomicU64,
    injected: AtomicU64,
}

impl Slot {
    /// Whether call number `seen` is one to hit: at rate r, exactly `ceil(n * r)` of the first
    /// `n` calls are, evenly spread and the first one included (no randomness: a test at 10%
    /// sees 10 in 100, the 1st, 11th, 21st...).
    fn hit(&self) -> bool {
        let rate = u64::from(self.rate.load(Relaxed));
        if rate == 0 || !self.declared.load(Relaxed) {
            return false;
        }
        let n = self.seen.fetch_add(1, Relaxed);
        let million = u64::from(MILLION);
        ((n + 1) * rate).div_ceil(million) > (n * rate).div_ceil(million)
    }
}

/// A drill's `policy_injected_faults_total{name, fault}`, one counter per fault kind.
#[derive(Debug)]
struct ChaosMetrics {
    /// In [`FaultKind::ALL`] order.
    injected: [(FaultKind, Counter); 4],
}

impl ChaosMetrics {
    fn new(name: &str) -> Self {
        Self {
            injected: FaultKind::ALL.map(|kind| {
                (
                    kind,
                    counter(INJECTED, &[("name", name), ("fault", kind.as_str())]),
                )
            }),
        }
    }

    fn injected(&self, kind: FaultKind) {
        if let Some((_, counter)) = self.injected.iter().find(|(k, _)| *k == kind) {
            counter.increment();
        }
    }
}

type ErrorBuilder = Arc<dyn Fn() -> Box<dyn Any + Send> + Send + Sync>;

struct Inner {
    name: Arc<str>,
    on: AtomicBool,
    slots: [Slot; 4],
    latency: (AtomicU8, AtomicU64, AtomicU64),
    retry_after: AtomicU64,
    /// The window, in nanoseconds after `epoch`; `until` 0 means none.
    window: (AtomicU64, AtomicU64),
    /// The share of instances hit, in parts per million.
    instances: AtomicU32,
    epoch: Instant,
    /// Whether the declared settings were applied (a `.policy` stanza or an attribute's).
    declared: AtomicBool,
    /// Whether it was switched on or off at run time: a declaration made later keeps the switch.
    switched: AtomicBool,
    error: RwLock<Option<ErrorBuilder>>,
    skipped: AtomicU64,
    metrics: ChaosMetrics,
}

/// A named set of faults, each at a rate, switchable at run time. Cheap to clone: clones share
/// one state, as the registry's entry for the name does.
#[derive(Clone)]
pub struct Chaos {
    inner: Arc<Inner>,
}

impl fmt::Debug for Chaos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chaos")
            .field("name", &self.inner.name)
            .field("on", &self.is_on())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Chaos`]: its faults, window and share of instances.
#[derive(Debug, Clone)]
#[must_use]
pub struct ChaosBuilder {
    name: Arc<str>,
    settings: ChaosSettings,
}

/// What a chaos declares, as plain data (a `.policy` stanza or an attribute's expansion builds
/// it in a `static`). At most one fault of each kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChaosSettings {
    /// The faults and their rates (0 to 1), by [`FaultKind`] order.
    pub faults: [Option<(Fault, f64)>; 4],
    /// Only between these offsets after the chaos is built, if set.
    pub during: Option<(Duration, Duration)>,
    /// Only on this share of instances (0 to 1); all when `None`.
    pub instances: Option<f64>,
    /// Whether it starts on.
    pub enabled: bool,
}

impl ChaosSettings {
    /// No fault, on.
    pub const NONE: Self = Self {
        faults: [None; 4],
        during: None,
        instances: None,
        enabled: true,
    };

    /// With `fault` at `rate` (replacing one of its kind).
    #[must_use]
    pub const fn fault(mut self, fault: Fault, rate: f64) -> Self {
        self.faults[FaultKind::of(&fault).index()] = Some((fault, rate));
        self
    }
}

impl ChaosBuilder {
    /// Adds `fault` at `rate` (a share from 0 to 1), replacing a fault of the same kind.
    pub fn fault(mut self, fault: Fault, rate: f64) -> Self {
        self.settings = self.settings.fault(fault, rate);
        self
    }

    /// Only from `from` until `until` after the chaos is built (tokio's clock).
    pub fn during(mut self, from: Duration, until: Duration) -> Self {
        self.settings.during = Some((from, until));
        self
    }

    /// Only on `share` of the instances (0 to 1), chosen by [instance id](set_instance_id).
    pub fn instances(mut self, share: f64) -> Self {
        self.settings.instances = Some(share);
        self
    }

    /// Whether it starts on (on by default).
    pub fn enabled(mut self, on: bool) -> Self {
        self.settings.enabled = on;
        self
    }

    /// All the settings at once.
    pub fn settings(mut self, settings: ChaosSettings) -> Self {
        self.settings = settings;
        self
    }

    /// The chaos, its window starting now.
    pub fn build(self) -> Chaos {
        let chaos = Chaos::bare(self.name);
        chaos.apply(&self.settings);
        chaos.inner.declared.store(true, Relaxed);
        chaos
    }
}

/// One attempt's draw: nothing, or latency and/or an error to inject. The attempt owns it and
/// runs its body through it ([`run`](Self::run)), then hands it the outcome
/// ([`observe`](Self::observe)): what it injected is told to the breaker with that outcome,
/// as an argument of the call that records it, so no mark outlives the attempt or reaches
/// another breaker.
#[derive(Debug)]
#[must_use]
#[doc(hidden)]
pub struct Injection<'a> {
    chaos: Option<&'a Chaos>,
    delay: Option<Duration>,
    error: bool,
    /// What [`run`](Self::run) did: [`DID_NOTHING`], [`SLEEPING`] (the injected latency began
    /// and had not ended: if the attempt ends so, its deadline cut the latency short) or
    /// [`INJECTED_ERROR`].
    did: AtomicU8,
}

const DID_NOTHING: u8 = 0;
const SLEEPING: u8 = 1;
const INJECTED_ERROR: u8 = 2;

impl Injection<'_> {
    /// The latency to inject, and whether to inject an error, for a caller that runs the body
    /// itself (the tower layer); it then counts the error with [`Chaos::count_injected`].
    pub fn parts(&self) -> (Option<Duration>, bool) {
        (self.delay, self.error && self.chaos.is_some())
    }

    /// Nothing to inject.
    pub const fn none() -> Injection<'static> {
        Injection {
            chaos: None,
            delay: None,
            error: false,
            did: AtomicU8::new(DID_NOTHING),
        }
    }

    /// Runs `body` after the injected latency, or returns the injected error instead of running
    /// it. Put it inside the attempt's deadline, so the deadline bounds the latency.
    pub async fn run<F, R>(&self, body: F) -> R
    where
        F: Future<Output = R>,
        R: Injectable,
    {
        if let Some(delay) = self.delay {
            // Left set if the deadline drops the attempt mid-sleep: the expiry is the drill's.
            self.did.store(SLEEPING, Relaxed);
            tokio::time::sleep(delay).await;
            self.did.store(DID_NOTHING, Relaxed);
        }
        if let (true, Some(chaos)) = (self.error, self.chaos) {
            match R::injected(chaos) {
                Some(injected) => {
                    chaos.injected(FaultKind::Error, None);
                    self.did.store(INJECTED_ERROR, Relaxed);
                    return injected;
                }
                None => chaos.skipped(),
            }
        }
        body.await
    }

    /// Records the attempt's outcome in `breaker` and hands it on, as
    /// [`Breaker::observe`] does, except that a failure this injection caused (its injected
    /// error, or an expiry during its latency) is recorded as injected by the drill
    /// ([`Breaker::record_injected_failure`]): counted on this instance, never shared with the
    /// fleet, and an opening it decides says it was a drill. An expiry under the caller's own
    /// budget stays the caller's, injected latency or not.
    #[inline]
    pub fn observe<T, E>(
        &self,
        breaker: &Breaker,
        ran: Result<Result<T, E>, DeadlineExceeded>,
    ) -> Result<T, CallError<E>> {
        let Some(chaos) = self.chaos else {
            return breaker.observe(ran);
        };
        match (ran, self.did.load(Relaxed)) {
            (Ok(Err(error)), INJECTED_ERROR) => {
                breaker.record_injected_failure(chaos.name_arc());
                Err(CallError::Failed(error))
            }
            (Err(expired), SLEEPING) if !expired.is_callers() => {
                breaker.record_injected_failure(chaos.name_arc());
                Err(CallError::DeadlineExceeded(expired))
            }
            (ran, _) => breaker.observe(ran),
        }
    }
}

/// An attempt's output an injected error can be made for: a `Result` whose error the chaos's
/// [error function](error_with) builds.
#[doc(hidden)]
pub trait Injectable: Sized {
    /// The injected error as this output, if the chaos builds one of its type.
    fn injected(chaos: &Chaos) -> Option<Self>;
}

impl<T, E: 'static> Injectable for Result<T, E> {
    fn injected(chaos: &Chaos) -> Option<Self> {
        let build = chaos
            .inner
            .error
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        build().downcast::<E>().ok().map(|error| Err(*error))
    }
}

/// Registers how `chaos` builds the function's own error for [`Fault::Error`]. For a drill of
/// the registry, by name: [`Registry::chaos_error_for`](crate::Registry::chaos_error_for)
/// (`Registry::global().chaos_error_for("search_drill", || SearchError::Injected)`).
pub fn error_with<E, F>(chaos: &Chaos, build: F)
where
    E: Send + 'static,
    F: Fn() -> E + Send + Sync + 'static,
{
    let builder: ErrorBuilder = Arc::new(move || Box::new(build()) as Box<dyn Any + Send>);
    *chaos.inner.error.write().unwrap_or_else(|p| p.into_inner()) = Some(builder);
}

/// Whether drills may inject at all in this process: off until [`arm`] is called.
static ARMED: AtomicBool = AtomicBool::new(false);

/// Arms drills in this process: from now on, a drill that is on injects its faults. Off by
/// default, even in a build with the `chaos` feature: a declared drill, its `enabled`, an
/// override file or [`Chaos::enable`] decides *which* drills run, and only this explicit switch,
/// made at run time by the service itself (say, behind a flag or an environment variable it
/// reads), lets any of them run. Nothing read from outside the process (a request, the fleet's
/// override set in Redis) can arm it. Logged (`kind = "chaos_armed"`).
pub fn arm() {
    if !ARMED.swap(true, Relaxed) {
        tracing::warn!(
            target: "policy",
            mechanism = "chaos",
            name = "chaos",
            kind = "chaos_armed",
            injected = true,
            reason = "armed",
            "chaos drills are armed in this process: drills that are on inject their faults"
        );
    }
}

/// Disarms drills: no drill injects anything until [`arm`] is called again, whatever each is
/// switched to. Logged (`kind = "chaos_disarmed"`).
pub fn disarm() {
    if ARMED.swap(false, Relaxed) {
        tracing::info!(
            target: "policy",
            mechanism = "chaos",
            name = "chaos",
            kind = "chaos_disarmed",
            injected = true,
            reason = "disarmed",
            "chaos drills are disarmed in this process"
        );
    }
}

/// Whether drills are [armed](arm) in this process.
pub fn is_armed() -> bool {
    ARMED.load(Relaxed)
}

/// The instance id that decides which instances a chaos with a share of instances hits: set
/// once at startup (`POLICY_INSTANCE`, else `HOSTNAME`, else the process id, by default).
pub fn set_instance_id(id: impl Into<Arc<str>>) {
    *INSTANCE.write().unwrap_or_else(|p| p.into_inner()) = Some(id.into());
}

static INSTANCE: RwLock<Option<Arc<str>>> = RwLock::new(None);

/// The instance id in use (see [`set_instance_id`]).
pub fn instance_id() -> Arc<str> {
    if let Some(id) = INSTANCE.read().unwrap_or_else(|p| p.into_inner()).clone() {
        return id;
    }
    let id: Arc<str> = std::env::var("POLICY_INSTANCE")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| std::process::id().to_string())
        .into();
    set_instance_id(id.clone());
    id
}

/// Whether the instance `instance` is among `share` (0 to 1) of the instances for the chaos
/// `name`: a hash of both (FNV-1a, stable across builds and platforms), so the choice is the
/// same on every start and differs between chaos names.
pub fn hits_instance(name: &str, instance: &str, share: f64) -> bool {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes().chain([0]).chain(instance.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash % u64::from(MILLION) < u64::from(ppm(share))
}

impl Chaos {
    /// A chaos named `name`, with no faults until you add them.
    pub fn builder(name: impl Into<Arc<str>>) -> ChaosBuilder {
        ChaosBuilder {
            name: name.into(),
            settings: ChaosSettings::NONE,
        }
    }

    /// An entry with nothing declared and off (the registry's, before a declaration).
    pub(crate) fn bare(name: Arc<str>) -> Self {
        let metrics = ChaosMetrics::new(&name);
        Self {
            inner: Arc::new(Inner {
                name,
                on: AtomicBool::new(false),
                slots: Default::default(),
                latency: Default::default(),
                retry_after: AtomicU64::new(0),
                window: Default::default(),
                instances: AtomicU32::new(MILLION),
                epoch: Instant::now(),
                declared: AtomicBool::new(false),
                switched: AtomicBool::new(false),
                error: RwLock::new(None),
                skipped: AtomicU64::new(0),
                metrics,
            }),
        }
    }

    /// Applies `settings` if nothing was declared for this name yet (the first declaration
    /// wins, as for every named mechanism). What was switched at run time before it stays: a
    /// fault set by [`Chaos::set`] keeps its settings, and an [`enable`](Chaos::enable) or
    /// [`disable`](Chaos::disable) keeps the drill on or off.
    pub fn declare(&self, settings: &ChaosSettings) {
        if self
            .inner
            .declared
            .compare_exchange(false, true, Relaxed, Relaxed)
            .is_err()
        {
            return;
        }
        for (fault, rate) in settings.faults.iter().flatten() {
            let slot = &self.inner.slots[FaultKind::of(fault).index()];
            if !slot.declared.load(Relaxed) {
                self.set(*fault, *rate);
            }
        }
        self.apply_scope(settings);
        if !self.inner.switched.load(Relaxed) {
            self.inner.on.store(settings.enabled, Relaxed);
        }
    }

    fn apply(&self, settings: &ChaosSettings) {
        for (fault, rate) in settings.faults.iter().flatten() {
            self.set(*fault, *rate);
        }
        self.apply_scope(settings);
        self.inner.on.store(settings.enabled, Relaxed);
    }

    /// The window and the share of instances.
    fn apply_scope(&self, settings: &ChaosSettings) {
        let (from, until) = settings.during.unwrap_or_default();
        self.inner.window.0.store(saturating_nanos(from), Relaxed);
        self.inner.window.1.store(saturating_nanos(until), Relaxed);
        self.inner
            .instances
            .store(settings.instances.map_or(MILLION, ppm), Relaxed);
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether it is on (its window and share of instances aside).
    #[inline]
    pub fn is_on(&self) -> bool {
        self.inner.on.load(Relaxed)
    }

    /// Turns it on.
    pub fn enable(&self) {
        self.inner.switched.store(true, Relaxed);
        self.inner.on.store(true, Relaxed);
        switched(&self.inner.name, "enabled");
    }

    /// Turns it off: every attempt runs the real call.
    pub fn disable(&self) {
        self.inner.switched.store(true, Relaxed);
        self.inner.on.store(false, Relaxed);
        switched(&self.inner.name, "disabled");
    }

    /// Sets `fault` (replacing one of its kind) at `rate`, a share from 0 to 1.
    pub fn set(&self, fault: Fault, rate: f64) {
        let kind = FaultKind::of(&fault);
        match fault {
            Fault::Latency(latency) => {
                let (k, a, b) = latency.encode();
                self.inner.latency.0.store(k, Relaxed);
                self.inner.latency.1.store(a, Relaxed);
                self.inner.latency.2.store(b, Relaxed);
            }
            Fault::TooManyRequests { retry_after } => {
                self.inner
                    .retry_after
                    .store(saturating_nanos(retry_after), Relaxed);
            }
            Fault::Error | Fault::Refuse => {}
        }
        let slot = &self.inner.slots[kind.index()];
        slot.rate.store(ppm(rate), Relaxed);
        slot.declared.store(true, Relaxed);
    }

    /// Changes the rate of the fault `kind` (a share from 0 to 1); 0 stops it.
    pub fn set_rate(&self, kind: FaultKind, rate: f64) {
        self.inner.slots[kind.index()]
            .rate
            .store(ppm(rate), Relaxed);
    }

    /// Removes the fault `kind`.
    pub fn clear(&self, kind: FaultKind) {
        let slot = &self.inner.slots[kind.index()];
        slot.declared.store(false, Relaxed);
        slot.rate.store(0, Relaxed);
    }

    /// The fault of `kind` with its current settings, if declared.
    pub fn fault(&self, kind: FaultKind) -> Option<Fault> {
        if !self.inner.slots[kind.index()].declared.load(Relaxed) {
            return None;
        }
        Some(match kind {
            FaultKind::Latency => Fault::Latency(Latency::decode(
                self.inner.latency.0.load(Relaxed),
                self.inner.latency.1.load(Relaxed),
                self.inner.latency.2.load(Relaxed),
            )),
            FaultKind::Error => Fault::Error,
            FaultKind::Refuse => Fault::Refuse,
            FaultKind::TooManyRequests => Fault::TooManyRequests {
                retry_after: Duration::from_nanos(self.inner.retry_after.load(Relaxed)),
            },
        })
    }

    /// Whether this instance is in the window and share now.
    fn active(&self) -> bool {
        let until = self.inner.window.1.load(Relaxed);
        if until != 0 {
            let since = saturating_nanos(self.inner.epoch.elapsed());
            if since < self.inner.window.0.load(Relaxed) || since >= until {
                return false;
            }
        }
        let share = self.inner.instances.load(Relaxed);
        share >= MILLION
            || hits_instance(
                &self.inner.name,
                &instance_id(),
                f64::from(share) / f64::from(MILLION),
            )
    }

    /// The faults for one attempt, drawn after the breaker's check and the bulkhead's
    /// admission: `Err` for an injected refusal or 429 (the work never runs; a 429 trips
    /// `breaker` for its `Retry-After`), else the latency and error to inject, if any. When the
    /// chaos is off this is one relaxed load.
    #[inline]
    pub fn draw<'a>(
        &'a self,
        breaker: Option<&'a Breaker>,
    ) -> Result<Injection<'a>, ResilienceError> {
        if !self.is_on() {
            return Ok(Injection::none());
        }
        self.draw_on(breaker)
    }

    #[cold]
    #[inline(never)]
    fn draw_on<'a>(
        &'a self,
        breaker: Option<&'a Breaker>,
    ) -> Result<Injection<'a>, ResilienceError> {
        if !is_armed() || !self.active() {
            return Ok(Injection::none());
        }
        let slots = &self.inner.slots;
        if slots[FaultKind::Refuse.index()].hit() {
            self.injected(FaultKind::Refuse, None);
            return Err(ResilienceError::new(
                self.inner.name.clone(),
                RefusalReason::Injected {
                    fault: FaultKind::Refuse.as_str(),
                    retry_after: None,
                },
            ));
        }
        if slots[FaultKind::TooManyRequests.index()].hit() {
            let retry_after = Duration::from_nanos(self.inner.retry_after.load(Relaxed));
            self.injected(FaultKind::TooManyRequests, Some(retry_after));
            if let Some(breaker) = breaker {
                // Opens this instance's breaker, as a real 429 would; an injected opening is
                // never shared with the fleet.
                breaker.trip_injected(
                    retry_after,
                    "injected 429 Too Many Requests (chaos drill)",
                    self.inner.name.clone(),
                );
            }
            return Err(ResilienceError::new(
                self.inner.name.clone(),
                RefusalReason::Injected {
                    fault: FaultKind::TooManyRequests.as_str(),
                    retry_after: Some(retry_after),
                },
            ));
        }
        let delay = slots[FaultKind::Latency.index()].hit().then(|| {
            let delay = self
                .fault(FaultKind::Latency)
                .map_or(Duration::ZERO, |f| match f {
                    Fault::Latency(latency) => latency.sample(),
                    _ => Duration::ZERO,
                });
            self.injected(FaultKind::Latency, Some(delay));
            delay
        });
        let error = slots[FaultKind::Error.index()].hit();
        Ok(Injection {
            chaos: Some(self),
            delay,
            error,
            did: AtomicU8::new(DID_NOTHING),
        })
    }

    /// Counts (and logs) one injected fault of `kind` that the caller injected itself (the tower
    /// layer's error, which is not the function's own).
    pub fn count_injected(&self, kind: FaultKind) {
        self.injected(kind, None);
    }

    /// Its name, shared.
    pub fn name_arc(&self) -> Arc<str> {
        self.inner.name.clone()
    }

    fn injected(&self, kind: FaultKind, duration: Option<Duration>) {
        let slot = &self.inner.slots[kind.index()];
        slot.injected.fetch_add(1, Relaxed);
        self.inner.metrics.injected(kind);
        let name = &*self.inner.name;
        tracing::info!(
            target: "policy",
            operation = crate::observe::operation(),
            mechanism = "chaos",
            name,
            kind = "injected",
            injected = true,
            fault = kind.as_str(),
            reason = kind.as_str(),
            delay_ms = duration.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            "chaos `{name}` injected a fault: {kind} (a drill, not an incident)"
        );
    }

    fn skipped(&self) {
        self.inner.skipped.fetch_add(1, Relaxed);
        let name = &*self.inner.name;
        tracing::warn!(
            target: "policy",
            operation = crate::observe::operation(),
            mechanism = "chaos",
            name,
            kind = "injection_skipped",
            injected = false,
            fault = "error",
            reason = "no_error_function",
            "chaos `{name}` could not inject an error: register one of the function's error type with `Registry::global().chaos_error_for(\"{name}\", || ...)`"
        );
    }

    /// What it is and what it injected, now.
    pub fn snapshot(&self) -> ChaosSnapshot {
        let inner = &self.inner;
        let until = inner.window.1.load(Relaxed);
        let share = inner.instances.load(Relaxed);
        ChaosSnapshot {
            name: inner.name.clone(),
            on: self.is_on(),
            active: is_armed() && self.is_on() && self.active(),
            faults: FaultKind::ALL
                .iter()
                .filter_map(|&kind| {
                    let fault = self.fault(kind)?;
                    let slot = &inner.slots[kind.index()];
                    Some(FaultSnapshot {
                        kind,
                        fault,
                        rate: f64::from(slot.rate.load(Relaxed)) / f64::from(MILLION),
                        injected: slot.injected.load(Relaxed),
                    })
                })
                .collect(),
            during: (until != 0).then(|| ChaosWindow {
                from: Duration::from_nanos(inner.window.0.load(Relaxed)),
                until: Duration::from_nanos(until),
            }),
            instances: f64::from(share) / f64::from(MILLION),
            skipped: inner.skipped.load(Relaxed),
        }
    }
}

fn switched(name: &str, reason: &'static str) {
    tracing::info!(
        target: "policy",
        operation = crate::observe::operation(),
        mechanism = "chaos",
        name,
        kind = "chaos_switched",
        injected = true,
        reason,
        "chaos `{name}` {reason}"
    );
}

/// A chaos's window, as offsets after it was built.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ChaosWindow {
    /// From this long after it was built.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "from_ms", serialize_with = "crate::json::millis")
    )]
    pub from: Duration,
    /// Until this long after it was built.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "until_ms", serialize_with = "crate::json::millis")
    )]
    pub until: Duration,
}

/// One fault of a chaos, in its snapshot.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct FaultSnapshot {
    /// Which fault.
    pub kind: FaultKind,
    /// Its settings.
    pub fault: Fault,
    /// Its rate, a share from 0 to 1.
    pub rate: f64,
    /// How many it injected.
    pub injected: u64,
}

/// A chaos's state, in [`Registry::chaos_snapshots`](crate::Registry::chaos_snapshots) (the dashboard's `chaos`).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ChaosSnapshot {
    /// Its name.
    pub name: Arc<str>,
    /// Whether it is switched on.
    pub on: bool,
    /// Whether it injects now: drills [armed](arm), it on, inside its window and on this
    /// instance.
    pub active: bool,
    /// Its faults, in the order they are drawn.
    pub faults: Vec<FaultSnapshot>,
    /// Its window, if it has one.
    pub during: Option<ChaosWindow>,
    /// The share of instances it hits (1 for all).
    pub instances: f64,
    /// Errors it could not inject (no error function for the function's error type).
    pub skipped: u64,
}
