//! The metric handles of each mechanism (feature `metrics`), registered once, when the
//! mechanism is built (or an operation is first called), and kept: a call never looks a
//! metric up. Without the feature every handle here is empty and every method does nothing.
//!
//! Names, types, labels and units are documented in [`observe`](crate::observe#metrics); this
//! module is the one place that spells them.

// `allow`, not `expect`: which names and handles have nothing to record without `metrics`
// depends on the other features (the calls' handles are read by the meter with `dashboard`,
// the drills' name with `chaos`).
#![cfg_attr(
    not(feature = "metrics"),
    allow(
        dead_code,
        reason = "without `metrics` some call handles and names have nothing to record"
    )
)]

// The handles and their registration: `metrics`' when the feature is on, a stand-in whose
// handles are empty and whose methods do nothing when it is off; chosen here, once.
#[cfg_attr(not(feature = "metrics"), path = "instruments/no_recorder.rs")]
mod recorder;
pub(crate) use recorder::{Counter, Gauge, Histogram, ON, Since, counter, recorder_installed};
use recorder::{gauge, histogram};

use velocity_policy_model::WorkClass;

use crate::error::RefusalKind;

macro_rules! opaque_debug {
    ($($handle:ident),*) => {$(
        impl std::fmt::Debug for $handle {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(stringify!($handle))
            }
        }
    )*};
}

opaque_debug!(Counter, Gauge, Histogram);

/// Label pairs: keys are ours, values are mechanism names, operation names and codes.
type Labels<'a> = &'a [(&'static str, &'a str)];

// The metric names: the one place they are spelled.
pub(crate) const CALL_DURATION: &str = "policy_call_duration_seconds";
pub(crate) const CALL_ATTEMPTS: &str = "policy_call_attempts";
pub(crate) const BREAKER_STATE: &str = "policy_breaker_state";
pub(crate) const BREAKER_OPENINGS: &str = "policy_breaker_openings_total";
pub(crate) const REFUSALS: &str = "policy_refusals_total";
pub(crate) const BULKHEAD_IN_FLIGHT: &str = "policy_bulkhead_in_flight";
pub(crate) const BULKHEAD_QUEUED: &str = "policy_bulkhead_queued";
pub(crate) const BULKHEAD_LIMIT: &str = "policy_bulkhead_limit";
pub(crate) const SHED: &str = "policy_shed_total";
pub(crate) const RETRIES: &str = "policy_retries_total";
pub(crate) const RETRY_STOPPED: &str = "policy_retry_stopped_total";
pub(crate) const RETRY_BUDGET: &str = "policy_retry_budget_balance";
pub(crate) const TASKS: &str = "policy_tasks_total";
pub(crate) const TASKS_WAITING: &str = "policy_tasks_waiting";
pub(crate) const TASK_START_DELAY: &str = "policy_task_start_delay_seconds";
pub(crate) const FALLBACKS: &str = "policy_fallbacks_total";
pub(crate) const HEDGES: &str = "policy_hedges_total";
pub(crate) const HEDGE_STOPPED: &str = "policy_hedge_stopped_total";
pub(crate) const INJECTED: &str = "policy_injected_faults_total";
pub(crate) const STALE: &str = "policy_stale_total";
pub(crate) const POLLS_OVER_BUDGET: &str = "policy_polls_over_budget_total";
pub(crate) const QUEUE_TASKS: &str = "policy_queue_tasks_total";
pub(crate) const QUEUE_LENGTH: &str = "policy_queue_length";
pub(crate) const QUEUE_PENDING: &str = "policy_queue_pending";
pub(crate) const QUEUE_DEAD_LETTERS: &str = "policy_queue_dead_letters";
pub(crate) const QUEUE_OLDEST_AGE: &str = "policy_queue_oldest_age_seconds";

