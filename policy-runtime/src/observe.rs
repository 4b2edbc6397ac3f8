//! One place that turns mechanism events into tracing events and metrics, so every event has
//! the same stable field names: `kind`, `name` and `reason` (plus a few numbers named after
//! what they measure).
//!
//! | event                      | level | `kind`                     | metric (feature `metrics`)                   |
//! |----------------------------|-------|----------------------------|----------------------------------------------|
//! | a refusal                  | DEBUG | the [`RefusalKind`](crate::RefusalKind) | `policy_refusals_total{kind,name}` |
//! | a shed decision            | DEBUG | `shed`                     | `policy_shed_total{name,class,reason}`       |
//! | a breaker opens            | WARN  | `breaker_opened`           | `policy_breaker_openings_total{name}`        |
//! | a breaker closes           | INFO  | `breaker_closed`           |                                              |
//! | a `Retry-After` past the breaker's cap | INFO | `retry_after_capped` (`asked_ms`, `cap_ms`) |                   |
//! | a retry is started         | DEBUG | `retry`                    | `policy_retries_total{name}`                 |
//! | retrying stops early       | INFO  | `retry_stopped`            | `policy_retry_stopped_total{name,reason}`    |
//! | a deferred or background task ends well | TRACE | `task_finished` | `policy_tasks_total{class,outcome="finished"}` |
//! | ... ends with an `Err`     | WARN  | `task_failed`              | `policy_tasks_total{class,outcome="failed"}` |
//! | ... was refused (never ran) | INFO | `task_refused`             | `policy_tasks_total{class,outcome="refused"}` |
//! | ... panics (caught)        | ERROR | `task_panicked`            | `policy_tasks_total{class,outcome="panicked"}` |
//! | ... is dropped before its end | WARN | `task_abandoned`        | `policy_tasks_total{class,outcome="abandoned"}` |
//! | a platform drained         | INFO  | `drain`                    |                                              |
//! | a stop signal was received (feature `signal`) | INFO | `shutdown_signal` |                                   |
//!
//! Task events carry `class` (`deferred` or `background`) and are emitted inside the task's
//! span `task{name, class, request}`, so the request a failure came from is on the same line.
//!
//! All events use the tracing target `policy`.

use std::fmt;
use std::time::Duration;

use crate::error::{Human, ResilienceError};

pub(crate) fn refused(refusal: &ResilienceError) {
    tracing::debug!(
        target: "policy",
        kind = refusal.kind().as_str(),
        name = refusal.name(),
        reason = %refusal.reason(),
        "{refusal}"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "policy_refusals_total",
        "kind" => refusal.kind().as_str(),
        "name" => refusal.name().to_owned()
    )
    .increment(1);
}

pub(crate) fn shed(
    name: &str,
    class: &'static str,
    reason: &'static str,
    detail: &dyn fmt::Display,
) {
    tracing::debug!(
        target: "policy",
        kind = "shed",
        name,
        class,
        reason,
        "shed {class} work for `{name}`: {detail}"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "policy_shed_total",
        "name" => name.to_owned(),
        "class" => class,
        "reason" => reason
    )
    .increment(1);
}

/// `counted` is the failure count and window of an opening from counted failures.
pub(crate) fn breaker_opened(
    name: &str,
    cause: &dyn fmt::Display,
    counted: Option<(u32, Duration)>,
    open_for: Duration,
) {
    let (count, window) = counted.unzip();
    tracing::warn!(
        target: "policy",
        kind = "breaker_opened",
        name,
        reason = %cause,
        count,
        window = window.map(tracing::field::debug),
        open_for = ?open_for,
        "breaker `{name}` opened for {} after {cause}",
        Human(open_for)
    );
    #[cfg(feature = "metrics")]
    metrics::counter!("policy_breaker_openings_total", "name" => name.to_owned()).increment(1);
}

pub(crate) fn breaker_closed(name: &str, reason: &'static str) {
    tracing::info!(
        target: "policy",
        kind = "breaker_closed",
        name,
        reason,
        "breaker `{name}` closed: {reason}"
    );
}

pub(crate) fn retry_after_capped(name: &str, asked: Duration, cap: Duration) {
    tracing::info!(
        target: "policy",
        kind = "retry_after_capped",
        name,
        reason = "longer than max_retry_after",
        asked_ms = u64::try_from(asked.as_millis()).unwrap_or(u64::MAX),
        cap_ms = u64::try_from(cap.as_millis()).unwrap_or(u64::MAX),
        "breaker `{name}` was asked to back off for {} and opens for its cap of {}",
        Human(asked),
        Human(cap)
    );
}

