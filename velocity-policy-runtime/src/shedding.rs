//! Is this work worth doing under the current pressure? Load shedding.
//!
//! Every system has a load at which it cannot serve everything; the only choice is whether the
//! thing dropped is chosen or arbitrary. The three work classes become an admission decision
//! against two independent signals:
//!
//! - **load**: how full the compartment is (a bulkhead's [`load`](crate::Bulkhead::load)).
//!   The thresholds sit *below* the bulkhead's own limit on purpose (deferred work at 0.5,
//!   background at 0.25 by default): dropping optional work at half capacity is how the pool
//!   avoids being full for the work that is not optional. `critical` work is never shed for
//!   load; when there is truly no room, the bulkhead refuses it visibly.
//! - **budget**: how much of the deadline is left. Work whose expected cost exceeds the
//!   remaining budget is not started, whatever its class: it would spend a slot only to be
//!   abandoned.
//!
//! [`decide`] is a pure function of those numbers and returns its reason, because a shed
//! nobody can see is indistinguishable from a bug. [`Shedder`] wraps it with counters and
//! tracing for a named call site.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::WorkClass;
//! use velocity_policy_runtime::shedding::{decide, Decision, ShedReason, Thresholds};
//!
//! let t = Thresholds::default();
//! let plenty = Duration::from_secs(1);
//! let cost = Duration::from_millis(10);
//!
//! // Critical work is never shed for load.
//! assert!(decide(WorkClass::Critical, 1.0, plenty, cost, &t).is_admit());
//! // Deferred work is shed at half load.
//! let d = decide(WorkClass::Deferred, 0.6, plenty, cost, &t);
//! assert!(matches!(d, Decision::Shed(ShedReason::Load { .. })));
//! // Nothing starts that cannot finish in the time left.
//! let d = decide(WorkClass::Critical, 0.0, Duration::from_millis(5), cost, &t);
//! assert!(matches!(d, Decision::Shed(ShedReason::Budget { .. })));
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::deadline::Deadline;
pub use crate::error::ShedReason;
use crate::error::{RefusalReason, ResilienceError};
use crate::instruments::ShedMetrics;
use crate::observe;
use crate::tuning::Tuned;
use velocity_policy_model::WorkClass;

/// A shedder's settings: defined once, in `velocity-policy-model`, for the `.policy` language,
/// the attribute macros, this runtime and its overrides.
pub use velocity_policy_model::shedding::SheddingConfig;

/// Load thresholds at or above which optional work is shed: the shedder's [`SheddingConfig`],
/// under the name this module has always given it.
pub type Thresholds = SheddingConfig;

/// Why work was admitted.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "signal", rename_all = "snake_case"))]
pub enum AdmitReason {
    /// Critical work within its budget: load is never a reason to shed it.
    Critical,
    /// The load was below the class's threshold and the cost fits the budget.
    BelowThreshold {
        /// The load seen.
        load: f64,
        /// The class's threshold.
        threshold: f64,
    },
}

/// The outcome of [`decide`], with its reason.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "decision", content = "reason", rename_all = "snake_case")
)]
pub enum Decision {
    /// Start the work.
    Admit(AdmitReason),
    /// Do not start it.
    Shed(ShedReason),
}

impl Decision {
    /// True when the work may start.
    pub const fn is_admit(&self) -> bool {
        matches!(self, Self::Admit(_))
    }
}

/// The shedding decision: a pure function of the work class, the load, the remaining budget
/// and the expected cost.
///
/// The budget rule applies to every class; the load rule never applies to critical work.
pub fn decide(
    class: WorkClass,
    load: f64,
    remaining: Duration,
    expected_cost: Duration,
    thresholds: &Thresholds,
) -> Decision {
    if expected_cost > remaining {
        return Decision::Shed(ShedReason::Budget {
            remaining,
            expected_cost,
        });
    }
    match thresholds.for_class(class) {
        None => Decision::Admit(AdmitReason::Critical),
        // NaN loads are treated as full: an unknown load is no reason to start optional work.
        Some(threshold) if load >= threshold || load.is_nan() => Decision::Shed(ShedReason::Load {
            class,
            load,
            threshold,
        }),
        Some(threshold) => Decision::Admit(AdmitReason::BelowThreshold { load, threshold }),
    }
}

#[derive(Debug, Default)]
struct Stats {
    shed_load: [AtomicU64; 3],
    shed_budget: [AtomicU64; 3],
}

fn class_index(class: WorkClass) -> usize {
    match class {
        WorkClass::Critical => 0,
        WorkClass::Deferred => 1,
        WorkClass::Background => 2,
    }
}

/// A named shedding point: [`decide`] plus counters, tracing and a refusal.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_runtime::{Deadline, RefusalKind, Shedder};
/// use velocity_policy_runtime::WorkClass;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let shedder = Shedder::new("documents");
/// let deadline = Deadline::after(Duration::from_secs(1));
/// let refusal = shedder
///     .admit(WorkClass::Background, 0.3, &deadline, Duration::from_millis(5))
///     .unwrap_err();
/// assert_eq!(refusal.kind(), RefusalKind::Shed);
/// assert_eq!(shedder.snapshot().shed_load.background, 1);
/// # }
/// ```
pub struct Shedder {
    name: Arc<str>,
    /// The deferred and background thresholds, as `f64` bits: one cell, so a reload changes
    /// them together.
    thresholds: Tuned<[u64; 2]>,
    stats: Stats,
    metrics: ShedMetrics,
}