/// `policy_refusals_total{mechanism, name, kind, reason}`: one counter per reason code the
/// mechanism can refuse with, all registered when it is built.
#[derive(Debug)]
pub(crate) struct Refusals {
    /// Empty without `metrics`: nothing to count.
    by_reason: Vec<(&'static str, Counter)>,
}

impl Refusals {
    pub(crate) fn new(
        mechanism: &'static str,
        name: &str,
        kind: RefusalKind,
        reasons: &[&'static str],
    ) -> Self {
        let reasons = if ON { reasons } else { &[] };
        Self {
            by_reason: reasons
                .iter()
                .map(|reason| {
                    let pairs = [
                        ("mechanism", mechanism),
                        ("name", name),
                        ("kind", kind.as_str()),
                        ("reason", reason),
                    ];
                    (*reason, counter(REFUSALS, &pairs))
                })
                .collect(),
        }
    }

    /// Counts one refusal with the reason `code`.
    pub(crate) fn count(&self, code: &str) {
        if let Some((_, counter)) = self.by_reason.iter().find(|(reason, _)| *reason == code) {
            counter.increment();
        }
    }
}

/// A breaker's: its state, its openings and its refusals.
#[derive(Debug)]
pub(crate) struct BreakerMetrics {
    state: Gauge,
    openings: Counter,
    pub(crate) refusals: Refusals,
}

impl BreakerMetrics {
    pub(crate) const CLOSED: f64 = 0.0;
    pub(crate) const PROBATION: f64 = 1.0;
    pub(crate) const OPEN: f64 = 2.0;

    pub(crate) fn new(name: &str) -> Self {
        let this = Self {
            state: gauge(BREAKER_STATE, &[("name", name)]),
            openings: counter(BREAKER_OPENINGS, &[("name", name)]),
            refusals: Refusals::new(
                "breaker",
                name,
                RefusalKind::BreakerOpen,
                &[
                    "failures",
                    "failure_ratio",
                    "probe_failed",
                    "retry_after",
                    "shared",
                ],
            ),
        };
        this.state.set(Self::CLOSED);
        this
    }

    pub(crate) fn opened(&self) {
        self.openings.increment();
        self.state.set(Self::OPEN);
    }

    /// `reason` is `cooldown` (on probation) or `probe_succeeded` (closed).
    pub(crate) fn closed(&self, reason: &str) {
        self.state.set(if reason == "cooldown" {
            Self::PROBATION
        } else {
            Self::CLOSED
        });
    }
}

/// A bulkhead's: calls in flight and queued, its slot count, and its refusals.
#[derive(Debug)]
pub(crate) struct BulkheadMetrics {
    in_flight: Gauge,
    queued: Gauge,
    limit: Gauge,
    pub(crate) refusals: Refusals,
}

impl BulkheadMetrics {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            in_flight: gauge(BULKHEAD_IN_FLIGHT, &[("name", name)]),
            queued: gauge(BULKHEAD_QUEUED, &[("name", name)]),
            limit: gauge(BULKHEAD_LIMIT, &[("name", name)]),
            refusals: Refusals::new(
                "bulkhead",
                name,
                RefusalKind::BulkheadFull,
                &["full", "queue_timeout"],
            ),
        }
    }

    // Increments, not the bulkhead's count set after the change: two threads' sets can land
    // in either order, and the gauge would show a stale count until the next change.

    /// A call took a slot.
    #[inline]
    pub(crate) fn took_slot(&self) {
        self.in_flight.add(1.0);
    }

    /// A call gave its slot back.
    #[inline]
    pub(crate) fn released_slot(&self) {
        self.in_flight.add(-1.0);
    }

    /// A call entered (`1`) or left (`-1`) the queue.
    #[inline]
    pub(crate) fn queued(&self, change: f64) {
        self.queued.add(change);
    }

    /// The slot count is now `slots` (set at build and at each resize, off the hot path).
    pub(crate) fn limit(&self, slots: u32) {
        self.limit.set(f64::from(slots));
    }
}

/// `policy_shed_total{mechanism, name, class, reason}`: a shedder's (or a background pool's)
/// decisions to shed, per class and reason: the pairs it can shed, registered when it is
/// built (critical work is never shed for load).
#[derive(Debug)]
pub(crate) struct ShedMetrics {
    counters: Vec<(WorkClass, &'static str, Counter)>,
}

impl ShedMetrics {
    /// For the classes `classes` that `mechanism` decides for.
    pub(crate) fn new(mechanism: &'static str, name: &str, classes: &[WorkClass]) -> Self {
        let mut counters = Vec::new();
        for &class in classes {
            for reason in ["load", "budget"] {
                if class == WorkClass::Critical && reason == "load" {
                    continue;
                }
                let pairs = [
                    ("mechanism", mechanism),
                    ("name", name),
                    ("class", class.as_str()),
                    ("reason", reason),
                ];
                counters.push((class, reason, counter(SHED, &pairs)));
            }
        }
        Self { counters }
    }

