//! Why a mechanism refused: the reason a [`ResilienceError`](super::ResilienceError) carries, and
//! the causes and signals it names (what opened a breaker, why work was shed). They live next to
//! the error, not in the mechanisms that produce them, so the error depends on no mechanism.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use velocity_policy_model::WorkClass;

use super::{Human, RefusalKind};

/// Why a mechanism refused. The variant decides the [`RefusalKind`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "reason", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum RefusalReason {
    /// The breaker is open for `remaining` more, because of `cause`.
    BreakerOpen {
        /// How long the breaker stays open from the moment of the refusal.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "remaining_ms", serialize_with = "crate::json::millis")
        )]
        remaining: Duration,
        /// What opened it.
        cause: OpenCause,
    },
    /// All `max_concurrent` slots were busy and the queue of `max_queued` was full.
    BulkheadFull {
        /// The bulkhead's slot count.
        max_concurrent: u32,
        /// The queue places the caller could have waited in, all taken: the bulkhead's queue
        /// length, or 0 for a caller that never queues (`try_acquire`).
        max_queued: u32,
    },
    /// One request's after-response queue already held its most deferred tasks.
    RequestQueueFull {
        /// The most tasks one request may defer.
        max_per_request: u32,
    },
    /// The caller waited in the bulkhead's queue until its deadline, and no slot freed.
    BulkheadQueueTimeout {
        /// How long the caller waited in the queue.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "waited_ms", serialize_with = "crate::json::millis")
        )]
        waited: Duration,
    },
    /// The shedding decision dropped the work.
    Shed(ShedReason),
    /// Less than the minimum useful budget was left.
    InsufficientBudget {
        /// What was left of the deadline.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "remaining_ms", serialize_with = "crate::json::millis")
        )]
        remaining: Duration,
        /// The operation's stated minimum useful budget.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "min_budget_ms", serialize_with = "crate::json::millis")
        )]
        min_budget: Duration,
    },
    /// A rate limiter refused; `retry_after` says when a slot frees, when known.
    RateLimited {
        /// When the limiter expects to admit again, if it knows.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "retry_after_ms", serialize_with = "crate::json::millis_opt")
        )]
        retry_after: Option<Duration>,
        /// Why: over the rate, or the limiter's store failed and it fails closed.
        detail: Arc<str>,
    },
    /// A chaos drill injected this refusal: the work never ran, and nothing is wrong with the
    /// dependency. The variant exists in every build; only a drill (feature `chaos`) makes one. A 429 carries its `Retry-After` and is
    /// [`RateLimited`](RefusalKind::RateLimited); a plain refusal is
    /// [`Injected`](RefusalKind::Injected).
    Injected {
        /// The fault's kind: `refuse` or `status_429`.
        fault: &'static str,
        /// The injected `Retry-After`, for a 429.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "retry_after_ms", serialize_with = "crate::json::millis_opt")
        )]
        retry_after: Option<Duration>,
    },
}

impl RefusalReason {
    /// The stable kind of this reason.
    pub const fn kind(&self) -> RefusalKind {
        match self {
            Self::BreakerOpen { .. } => RefusalKind::BreakerOpen,
            Self::BulkheadFull { .. }
            | Self::RequestQueueFull { .. }
            | Self::BulkheadQueueTimeout { .. } => RefusalKind::BulkheadFull,
            Self::Shed(_) => RefusalKind::Shed,
            Self::InsufficientBudget { .. } => RefusalKind::InsufficientBudget,
            Self::RateLimited { .. } => RefusalKind::RateLimited,
            Self::Injected {
                retry_after: Some(_),
                ..
            } => RefusalKind::RateLimited,
            Self::Injected { .. } => RefusalKind::Injected,
        }
    }
}

