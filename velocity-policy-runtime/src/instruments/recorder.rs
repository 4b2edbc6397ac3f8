//! The handles through the `metrics` facade (feature `metrics`): registered once, recorded
//! with no lookup. The stand-in without the feature is `no_recorder.rs`, with the same items.

use std::sync::Once;

use super::*;

/// Whether handles record anything: they do, through `metrics`.
pub(crate) const ON: bool = true;

/// A counter registered once.
#[derive(Clone)]
pub(crate) struct Counter(metrics::Counter);

/// A gauge registered once.
#[derive(Clone)]
pub(crate) struct Gauge(metrics::Gauge);

/// A histogram registered once.
#[derive(Clone)]
pub(crate) struct Histogram(metrics::Histogram);

impl Counter {
    #[inline]
    pub(crate) fn increment(&self) {
        self.0.increment(1);
    }
}

impl Gauge {
    #[inline]
    pub(crate) fn add(&self, change: f64) {
        self.0.increment(change);
    }

    #[inline]
    pub(crate) fn set(&self, value: f64) {
        self.0.set(value);
    }
}

impl Histogram {
    #[inline]
    pub(crate) fn record(&self, value: f64) {
        self.0.record(value);
    }
}

/// When a wait began, for the histogram of how long it lasted: the clock is read.
#[derive(Clone, Copy, Default)]
pub(crate) struct Since(Option<tokio::time::Instant>);

impl Since {
    #[inline]
    pub(crate) fn now() -> Self {
        Self(Some(tokio::time::Instant::now()))
    }

    /// How long ago it began, if it was started.
    #[inline]
    pub(crate) fn elapsed(self) -> Option<std::time::Duration> {
        self.0.map(|since| since.elapsed())
    }
}

fn labels(pairs: Labels<'_>) -> Vec<metrics::Label> {
    describe();
    pairs
        .iter()
        .map(|(key, value)| metrics::Label::new(*key, (*value).to_owned()))
        .collect()
}

pub(crate) fn counter(name: &'static str, pairs: Labels<'_>) -> Counter {
    Counter(metrics::counter!(name, labels(pairs)))
}

pub(super) fn gauge(name: &'static str, pairs: Labels<'_>) -> Gauge {
    Gauge(metrics::gauge!(name, labels(pairs)))
}

pub(super) fn histogram(name: &'static str, pairs: Labels<'_>) -> Histogram {
    Histogram(metrics::histogram!(name, labels(pairs)))
}

/// Whether a recorder is installed (globally, or for this thread) that keeps what it is given:
/// without one, `metrics` hands every registration to its `NoopRecorder`, a zero-sized type,
/// and the handles it returns do nothing. Asked once per operation, when its handles are
/// registered, so an operation's call durations cost a clock read only when someone listens.
pub(crate) fn recorder_installed() -> bool {
    metrics::with_recorder(|recorder| std::mem::size_of_val(recorder) != 0)
}

/// Units and descriptions for exporters that show them (Prometheus' `# HELP`), once.
fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        describe_histogram!(
            CALL_DURATION,
            Unit::Seconds,
            "Duration of calls of annotated operations, by outcome"
        );
        describe_histogram!(
            CALL_ATTEMPTS,
            Unit::Count,
            "Attempts per call of an annotated operation"
        );
        describe_gauge!(
            BREAKER_STATE,
            Unit::Count,
            "Breaker state: 0 closed, 1 probation, 2 open"
        );
        describe_counter!(BREAKER_OPENINGS, Unit::Count, "Breaker openings");
        describe_counter!(
            REFUSALS,
            Unit::Count,
            "Calls a mechanism refused (the work never ran)"
        );
        describe_gauge!(
            BULKHEAD_IN_FLIGHT,
            Unit::Count,
            "Calls holding a bulkhead slot"
        );
        describe_gauge!(
            BULKHEAD_QUEUED,
            Unit::Count,
            "Calls waiting for a bulkhead slot"
        );
        describe_gauge!(
            BULKHEAD_LIMIT,
            Unit::Count,
            "A bulkhead's slot count (an adaptive one's moves with latency)"
        );
        describe_counter!(SHED, Unit::Count, "Work shed, by class and reason");
        describe_counter!(RETRIES, Unit::Count, "Retries started");
        describe_counter!(
            RETRY_STOPPED,
            Unit::Count,
            "Retrying stopped early, by reason"
        );
        describe_gauge!(
            RETRY_BUDGET,
            Unit::Count,
            "Retries the allowance still grants in its window"
        );
        describe_counter!(
            TASKS,
            Unit::Count,
            "Deferred and background tasks ended, by outcome"
        );
        describe_gauge!(
            TASKS_WAITING,
            Unit::Count,
            "Deferred and background tasks made and not yet started"
        );
        describe_histogram!(
            TASK_START_DELAY,
            Unit::Seconds,
            "Time from a task's hand-over (a deferred task's response end) to its start"
        );
        describe_counter!(HEDGES, Unit::Count, "Hedges started, won and lost");
        describe_counter!(HEDGE_STOPPED, Unit::Count, "Hedges not started, by reason");
        describe_counter!(
            INJECTED,
            Unit::Count,
            "Faults a chaos drill injected, by kind (not incidents)"
        );
        describe_counter!(FALLBACKS, Unit::Count, "Calls answered by their fallback");
        describe_counter!(STALE, Unit::Count, "Calls answered with a stale result");
        describe_counter!(
            QUEUE_TASKS,
            Unit::Count,
            "Durable queue tasks by event: enqueued, refused (by reason), not_replicated, completed, failed, redelivered, dead_lettered, rejected (by reason), superseded, settle_failed, consumer_removed"
        );
        describe_gauge!(
            QUEUE_LENGTH,
            Unit::Count,
            "Unfinished tasks in a durable queue's stream, fleet-wide"
        );
        describe_gauge!(
            QUEUE_PENDING,
            Unit::Count,
            "Tasks of a durable queue delivered and not yet acknowledged, fleet-wide"
        );
        describe_gauge!(
            QUEUE_DEAD_LETTERS,
            Unit::Count,
            "Dead letters kept for a durable queue, fleet-wide"
        );
        describe_gauge!(
            QUEUE_OLDEST_AGE,
            Unit::Seconds,
            "Age of a durable queue's oldest unfinished task"
        );
        describe_counter!(
            POLLS_OVER_BUDGET,
            Unit::Count,
            "Polls that computed longer than their budget"
        );
    });
}