    /// `reason` is `load` or `budget`.
    pub(crate) fn shed(&self, class: WorkClass, reason: &str) {
        if let Some((_, _, counter)) = self
            .counters
            .iter()
            .find(|(c, r, _)| *c == class && *r == reason)
        {
            counter.increment();
        }
    }
}

/// A retry policy's: retries, early stops, and the balance of its allowance.
#[derive(Debug)]
pub(crate) struct RetryMetrics {
    retries: Counter,
    /// `deadline`, `budget`, `exhausted`, `pushback`.
    stopped: [(&'static str, Counter); 4],
    balance: Gauge,
}

impl RetryMetrics {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            retries: counter(RETRIES, &[("name", name)]),
            stopped: ["deadline", "budget", "exhausted", "pushback"].map(|reason| {
                (
                    reason,
                    counter(RETRY_STOPPED, &[("name", name), ("reason", reason)]),
                )
            }),
            balance: gauge(RETRY_BUDGET, &[("name", name)]),
        }
    }

    /// A retry started; `balance` is what the allowance grants after it.
    pub(crate) fn retried(&self, balance: u64) {
        self.retries.increment();
        self.balance.set(balance as f64);
    }

    /// Retrying stopped for `reason`; `balance` as above.
    pub(crate) fn stopped(&self, reason: &str, balance: u64) {
        if let Some((_, counter)) = self.stopped.iter().find(|(r, _)| *r == reason) {
            counter.increment();
        }
        self.balance.set(balance as f64);
    }
}

/// A hedge's: started, won, lost, and hedges not started by reason.
#[derive(Debug)]
pub(crate) struct HedgeMetrics {
    started: Counter,
    won: Counter,
    lost: Counter,
    /// `deadline`, `budget`.
    stopped: [(&'static str, Counter); 2],
}

impl HedgeMetrics {
    pub(crate) fn new(name: &str) -> Self {
        let outcome = |o| counter(HEDGES, &[("name", name), ("outcome", o)]);
        Self {
            started: outcome("started"),
            won: outcome("won"),
            lost: outcome("lost"),
            stopped: ["deadline", "budget"].map(|reason| {
                (
                    reason,
                    counter(HEDGE_STOPPED, &[("name", name), ("reason", reason)]),
                )
            }),
        }
    }

    pub(crate) fn started(&self) {
        self.started.increment();
    }

    pub(crate) fn won(&self) {
        self.won.increment();
    }

    pub(crate) fn lost(&self, count: u64) {
        for _ in 0..count {
            self.lost.increment();
        }
    }

    pub(crate) fn stopped(&self, reason: &str) {
        if let Some((_, counter)) = self.stopped.iter().find(|(r, _)| *r == reason) {
            counter.increment();
        }
    }
}

/// A fallback record's: answers by the fallback and by a stale result, by what they answered
/// for (`failed`, `deadline_exceeded` or the refusal's kind).
#[derive(Debug)]
pub(crate) struct FallbackMetrics {
    fallbacks: Vec<(&'static str, Counter)>,
    stale: Vec<(&'static str, Counter)>,
}

const ANSWERED_FOR: [&str; 7] = [
    "failed",
    "deadline_exceeded",
    RefusalKind::BreakerOpen.as_str(),
    RefusalKind::BulkheadFull.as_str(),
    RefusalKind::Shed.as_str(),
    RefusalKind::InsufficientBudget.as_str(),
    RefusalKind::RateLimited.as_str(),
];

impl FallbackMetrics {
    pub(crate) fn new(name: &str) -> Self {
        let each = |metric: &'static str| {
            ANSWERED_FOR
                .iter()
                .map(|reason| {
                    (
                        *reason,
                        counter(metric, &[("name", name), ("reason", reason)]),
                    )
                })
                .collect()
        };
        Self {
            fallbacks: each(FALLBACKS),
            stale: each(STALE),
        }
    }

    fn find<'a>(list: &'a [(&'static str, Counter)], reason: &str) -> Option<&'a Counter> {
        list.iter().find(|(r, _)| *r == reason).map(|(_, c)| c)
    }

    pub(crate) fn fallback(&self, reason: &str) {
        if let Some(counter) = Self::find(&self.fallbacks, reason) {
            counter.increment();
        }
    }

    pub(crate) fn stale(&self, reason: &str) {
        if let Some(counter) = Self::find(&self.stale, reason) {
            counter.increment();
        }
    }
}

/// A poll monitor's polls over budget.
pub(crate) fn polls_over_budget(name: &str) -> Counter {
    counter(POLLS_OVER_BUDGET, &[("name", name)])
}

/// One class of tasks (deferred or background): outcomes, tasks waiting to start, and the
/// time from hand-over to start. Process-wide, like the class's totals.
#[derive(Debug)]
pub(crate) struct TaskMetrics {
    /// `finished`, `failed`, `refused`, `panicked`, `abandoned`.
    outcomes: [(&'static str, Counter); 5],
    waiting: Gauge,
    start_delay: Histogram,
}

impl TaskMetrics {
    fn new(class: WorkClass) -> Self {
        let class = class.as_str();
        Self {
            outcomes: ["finished", "failed", "refused", "panicked", "abandoned"].map(|outcome| {
                (
                    outcome,
                    counter(TASKS, &[("class", class), ("outcome", outcome)]),
                )
            }),
            waiting: gauge(TASKS_WAITING, &[("class", class)]),
            start_delay: histogram(TASK_START_DELAY, &[("class", class)]),
        }
    }

    /// The handles of `class`, registered the first time a task of it counts itself.
    pub(crate) fn of(class: WorkClass) -> &'static TaskMetrics {
        use std::sync::OnceLock;
        static DEFERRED: OnceLock<TaskMetrics> = OnceLock::new();
        static BACKGROUND: OnceLock<TaskMetrics> = OnceLock::new();
        match class {
            WorkClass::Background => {
                BACKGROUND.get_or_init(|| TaskMetrics::new(WorkClass::Background))
            }
            // Tasks are deferred or background; critical work never becomes one.
            _ => DEFERRED.get_or_init(|| TaskMetrics::new(WorkClass::Deferred)),
        }
    }

    pub(crate) fn ended(&self, outcome: &str) {
        if let Some((_, counter)) = self.outcomes.iter().find(|(o, _)| *o == outcome) {
            counter.increment();
        }
    }

    /// A task began (`1`) or ended (`-1`) waiting to start.
    pub(crate) fn waiting(&self, change: f64) {
        self.waiting.add(change);
    }

    pub(crate) fn started_after(&self, delay: std::time::Duration) {
        self.start_delay.record(delay.as_secs_f64());
    }
}

/// One annotated operation's: call durations per outcome, and attempts per call.
#[derive(Debug)]
pub(crate) struct CallMetrics {
    /// Whether anyone listens: no clock is read for a call otherwise.
    pub(crate) live: bool,
    ok: Histogram,
    failed: Histogram,
    expired: Histogram,
    /// Per [`RefusalKind`], in [`REFUSAL_KINDS`] order.
    refused: [Histogram; REFUSAL_KINDS.len()],
    /// A drill's refusals, registered at the first ([`RefusalKind::Injected`]).
    injected: std::sync::OnceLock<Histogram>,
    operation: &'static str,
    attempts: Histogram,
}

/// The refusal kinds whose call durations are registered with the operation's other handles.
/// A drill's refusal ([`RefusalKind::Injected`]) is registered at the first one (see
/// [`CallMetrics::refused`]): a build or a process that runs no drill never shows it.
pub(crate) const REFUSAL_KINDS: [RefusalKind; 5] = [
    RefusalKind::BreakerOpen,
    RefusalKind::BulkheadFull,
    RefusalKind::Shed,
    RefusalKind::InsufficientBudget,
    RefusalKind::RateLimited,
];

/// How a call ended, for its duration's `outcome` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallOutcome {
    Ok,
    Failed,
    Expired,
    Refused(RefusalKind),
}

impl CallMetrics {
    pub(crate) fn new(operation: &'static str) -> Self {
        let duration = |outcome: &'static str, kind: Option<RefusalKind>| match kind {
            None => histogram(
                CALL_DURATION,
                &[("operation", operation), ("outcome", outcome)],
            ),
            Some(kind) => histogram(
                CALL_DURATION,
                &[
                    ("operation", operation),
                    ("outcome", outcome),
                    ("refused_by", kind.as_str()),
                ],
            ),
        };
        Self {
            live: recorder_installed(),
            ok: duration("ok", None),
            failed: duration("failed", None),
            expired: duration("expired", None),
            refused: REFUSAL_KINDS.map(|kind| duration("refused", Some(kind))),
            injected: std::sync::OnceLock::new(),
            operation,
            attempts: histogram(CALL_ATTEMPTS, &[("operation", operation)]),
        }
    }

    pub(crate) fn ended(&self, outcome: CallOutcome, took: std::time::Duration, attempts: u32) {
        let histogram = match outcome {
            CallOutcome::Ok => &self.ok,
            CallOutcome::Failed => &self.failed,
            CallOutcome::Expired => &self.expired,
            CallOutcome::Refused(kind) => self.refused(kind),
        };
        histogram.record(took.as_secs_f64());
        self.attempts.record(f64::from(attempts));
    }

    /// The durations of calls `kind` refused.
    fn refused(&self, kind: RefusalKind) -> &Histogram {
        match REFUSAL_KINDS.iter().position(|k| *k == kind) {
            Some(index) => &self.refused[index],
            None => self.injected.get_or_init(|| {
                histogram(
                    CALL_DURATION,
                    &[
                        ("operation", self.operation),
                        ("outcome", "refused"),
                        ("refused_by", kind.as_str()),
                    ],
                )
            }),
        }
    }
}

/// One durable queue (feature `redis`): `policy_queue_tasks_total{name, event[, reason]}` and
/// the stream's figures as last read.
#[derive(Debug)]
#[cfg_attr(
    not(feature = "redis"),
    expect(dead_code, reason = "only the redis queue records these")
)]
pub(crate) struct QueueMetrics {
    pub(crate) enqueued: Counter,
    /// `full`, `unavailable`, `shed`, `encoding`, `too_large`.
    refused: [(&'static str, Counter); 5],
    /// Enqueued, but not confirmed by the replicas asked for.
    pub(crate) not_replicated: Counter,
    pub(crate) completed: Counter,
    pub(crate) failed: Counter,
    pub(crate) redelivered: Counter,
    pub(crate) dead_lettered: Counter,
    /// Entries dead-lettered unrun: `unsigned`, `bad_signature`, `too_large`, `malformed`.
    rejected: [(&'static str, Counter); 4],
    /// Deliveries that ended after the task was claimed by another worker.
    pub(crate) superseded: Counter,
    /// Acknowledgements, error records and dead-letter moves Redis did not take.
    pub(crate) settle_failed: Counter,
    /// Idle consumers removed from the group.
    pub(crate) consumers_removed: Counter,
    length: Gauge,
    pending: Gauge,
    dead_letters: Gauge,
    oldest_age: Gauge,
}

#[cfg_attr(
    not(feature = "redis"),
    expect(dead_code, reason = "only the redis queue records these")
)]
impl QueueMetrics {
    pub(crate) fn new(name: &str) -> Self {
        let event = |event: &'static str| counter(QUEUE_TASKS, &[("name", name), ("event", event)]);
        Self {
            enqueued: event("enqueued"),
            refused: ["full", "unavailable", "shed", "encoding", "too_large"].map(|reason| {
                (
                    reason,
                    counter(
                        QUEUE_TASKS,
                        &[("name", name), ("event", "refused"), ("reason", reason)],
                    ),
                )
            }),
            not_replicated: event("not_replicated"),
            completed: event("completed"),
            failed: event("failed"),
            redelivered: event("redelivered"),
            dead_lettered: event("dead_lettered"),
            rejected: ["unsigned", "bad_signature", "too_large", "malformed"].map(|reason| {
                (
                    reason,
                    counter(
                        QUEUE_TASKS,
                        &[("name", name), ("event", "rejected"), ("reason", reason)],
                    ),
                )
            }),
            superseded: event("superseded"),
            settle_failed: event("settle_failed"),
            consumers_removed: event("consumer_removed"),
            length: gauge(QUEUE_LENGTH, &[("name", name)]),
            pending: gauge(QUEUE_PENDING, &[("name", name)]),
            dead_letters: gauge(QUEUE_DEAD_LETTERS, &[("name", name)]),
            oldest_age: gauge(QUEUE_OLDEST_AGE, &[("name", name)]),
        }
    }

    pub(crate) fn refused(&self, reason: &str) {
        if let Some((_, counter)) = self.refused.iter().find(|(r, _)| *r == reason) {
            counter.increment();
        }
    }

    pub(crate) fn rejected(&self, reason: &str) {
        if let Some((_, counter)) = self.rejected.iter().find(|(r, _)| *r == reason) {
            counter.increment();
        }
    }

    /// The stream's figures as just read.
    #[expect(
        clippy::cast_precision_loss,
        reason = "gauges are f64; queue lengths stay far below 2^52"
    )]
    pub(crate) fn figures(&self, length: u64, pending: u64, dead: u64, oldest_ms: Option<u64>) {
        self.length.set(length as f64);
        self.pending.set(pending as f64);
        self.dead_letters.set(dead as f64);
        self.oldest_age
            .set(oldest_ms.map_or(0.0, |ms| ms as f64 / 1000.0));
    }
}