impl RefusalReason {
    /// The reason as a short, stable code, the `reason` field of the refusal's tracing event:
    /// the opening's cause for an open breaker (see [`OpenCause::code`]), `full`,
    /// `request_queue_full`, `queue_timeout`, the shed signal (`load` or `budget`),
    /// `min_budget` or `rate`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BreakerOpen { cause, .. } => cause.code(),
            Self::BulkheadFull { .. } => "full",
            Self::RequestQueueFull { .. } => "request_queue_full",
            Self::BulkheadQueueTimeout { .. } => "queue_timeout",
            Self::Shed(reason) => reason.signal(),
            Self::InsufficientBudget { .. } => "min_budget",
            Self::RateLimited { .. } => "rate",
            Self::Injected { .. } => "injected",
        }
    }

    /// The mechanism that refused, the `mechanism` field of the refusal's tracing event:
    /// `breaker`, `bulkhead`, `deferred` (a request's after-response queue), `shedder`,
    /// `deadline` or `rate_limiter`.
    pub const fn mechanism(&self) -> &'static str {
        match self {
            Self::BreakerOpen { .. } => "breaker",
            Self::BulkheadFull { .. } | Self::BulkheadQueueTimeout { .. } => "bulkhead",
            Self::RequestQueueFull { .. } => "deferred",
            Self::Shed(_) => "shedder",
            Self::InsufficientBudget { .. } => "deadline",
            Self::RateLimited { .. } => "rate_limiter",
            Self::Injected { .. } => "chaos",
        }
    }
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BreakerOpen { remaining, cause } => {
                write!(f, "open for another {} after {cause}", Human(*remaining))
            }
            Self::BulkheadFull {
                max_concurrent,
                max_queued,
            } => write!(
                f,
                "all {max_concurrent} slots busy and all {max_queued} queue places taken"
            ),
            Self::RequestQueueFull { max_per_request } => write!(
                f,
                "the request's queue already holds its {max_per_request} deferred tasks"
            ),
            Self::BulkheadQueueTimeout { waited } => write!(
                f,
                "waited {} in the queue and the deadline passed",
                Human(*waited)
            ),
            Self::Shed(reason) => write!(f, "{reason}"),
            // Nothing left: say what happened rather than compare zero with a minimum.
            Self::InsufficientBudget { remaining, .. } if remaining.is_zero() => {
                f.write_str("the deadline it was called under had passed before it could start")
            }
            Self::InsufficientBudget {
                remaining,
                min_budget,
            } => write!(
                f,
                "{} left of the deadline, below the minimum useful budget of {}",
                Human(*remaining),
                Human(*min_budget)
            ),
            Self::RateLimited {
                retry_after,
                detail,
            } => match retry_after {
                Some(after) => write!(f, "{detail}; a slot frees in {}", Human(*after)),
                None => write!(f, "{detail}"),
            },
            Self::Injected { fault, retry_after } => match retry_after {
                Some(after) => write!(
                    f,
                    "injected {fault} (a chaos drill): retry after {}",
                    Human(*after)
                ),
                None => write!(f, "injected {fault} (a chaos drill)"),
            },
        }
    }
}

/// What opened a breaker. Refusals carry it, and the opening's tracing event logs it.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "cause", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum OpenCause {
    /// `count` failures inside `window`.
    Failures {
        /// Failures counted in the window when it opened.
        count: u32,
        /// The window.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "window_ms", serialize_with = "crate::json::millis")
        )]
        window: Duration,
    },
    /// `failures` of `calls` inside `window`, at or above `ratio`.
    FailureRatio {
        /// Failures counted in the window.
        failures: u32,
        /// Calls counted in the window.
        calls: u32,
        /// The configured ratio.
        ratio: f64,
        /// The window.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "window_ms", serialize_with = "crate::json::millis")
        )]
        window: Duration,
    },
    /// A probe failed right after a cooldown: one failure reopens.
    ProbeFailed,
    /// The dependency told us to back off for `retry_after`.
    Tripped {
        /// The instructed pause.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "retry_after_ms", serialize_with = "crate::json::millis")
        )]
        retry_after: Duration,
        /// What the dependency said (say, `429 Too Many Requests`).
        reason: Arc<str>,
    },
    /// Another instance opened it and shared the opening through the store.
    Shared {
        /// The other instance's account of the cause.
        detail: Arc<str>,
    },
    /// An opening whose deciding failure (the one recorded as it opened) was injected by the
    /// chaos drill `drill`: a drill, not an incident. `opened_by` is what the breaker counted,
    /// as it would say without the drill. The variant exists in every build; only a drill
    /// (feature `chaos`) makes one, through [`Breaker::record_injected_failure`] and
    /// [`Breaker::trip_injected`](crate::Breaker::trip_injected).
    ///
    /// [`Breaker::record_injected_failure`]: crate::Breaker::record_injected_failure
    Injected {
        /// The drill that injected the deciding failure.
        drill: Arc<str>,
        /// What the breaker counted (never itself `Injected`).
        opened_by: Box<OpenCause>,
    },
}