impl fmt::Debug for Shedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shedder")
            .field("name", &self.name)
            .field("thresholds", &self.thresholds())
            .finish()
    }
}

/// Counts per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PerClass {
    /// Critical work.
    pub critical: u64,
    /// Deferred work.
    pub deferred: u64,
    /// Background work.
    pub background: u64,
}

impl PerClass {
    fn read(counters: &[AtomicU64; 3]) -> Self {
        Self {
            critical: counters[0].load(Ordering::Relaxed),
            deferred: counters[1].load(Ordering::Relaxed),
            background: counters[2].load(Ordering::Relaxed),
        }
    }
}

/// A point-in-time view of a shedder, for dashboards.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ShedderSnapshot {
    /// The shedder's name: for an annotated function's, its operation's name made unique by
    /// the module path (`policy_demo::service::publish_activity`).
    pub name: Arc<str>,
    /// The name without the module path (`publish_activity`, the operation it decides for):
    /// what a dashboard shows. The whole name for a shedder built by hand.
    pub display_name: Arc<str>,
    /// Its thresholds.
    pub thresholds: Thresholds,
    /// Work shed for load, per class (critical is always 0).
    pub shed_load: PerClass,
    /// Work shed for budget, per class.
    pub shed_budget: PerClass,
}

impl Shedder {
    /// A shedder with the default thresholds.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self::with_thresholds(name, Thresholds::default())
    }

    /// A shedder with the given thresholds.
    pub fn with_thresholds(name: impl Into<Arc<str>>, thresholds: Thresholds) -> Self {
        let name = name.into();
        Self {
            metrics: ShedMetrics::new("shedder", observe::short_name(&name), &WorkClass::ALL),
            name,
            thresholds: Tuned::new([
                thresholds.deferred.to_bits(),
                thresholds.background.to_bits(),
            ]),
            stats: Stats::default(),
        }
    }

    /// The shedder's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its thresholds now, read together.
    #[inline]
    pub fn thresholds(&self) -> Thresholds {
        let [deferred, background] = self.thresholds.read();
        Thresholds {
            deferred: f64::from_bits(deferred),
            background: f64::from_bits(background),
        }
    }

    /// Uses `thresholds` from the next decision on; true when they changed.
    #[cfg(feature = "overrides")]
    pub(crate) fn retune(&self, thresholds: Thresholds) -> bool {
        self.thresholds.write([
            thresholds.deferred.to_bits(),
            thresholds.background.to_bits(),
        ])
    }

    /// Decides with [`decide`], counts the decision, and turns a shed into a refusal with its
    /// reason (and a tracing event).
    pub fn admit(
        &self,
        class: WorkClass,
        load: f64,
        deadline: &Deadline,
        expected_cost: Duration,
    ) -> Result<AdmitReason, ResilienceError> {
        self.admit_with_remaining(class, load, deadline.remaining(), expected_cost)
    }

    /// Like [`Shedder::admit`], with the remaining budget given directly (work with no
    /// deadline passes [`Deadline::MAX_BUDGET`]).
    pub fn admit_with_remaining(
        &self,
        class: WorkClass,
        load: f64,
        remaining: Duration,
        expected_cost: Duration,
    ) -> Result<AdmitReason, ResilienceError> {
        // Critical work is never shed for load: its call reads no threshold.
        let thresholds = match class {
            WorkClass::Critical => Thresholds::DEFAULT,
            _ => self.thresholds(),
        };
        match decide(class, load, remaining, expected_cost, &thresholds) {
            // Admissions are not counted: that would put a contended write on every call.
            Decision::Admit(reason) => Ok(reason),
            Decision::Shed(reason) => {
                let counters = match reason {
                    ShedReason::Load { .. } => &self.stats.shed_load,
                    // `decide` never sheds for criticality: the bulkhead does.
                    ShedReason::Budget { .. } | ShedReason::Criticality { .. } => {
                        &self.stats.shed_budget
                    }
                };
                counters[class_index(class)].fetch_add(1, Ordering::Relaxed);
                observe::shed("shedder", &self.name, class.as_str(), &reason, &reason);
                self.metrics.shed(class, reason.signal());
                Err(ResilienceError::new(
                    self.name.clone(),
                    RefusalReason::Shed(reason),
                ))
            }
        }
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> ShedderSnapshot {
        ShedderSnapshot {
            name: self.name.clone(),
            display_name: crate::observe::short_name(&self.name).into(),
            thresholds: self.thresholds(),
            shed_load: PerClass::read(&self.stats.shed_load),
            shed_budget: PerClass::read(&self.stats.shed_budget),
        }
    }
}