pub(crate) fn retry(name: &str, attempt: u32, delay: Duration, error: &dyn fmt::Display) {
    tracing::debug!(
        target: "policy",
        kind = "retry",
        name,
        attempt,
        delay = ?delay,
        reason = %error,
        "retrying `{name}` (attempt {next}) in {} after: {error}",
        Human(delay),
        next = attempt + 1
    );
    #[cfg(feature = "metrics")]
    metrics::counter!("policy_retries_total", "name" => name.to_owned()).increment(1);
}

pub(crate) fn retry_stopped(name: &str, reason: &'static str, attempt: u32) {
    tracing::info!(
        target: "policy",
        kind = "retry_stopped",
        name,
        reason,
        attempt,
        "stopped retrying `{name}` after attempt {attempt}: {reason}"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "policy_retry_stopped_total",
        "name" => name.to_owned(),
        "reason" => reason
    )
    .increment(1);
}

pub(crate) fn task_finished(name: &str, class: &'static str) {
    tracing::trace!(
        target: "policy",
        kind = "task_finished",
        name,
        class,
        "{class} task `{name}` finished"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!("policy_tasks_total", "class" => class, "outcome" => "finished").increment(1);
}

pub(crate) fn task_failed(name: &str, class: &'static str, error: &str) {
    tracing::warn!(
        target: "policy",
        kind = "task_failed",
        name,
        class,
        reason = error,
        "{class} task `{name}` failed: {error}"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!("policy_tasks_total", "class" => class, "outcome" => "failed").increment(1);
}

pub(crate) fn task_refused(name: &str, class: &'static str, refusal: &ResilienceError) {
    tracing::info!(
        target: "policy",
        kind = "task_refused",
        name,
        class,
        refused_by = refusal.kind().as_str(),
        reason = %refusal.reason(),
        "{class} task `{name}` did not run: {refusal}"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!("policy_tasks_total", "class" => class, "outcome" => "refused").increment(1);
}

pub(crate) fn task_panicked(name: &str, class: &'static str, message: &str) {
    tracing::error!(
        target: "policy",
        kind = "task_panicked",
        name,
        class,
        reason = message,
        "{class} task `{name}` panicked: {message}"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!("policy_tasks_total", "class" => class, "outcome" => "panicked").increment(1);
}

pub(crate) fn task_abandoned(name: &str, class: &'static str, reason: &'static str) {
    tracing::warn!(
        target: "policy",
        kind = "task_abandoned",
        name,
        class,
        reason,
        "{class} task `{name}` abandoned: {reason}"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!("policy_tasks_total", "class" => class, "outcome" => "abandoned")
        .increment(1);
}

/// One class's totals since start, as the drain event's fields, and as a sentence.
pub(crate) struct ClassFields<'a> {
    pub(crate) scheduled: u64,
    pub(crate) finished: u64,
    pub(crate) abandoned: u64,
    pub(crate) in_flight: u64,
    pub(crate) summary: &'a dyn fmt::Display,
}

/// A drain ended: `finished` and `abandoned` of the `in_flight` tasks it waited for.
pub(crate) fn drained(
    in_flight: usize,
    complete: bool,
    drain_deadline: Duration,
    (finished, abandoned): (u64, u64),
    deferred: ClassFields<'_>,
    background: ClassFields<'_>,
) {
    let reason = if complete {
        "everything in flight finished"
    } else {
        "the drain deadline passed"
    };
    tracing::info!(
        target: "policy",
        kind = "drain",
        reason,
        in_flight,
        finished,
        abandoned,
        drain_deadline = ?drain_deadline,
        deferred_scheduled = deferred.scheduled,
        deferred_finished = deferred.finished,
        deferred_abandoned = deferred.abandoned,
        deferred_in_flight = deferred.in_flight,
        background_scheduled = background.scheduled,
        background_finished = background.finished,
        background_abandoned = background.abandoned,
        background_in_flight = background.in_flight,
        "drained deferred work within {}: {finished} finished, {abandoned} abandoned ({reason}); since start, deferred: {}; background: {}",
        Human(drain_deadline),
        deferred.summary,
        background.summary
    );
}

#[cfg(feature = "signal")]
pub(crate) fn shutdown_signal(signal: &'static str) {
    tracing::info!(
        target: "policy",
        kind = "shutdown_signal",
        signal,
        "{signal} received: stopping"
    );
}