impl OpenCause {
    /// For an opening from counted failures, the failures counted and their window.
    pub fn counted(&self) -> Option<(u32, Duration)> {
        match self {
            Self::Injected { opened_by, .. } => opened_by.counted(),
            Self::Failures { count, window } => Some((*count, *window)),
            Self::FailureRatio {
                failures, window, ..
            } => Some((*failures, *window)),
            _ => None,
        }
    }
}

impl OpenCause {
    /// The cause as a short, stable code: `failures`, `failure_ratio`, `probe_failed`,
    /// `retry_after` or `shared`. An injected opening has the code of what was counted
    /// (see [`injected_by`](Self::injected_by) for the drill).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Injected { opened_by, .. } => opened_by.code(),
            Self::Failures { .. } => "failures",
            Self::FailureRatio { .. } => "failure_ratio",
            Self::ProbeFailed => "probe_failed",
            Self::Tripped { .. } => "retry_after",
            Self::Shared { .. } => "shared",
        }
    }
}

impl OpenCause {
    /// The chaos drill that injected the failure that opened the breaker, if one did
    /// (always `None` without the feature `chaos`).
    pub fn injected_by(&self) -> Option<&str> {
        match self {
            Self::Injected { drill, .. } => Some(drill),
            _ => None,
        }
    }
}

impl fmt::Display for OpenCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Injected { drill, opened_by } => write!(
                f,
                "{opened_by}, the last one injected by chaos drill `{drill}` (a drill, not an incident)"
            ),
            Self::Failures { count, window } => {
                write!(f, "{count} failures within {}", Human(*window))
            }
            Self::FailureRatio {
                failures,
                calls,
                ratio,
                window,
            } => write!(
                f,
                "{failures} failures in {calls} calls within {} (at or above {:.0}%)",
                Human(*window),
                ratio * 100.0
            ),
            Self::ProbeFailed => f.write_str("a probe failed right after the cooldown"),
            Self::Tripped {
                retry_after,
                reason,
            } => write!(
                f,
                "the dependency asked for {}: {reason}",
                Human(*retry_after)
            ),
            Self::Shared { detail } => write!(f, "another instance: {detail}"),
        }
    }
}

/// Why work was shed.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "signal", rename_all = "snake_case"))]
pub enum ShedReason {
    /// The compartment was at or above the class's threshold.
    Load {
        /// The class of the shed work.
        class: WorkClass,
        /// The load seen.
        load: f64,
        /// The class's threshold.
        threshold: f64,
    },
    /// The work's expected cost exceeds what is left of the deadline.
    Budget {
        /// What was left.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "remaining_ms", serialize_with = "crate::json::millis")
        )]
        remaining: Duration,
        /// What the work was expected to take.
        #[cfg_attr(
            feature = "serde",
            serde(rename = "expected_cost_ms", serialize_with = "crate::json::millis")
        )]
        expected_cost: Duration,
    },
    /// A request of a sheddable [criticality](crate::criticality) found the bulkhead's free slots
    /// kept for more important requests: the levels above it need them (their recent peak of
    /// calls in flight, less what they hold now).
    Criticality {
        /// The request's level.
        level: velocity_policy_model::Criticality,
        /// Slots free when it arrived.
        free: u32,
        /// Slots kept for the levels above it.
        kept: u32,
    },
}

impl ShedReason {
    /// The signal that decided, as a stable string: `load`, `budget` or `criticality`.
    pub const fn signal(&self) -> &'static str {
        match self {
            Self::Load { .. } => "load",
            Self::Budget { .. } => "budget",
            Self::Criticality { .. } => "criticality",
        }
    }
}

impl fmt::Display for ShedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Load {
                class,
                load,
                threshold,
            } => write!(
                f,
                "{class} work shed at load {load:.2} (threshold {threshold:.2})"
            ),
            Self::Budget {
                remaining,
                expected_cost,
            } => write!(
                f,
                "expected cost {} exceeds the {} left of the deadline",
                Human(*expected_cost),
                Human(*remaining)
            ),
            Self::Criticality { level, free, kept } => write!(
                f,
                "a {level} request found its {free} free slots kept for more important requests ({kept} needed)"
            ),
        }
    }
}
