//! One place that turns mechanism events into tracing events and metrics, so every event has
//! the same stable fields.
//!
//! # Fields
//!
//! Every event (tracing target `policy`) carries:
//!
//! | field       | what it holds                                                              |
//! |-------------|----------------------------------------------------------------------------|
//! | `operation` | the annotated function's operation, when the event happens inside one      |
//! | `mechanism` | `breaker`, `bulkhead`, `shedder`, `retry`, `hedge`, `deadline`, `rate_limiter`, `deferred`, `background`, `queue`, `platform`, `fallback`, `store` (the Redis store) or `chaos` (a drill, feature `chaos`) |
//! | `name`      | the mechanism's name (the breaker's, the bulkhead's, the task's)           |
//! | `kind`      | what happened, from the table below                                        |
//! | `reason`    | a short, stable code (never a sentence): see each row                      |
//!
//! Numbers are fields of their own, durations in whole milliseconds with a `_ms` suffix; the
//! event's message is a sentence for people and not part of the stable interface.
//!
//! | event                      | level | `kind`                     | `reason` codes | numbers |
//! |----------------------------|-------|----------------------------|----------------|---------|
//! | a refusal                  | DEBUG | the [`RefusalKind`](crate::RefusalKind) | [`RefusalReason::code`](crate::RefusalReason::code): `failures`, `failure_ratio`, `probe_failed`, `retry_after`, `shared`, `full`, `request_queue_full`, `queue_timeout`, `load`, `budget`, `min_budget`, `rate` | `remaining_ms`, `count`, `window_ms`, `max_concurrent`, `max_queued`, `waited_ms`, `load`, `threshold`, `expected_cost_ms`, `min_budget_ms`, `retry_after_ms` (those that apply) |
//! | a shed decision            | DEBUG | `shed`                     | `load`, `budget` | `load`, `threshold` or `remaining_ms`, `expected_cost_ms`; `class` |
//! | a breaker opens            | WARN  | `breaker_opened`           | [`OpenCause::code`](crate::OpenCause::code) | `open_for_ms`; `count`, `window_ms` (counted failures); `retry_after_ms`; `injected` (`true`) and `drill` when the deciding failure was injected (feature `chaos`) |
//! | a breaker closes           | INFO  | `breaker_closed`           | `cooldown`, `probe_succeeded` | |
//! | a call expired under a budget its caller shortened (`mechanism` `breaker`, `retry` or `hedge`): the caller's, never a failure | DEBUG | `caller_expired` | `callers_budget` | `budget_ms` |
//! | an adaptive bulkhead's limit moved by a quarter (and at least 2 slots) since the last such event | INFO | `bulkhead_limit` | `queueing` (latency rose: calls wait inside the dependency), `headroom` (it answers as fast as unloaded) | `from`, `to` (slots), `latency_noload_ms`, `latency_recent_ms`, `queue_estimate` |
//! | a `Retry-After` past the breaker's cap | INFO | `retry_after_capped` | `max_retry_after` | `asked_ms`, `cap_ms` |
//! | a retry is started         | DEBUG | `retry`                    | what the attempt ended with: `failed`, `expired`, the refusal's kind, or `transient_response` (a layer's response classified as worth repeating) | `attempt`, `delay_ms` |
//! | retrying stops early       | INFO  | `retry_stopped`            | `deadline`, `budget`, `exhausted` (every attempt used), `pushback` (the dependency asked not to retry: [`Pushback::Never`](crate::retry::Pushback::Never)) | `attempt` |
//! | a hedge is started (`mechanism` `hedge`) | DEBUG | `hedge`            | `slow` (no answer within the delay) | `attempt` (the hedge's number: 2 for the first), `delay_ms` |
//! | ... is not started         | DEBUG | `hedge_stopped`            | `deadline`, `budget` | `attempt` |
//! | ... is refused (never ran) | DEBUG | `hedge_refused`            | the refusal's code (its kind in `refused_by`) | |
//! | ... answered first         | DEBUG | `hedge_won`                | `first_answer` | `attempt` |
//! | ... dropped unanswered     | DEBUG | `hedge_lost`               | `cancelled` | `count` |
//! | a deferred or background task ends well | TRACE | `task_finished` | `finished` | |
//! | ... ends with an `Err`     | WARN  | `task_failed`              | `error` (the error's text in `error`) | |
//! | ... was refused (never ran) | INFO | `task_refused`             | the refusal's code (its kind in `refused_by`) | |
//! | ... panics (caught)        | ERROR | `task_panicked`            | `panic` (the message in `panic`) | |
//! | ... is dropped before its end | WARN | `task_abandoned`        | `shut_down`, `no_runtime`, `drain_deadline`, `dropped` or `abandoned` (the sentence in `detail`) | |
//! | a platform drained         | INFO  | `drain`                    | `complete`, `drain_deadline` | `in_flight`, `finished`, `abandoned`, `drain_deadline_ms`, per-class totals |
//! | a stop signal was received (feature `http`) | INFO | `shutdown_signal` | `signal` (which, in `signal`: `SIGTERM` or `SIGINT`) | |
//! | the request's deadline passed before the handler answered (`DeadlineLayer`, feature `http`; `mechanism` `deadline`, `name` `request`) | DEBUG | `deadline_exceeded` | `expired` | `budget_ms` |
//! | ... a deadline header that does not parse, ignored | DEBUG | `deadline_header_ignored` | `unparsable_header` | `header`, `value` |
//! | the Redis store became unreachable (feature `redis`; `mechanism` `store`, `name` `redis`) | WARN | `store_unavailable` | `timeout`, `connection_refused`, `connection_dropped`, `io_error`, `node_lost` or `error` (the sentence in `detail`) | `instance` |
//! | ... reachable again | INFO | `store_recovered` | `reachable` | `instance` |
//! | ... its queue of reports is full | WARN | `store_backlog` | `queue_full` | `instance` |
//! | ... connected: whether it signs what it writes (once per store) | INFO | `store_connected` | `signed`, `unsigned` | `signed`, `topology`, `prefix`, `instance` |
//! | ... connected without a shared secret (once per store) | WARN | `store_unsigned` | `no_shared_secret` | `instance` |
//! | ... dropped a record read from Redis (an opening message, a failure report, a stored state) | WARN, then DEBUG within a second | `store_message_rejected` | `malformed`, `too_large`, `out_of_range`, `unsigned`, `bad_signature`, `stale`, `pending_full` | `source` (`pubsub`, `load`, `pending`, `reports`), `breaker`, `remaining_ms`, `bound_ms`, `instance` |
//! | a chaos drill injected a fault (feature `chaos`; `mechanism` `chaos`, `name` the drill, and `injected = true`) | INFO | `injected` | the fault, also in `fault`: `latency`, `error`, `refuse`, `status_429` | `delay_ms` (latency) |
//! | ... could not build the function's error (no `Registry::chaos_error_for` for its type) | WARN | `injection_skipped` | `no_error_function` | |
//! | ... was switched on or off at run time | INFO | `chaos_switched` | `enabled`, `disabled` | |
//! | drills were armed in this process ([`chaos::arm`](crate::chaos::arm); `name` `chaos`) | WARN | `chaos_armed` | `armed` | |
//! | ... disarmed ([`chaos::disarm`](crate::chaos::disarm)) | INFO | `chaos_disarmed` | `disarmed` | |
//! | a fleet rate limiter decides without Redis (`mechanism` `rate_limiter`) | WARN | `limiter_degraded` | `timeout`, `error` | `mode` |
//! | ... decides with Redis again | INFO | `limiter_recovered` | `reachable` | |
//! | ... found its state in Redis corrupt and reset it | WARN at most once a minute, else DEBUG | `limiter_state_reset` | `corrupt_state` | `resets` |
//! | an enqueue on a durable queue is refused (feature `redis`; `mechanism` `queue`, `name` the queue; the sentence in `detail`) | WARN (DEBUG for the rest of an outage) | `enqueue_refused` | `full`, `unavailable`, `shed`, `encoding`, `too_large` | `operation` |
//! | ... enqueued, but fewer replicas than asked confirmed it in time | WARN | `not_replicated` | `not_replicated` | `operation` |
//! | ... a delivery fails and waits for redelivery | INFO | `delivery_failed` | | `operation`, `task`, `attempt`, `max_deliveries`, `error` |
//! | ... a task is moved to the dead-letter stream | WARN | `dead_lettered` | `failed`, `max_deliveries`, `undecodable`, or a rejection's code | `operation`, `task`, `entry`, `deliveries`, `error` |
//! | ... an entry is refused unrun (and dead-lettered) | WARN (once a second; the rest DEBUG) | `entry_rejected` | `unsigned`, `bad_signature`, `too_large`, `malformed` (the sentence in `detail`) | `entry` |
//! | ... a delivery ended after another worker claimed its task (not acknowledged) | INFO | `superseded` | `claimed`, `not_pending` | `operation`, `task`, `attempt` |
//! | ... a finished task could not be acknowledged | WARN | `ack_failed` | the store failure's kind | `operation`, `task` |
//! | ... a dead-letter move or an error record Redis did not take (the task stays pending) | WARN | `dead_letter_failed`, `record_failed` | the store failure's kind | `operation`, `task` |
//! | ... the errors key is not a hash | WARN | `errors_unwritable` | | `key` |
//! | ... idle consumers were removed from the group | INFO | `consumers_removed` | | `count`, `kept`, `idle_ms` |
//! | ... the task deadline was lowered to four fifths of the visibility timeout | WARN | `task_deadline_lowered` | | `task_deadline_ms`, `visibility_timeout_ms`, `lowered_to_ms` |
//! | ... the server may evict keys (`maxmemory-policy` is not `noeviction`) | WARN | `eviction_possible` | | `policy` |
//! | ... a queue was built without the policy settings its handler carries | WARN | `settings_not_applied` | | `operation`, `max_len`, `policy_max_len` |
//! | ... a shutdown abandoned unfinished tasks (redelivered later) | WARN | `tasks_abandoned` | | `count` |
//! | ... admits a call it could not check (fails open) | DEBUG | `limiter_failed_open` | `timeout`, `error` | |
//!
//! Task events carry `class` (`deferred` or `background`) and are emitted inside the task's
//! span `task{name, class, request}`, so the request a failure came from is on the same line.
//!
//! # Spans
//!
//! Every call of a function under `#[critical]` or `#[resilient]` runs inside one INFO span
//! named after the operation, with the fields `operation` and `class` (`critical`); the
//! mechanisms' events for that call are inside it and carry the same `operation`. Creating the
//! span when no subscriber wants it costs one check of the call site's interest, and nothing is
//! allocated. `tracing-opentelemetry` makes them OpenTelemetry spans, the events span events
//! (see `otel`). A call that ends in an error records OpenTelemetry's
//! conventions on its span: `otel.status_code` `ERROR` (the span's status) and `error.type`,
//! the refusal's kind, `deadline_exceeded` for an expiry, or `_OTHER` for the function's own
//! error (with `metrics`; `_OTHER` for every error without it).
//!
//! # Metrics
//!
//! With the feature `metrics` every mechanism records through the [`metrics`](https://docs.rs/metrics) facade, so any
//! exporter works (`metrics-exporter-prometheus`, the demo's `/metrics`). Install the recorder
//! before the first call: each mechanism registers its handles once, when it is built, and each
//! annotated operation at its first call; a call then only uses them and never looks a metric
//! up by name (nothing is allocated, nothing is locked). Handles registered before a recorder
//! was installed stay silent (the facade's rule).
//!
//! **Names.** Prometheus' form of OpenTelemetry's names: words joined by `_`, the unit as the
//! last word (`_seconds`; `_total` for counters; counts of things have none). The facade's
//! main exporter is Prometheus', which would turn OTel's dots into underscores anyway, so
//! writing `policy_call_duration_seconds` rather than `policy.call.duration` keeps one spelling
//! in the code, these docs, a scrape and a dashboard query. Durations are seconds (f64), as
//! both conventions say. To an OpenTelemetry meter (feature `metrics`), `otel::OtelRecorder`
//! hands them over in OTel's spelling (`policy.call.duration` in `s`, a refusal's kind as
//! `error.type`).
//!
//! **Labels** are bounded by the program: `operation` (an annotated function's operation),
//! `name` (a mechanism's name, as in the [snapshot](crate::Snapshot); a shedder and a fallback
//! by their operation's own name, its `display_name`), and codes from fixed sets (`kind`,
//! `reason`, `outcome`, `class`, `mechanism`). Never an argument or a request's data.
//!
//! | metric | type | labels | unit | what it counts |
//! |---|---|---|---|---|
//! | `policy_call_duration_seconds` | histogram | `operation`, `outcome` (`ok`, `failed`, `expired`, `refused`), `refused_by` (the [`RefusalKind`](crate::RefusalKind), on `refused` only) | seconds | one value per call of a `#[critical]` or `#[resilient]` function (or of an [`OperationLayer`](crate::layer::OperationLayer) given [`calls`](crate::layer::OperationLayer::calls), as `velocity_policy::operation_layer!` does), from its first poll to its end; `failed` is the function's own error, `expired` a [`DeadlineExceeded`](crate::DeadlineExceeded), `refused` a refusal (the work never ran). A fallback's or a stale answer is `ok` |
//! | `policy_call_attempts` | histogram | `operation` | attempts | attempts per call: 1, plus one per retry or hedge started |
//! | `policy_breaker_state` | gauge | `name` | state | 0 closed, 1 on probation (the cooldown ended; the next outcome decides), 2 open; set at each transition the breaker sees (it sees an opening end at the next call) |
//! | `policy_breaker_openings_total` | counter | `name` | openings | every opening: counted failures, trips, a probe failing, shared openings (the snapshot's `openings`) |
//! | `policy_refusals_total` | counter | `mechanism` (`breaker`, `bulkhead`, `rate_limiter`), `name`, `kind`, `reason` ([`RefusalReason::code`](crate::RefusalReason::code)) | refusals | a breaker's refusals by the cause of the opening (the snapshot's `refusals`), a bulkhead's by `full` and `queue_timeout` (its `refused_full`, `refused_queue_timeout`), a rate limiter's (`rate`: over its rate, in process or through Redis, or refused while Redis is away); every reason is registered at zero when the mechanism is built. A refusal by a deadline's minimum budget has no mechanism to count it: it is the call's `refused` outcome with `refused_by="insufficient_budget"` |
//! | `policy_bulkhead_in_flight` | gauge | `name` | calls | calls holding one of its slots |
//! | `policy_bulkhead_queued` | gauge | `name` | calls | calls waiting for a slot |
//! | `policy_bulkhead_limit` | gauge | `name` | calls | its slot count: set when it is built and at each resize, by hand ([`Bulkhead::set_max_concurrent`](crate::Bulkhead::set_max_concurrent)) or by an adaptive bulkhead's latency |
//! | `policy_shed_total` | counter | `mechanism` (`shedder`, or `background` for a pool's own), `name`, `class`, `reason` (`load`, `budget`) | decisions | decisions to shed; admissions are not counted (that would be a contended write on every call) |
//! | `policy_retries_total` | counter | `name` (the retry policy) | retries | retries started, by the attribute's loop and the tower layer's alike |
//! | `policy_retry_stopped_total` | counter | `name`, `reason` (`deadline`, `budget`, `exhausted`, `pushback`) | stops | retrying stopped before success |
//! | `policy_hedges_total` | counter | `name` (the hedge), `outcome` (`started`, `won`, `lost`) | hedges | hedges started, hedges whose answer was the call's, hedges dropped unanswered (a refused hedge is the bulkhead's or breaker's refusal, counted there) |
//! | `policy_injected_faults_total` | counter | `name` (the drill), `fault` (`latency`, `error`, `refuse`, `status_429`) | faults | faults a chaos drill injected (feature `chaos`): drills, never incidents |
//! | `policy_hedge_stopped_total` | counter | `name`, `reason` (`deadline`, `budget`) | hedges | hedges not started: the deadline was about to pass, or the allowance they share with retries was exhausted |
//! | `policy_retry_budget_balance` | gauge | `name` | retries | what the policy's allowance still grants in its window; set when a retry draws from it or retrying stops |
//! | `policy_tasks_total` | counter | `class` (`deferred`, `background`), `outcome` (`finished`, `failed`, `refused`, `panicked`, `abandoned`) | tasks | tasks ended, by how |
//! | `policy_tasks_waiting` | gauge | `class` | tasks | the queue: deferred tasks made and not started (waiting for their response, or for a slot of the process's bound), background tasks submitted and waiting for their pool's slot |
//! | `policy_task_start_delay_seconds` | histogram | `class` | seconds | from hand-over to start: for deferred work from its response's end (or its deferral, outside a request), for background work from its submission to its slot |
//! | `policy_fallbacks_total` | counter | `name` (the operation), `reason` (`failed`, `deadline_exceeded`, a refusal's kind) | answers | calls answered by their fallback |
//! | `policy_stale_total` | counter | `name`, `reason` (as above) | answers | calls answered with a stale result |
//! | `policy_polls_over_budget_total` | counter | `name` | polls | polls that computed longer than their budget |
//! | `policy_queue_tasks_total` | counter | `name` (the queue), `event` (`enqueued`, `refused` with `reason` `full`, `unavailable`, `shed`, `encoding` or `too_large`; `not_replicated`; `completed`, `failed`, `redelivered`, `dead_lettered`, `rejected` with `reason` `unsigned`, `bad_signature`, `too_large` or `malformed`; `superseded`, `settle_failed`, `consumer_removed`) | tasks | a durable queue's tasks in this instance (feature `redis`): enqueued or refused here, and what its workers did with them (`rejected`: dead-lettered unrun; `superseded`: a delivery that ended after another worker claimed the task; `settle_failed`: an acknowledgement or dead-letter move Redis did not take) |
//! | `policy_queue_length` | gauge | `name` | tasks | unfinished tasks in the queue's stream, fleet-wide, as last read (every second while a worker runs) |
//! | `policy_queue_pending` | gauge | `name` | tasks | tasks delivered and not yet acknowledged, fleet-wide (per consumer in the snapshot, whose consumer names are not bounded enough for a label) |
//! | `policy_queue_dead_letters` | gauge | `name` | tasks | dead letters kept in the queue's dead-letter stream |
//! | `policy_queue_oldest_age_seconds` | gauge | `name` | seconds | age of the oldest unfinished task, by the Redis server's clock (0 when there is none) |
//!
//! **Cost.** With the feature off, none of this exists. With it on and no recorder installed,
//! an admitted call pays a few branches on empty handles and two thread-local writes per poll
//! (the notes of its outcome, kept apart from an enclosing call's): an operation sees at its
//! first call that nobody listens (the facade's stand-in recorder) and never reads the clock
//! for its duration. BENCHMARKS.md has the row (about 4 to 10 ns per call). With a recorder, each call reads the
//! clock twice and records two histogram values, and each bulkhead slot taken and given back
//! adds two gauge updates: whatever the recorder's handles cost.

use std::cell::Cell;
use std::fmt;
use std::time::Duration;

use crate::error::{Human, OpenCause, RefusalReason, ResilienceError, ShedReason};

thread_local! {
    /// The operation whose call is being polled on this thread: two plain thread-local writes
    /// per poll of a [`Traced`](crate::__macro_support::Traced) future.
    static OPERATION: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// The operation of the annotated call being polled on this thread, if any.
pub(crate) fn operation() -> Option<&'static str> {
    OPERATION.with(Cell::get)
}

/// Puts `operation` in scope on this thread for one poll of its call; returns the operation
/// it replaces, to put back with [`leave_operation`] when the poll returns.
#[inline]
pub(crate) fn enter_operation(operation: &'static str) -> Option<&'static str> {
    OPERATION.with(|op| op.replace(Some(operation)))
}

/// Puts back the operation [`enter_operation`] replaced.
#[inline]
pub(crate) fn leave_operation(outer: Option<&'static str>) {
    OPERATION.with(|op| op.set(outer));
}

// The record and the measure of an operation's calls live with its calls (`calls`, which
// names nothing of this module); what the mechanisms note of a call goes to its meter.
use crate::calls::meter;
pub use crate::calls::{CallOutput, Calls};

/// A refusal became the error of the call being polled (its metrics' `refused` outcome).
#[inline]
pub(crate) fn call_refused(kind: crate::RefusalKind) {
    meter::refused(kind);
}

/// An expiry became the error of the call being polled (its metrics' `expired` outcome).
#[inline]
pub(crate) fn call_expired() {
    meter::expired();
}

/// An operation's own name from the name the registry knows it by: the expansion names an
/// operation's shedder, fallback and pool `module::path::operation`, unique in the process;
/// people read `operation`.
pub(crate) fn short_name(registered: &str) -> &str {
    registered.rsplit("::").next().unwrap_or(registered)
}

/// Whole milliseconds, saturating: the unit of every duration field.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The numbers a refusal's reason carries, each its own field.
#[derive(Default)]
struct RefusalNumbers {
    remaining_ms: Option<u64>,
    count: Option<u32>,
    window_ms: Option<u64>,
    max_concurrent: Option<u32>,
    max_queued: Option<u32>,
    waited_ms: Option<u64>,
    load: Option<f64>,
    threshold: Option<f64>,
    expected_cost_ms: Option<u64>,
    min_budget_ms: Option<u64>,
    retry_after_ms: Option<u64>,
}

impl RefusalNumbers {
    fn of(reason: &RefusalReason) -> Self {
        let mut n = Self::default();
        match reason {
            RefusalReason::BreakerOpen { remaining, cause } => {
                n.remaining_ms = Some(ms(*remaining));
                if let Some((count, window)) = cause.counted() {
                    n.count = Some(count);
                    n.window_ms = Some(ms(window));
                }
                if let OpenCause::Tripped { retry_after, .. } = cause {
                    n.retry_after_ms = Some(ms(*retry_after));
                }
            }
            RefusalReason::BulkheadFull {
                max_concurrent,
                max_queued,
            } => {
                n.max_concurrent = Some(*max_concurrent);
                n.max_queued = Some(*max_queued);
            }
            RefusalReason::RequestQueueFull { max_per_request } => {
                n.max_queued = Some(*max_per_request);
            }
            RefusalReason::BulkheadQueueTimeout { waited } => n.waited_ms = Some(ms(*waited)),
            RefusalReason::Shed(shed) => n.shed(shed),
            RefusalReason::InsufficientBudget {
                remaining,
                min_budget,
            } => {
                n.remaining_ms = Some(ms(*remaining));
                n.min_budget_ms = Some(ms(*min_budget));
            }
            RefusalReason::RateLimited { retry_after, .. } => {
                n.retry_after_ms = retry_after.map(ms);
            }
            RefusalReason::Injected { retry_after, .. } => {
                n.retry_after_ms = retry_after.map(ms);
            }
        }
        n
    }

    fn shed(&mut self, shed: &ShedReason) {
        match shed {
            ShedReason::Load {
                load, threshold, ..
            } => {
                self.load = Some(*load);
                self.threshold = Some(*threshold);
            }
            ShedReason::Budget {
                remaining,
                expected_cost,
            } => {
                self.remaining_ms = Some(ms(*remaining));
                self.expected_cost_ms = Some(ms(*expected_cost));
            }
            // Its numbers (`free`, `kept`) are in the refusal's message; the level is the
            // event's `criticality`.
            ShedReason::Criticality { .. } => {}
        }
    }
}

pub(crate) fn refused(refusal: &ResilienceError) {
    let reason = refusal.reason();
    let n = RefusalNumbers::of(reason);
    tracing::debug!(
        target: "policy",
        operation = operation(),
        mechanism = reason.mechanism(),
        name = refusal.name(),
        kind = refusal.kind().as_str(),
        reason = reason.code(),
        remaining_ms = n.remaining_ms,
        count = n.count,
        window_ms = n.window_ms,
        max_concurrent = n.max_concurrent,
        max_queued = n.max_queued,
        waited_ms = n.waited_ms,
        load = n.load,
        threshold = n.threshold,
        expected_cost_ms = n.expected_cost_ms,
        min_budget_ms = n.min_budget_ms,
        retry_after_ms = n.retry_after_ms,
        "{refusal}"
    );
}

/// A shed decision by `mechanism` (`shedder`, or `background` for the pool's own), with
/// `detail` for the message.
pub(crate) fn shed(
    mechanism: &'static str,
    name: &str,
    class: &'static str,
    reason: &ShedReason,
    detail: &dyn fmt::Display,
) {
    let mut n = RefusalNumbers::default();
    n.shed(reason);
    tracing::debug!(
        target: "policy",
        operation = operation(),
        mechanism,
        name,
        kind = "shed",
        reason = reason.signal(),
        class,
        load = n.load,
        threshold = n.threshold,
        remaining_ms = n.remaining_ms,
        expected_cost_ms = n.expected_cost_ms,
        "shed {class} work for `{name}`: {detail}"
    );
}

pub(crate) fn breaker_opened(name: &str, cause: &OpenCause, open_for: Duration) {
    let (count, window) = cause.counted().unzip();
    let retry_after_ms = match cause {
        OpenCause::Tripped { retry_after, .. } => Some(ms(*retry_after)),
        _ => None,
    };
    tracing::warn!(
        target: "policy",
        operation = operation(),
        mechanism = "breaker",
        name,
        kind = "breaker_opened",
        reason = cause.code(),
        open_for_ms = ms(open_for),
        injected = cause.injected_by().map(|_| true),
        drill = cause.injected_by(),
        count,
        window_ms = window.map(ms),
        retry_after_ms,
        "breaker `{name}` opened for {} after {cause}",
        Human(open_for)
    );
}

/// An adaptive bulkhead's slot count moved materially (the caller decides what is material).
pub(crate) fn bulkhead_limit_changed(
    name: &str,
    from: u32,
    to: u32,
    latency_noload_ms: Option<f64>,
    latency_recent_ms: Option<f64>,
    queue_estimate: f64,
) {
    let (reason, why) = if to < from {
        ("queueing", "calls wait inside the dependency")
    } else {
        ("headroom", "the dependency answers as fast as unloaded")
    };
    tracing::info!(
        target: "policy",
        operation = operation(),
        mechanism = "bulkhead",
        name,
        kind = "bulkhead_limit",
        reason,
        from,
        to,
        latency_noload_ms,
        latency_recent_ms,
        queue_estimate,
        "bulkhead `{name}` now admits {to} calls at once (was {from}): {why}"
    );
}

/// A call expired under a budget its caller shortened: the caller's, not the dependency's.
pub(crate) fn caller_expired(name: &str, mechanism: &'static str, budget: Duration) {
    tracing::debug!(
        target: "policy",
        operation = operation(),
        mechanism,
        name,
        kind = "caller_expired",
        reason = "callers_budget",
        budget_ms = ms(budget),
        "a call through `{name}` expired under the {} its caller left it; not counted against the dependency",
        Human(budget)
    );
}

/// `reason` is `cooldown` or `probe_succeeded`.
pub(crate) fn breaker_closed(name: &str, reason: &'static str) {
    let why = match reason {
        "cooldown" => "the cooldown elapsed; the next calls probe",
        _ => "a probe succeeded",
    };
    tracing::info!(
        target: "policy",
        operation = operation(),
        mechanism = "breaker",
        name,
        kind = "breaker_closed",
        reason,
        "breaker `{name}` closed: {why}"
    );
}

pub(crate) fn retry_after_capped(name: &str, asked: Duration, cap: Duration) {
    tracing::info!(
        target: "policy",
        operation = operation(),
        mechanism = "breaker",
        name,
        kind = "retry_after_capped",
        reason = "max_retry_after",
        asked_ms = ms(asked),
        cap_ms = ms(cap),
        "breaker `{name}` was asked to back off for {} and opens for its cap of {}",
        Human(asked),
        Human(cap)
    );
}

/// `code` is what the attempt ended with (`failed`, `expired` or the refusal's kind).
pub(crate) fn retry(
    name: &str,
    attempt: u32,
    delay: Duration,
    code: &'static str,
    error: &dyn fmt::Display,
) {
    tracing::debug!(
        target: "policy",
        operation = operation(),
        mechanism = "retry",
        name,
        kind = "retry",
        reason = code,
        attempt,
        delay_ms = ms(delay),
        "retrying `{name}` (attempt {next}) in {} after: {error}",
        Human(delay),
        next = attempt + 1
    );
    meter::retried();
}

/// `reason` is `deadline`, `budget`, `exhausted` or `pushback`; `why` the sentence for people.
pub(crate) fn retry_stopped(name: &str, reason: &'static str, why: &'static str, attempt: u32) {
    tracing::info!(
        target: "policy",
        operation = operation(),
        mechanism = "retry",
        name,
        kind = "retry_stopped",
        reason,
        attempt,
        "stopped retrying `{name}` after attempt {attempt}: {why}"
    );
}

/// A hedge of attempt `attempt - 1` started, `delay` after the last one.
pub(crate) fn hedge(name: &str, attempt: u32, delay: Duration) {
    tracing::debug!(
        target: "policy",
        operation = operation(),
        mechanism = "hedge",
        name,
        kind = "hedge",
        reason = "slow",
        attempt,
        delay_ms = ms(delay),
        "hedging `{name}`: attempt {attempt} started, no answer after {}",
        Human(delay)
    );
    meter::retried();
}

/// `reason` is `deadline` or `budget`: the hedge after attempt `attempt` did not start.
pub(crate) fn hedge_stopped(name: &str, reason: &'static str, attempt: u32) {
    tracing::debug!(
        target: "policy",
        operation = operation(),
        mechanism = "hedge",
        name,
        kind = "hedge_stopped",
        reason,
        attempt,
        "not hedging `{name}` after attempt {attempt}: {}",
        if reason == "budget" { "the retry allowance is exhausted" } else { "the deadline is about to pass" }
    );
}

/// A hedge was refused by the breaker or the bulkhead: it never ran.
pub(crate) fn hedge_refused(name: &str, refusal: &ResilienceError) {
    tracing::debug!(
        target: "policy",
        operation = operation(),
        mechanism = "hedge",
        name,
        kind = "hedge_refused",
        reason = refusal.reason().code(),
        refused_by = refusal.kind().as_str(),
        "a hedge of `{name}` was refused: {refusal}"
    );
}

/// The call's answer came from hedge attempt `attempt`.
pub(crate) fn hedge_won(name: &str, attempt: u32) {
    tracing::debug!(
        target: "policy",
        operation = operation(),
        mechanism = "hedge",
        name,
        kind = "hedge_won",
        reason = "first_answer",
        attempt,
        "a hedge of `{name}` answered first"
    );
}

/// `count` hedges were dropped unanswered: another attempt answered first.
pub(crate) fn hedge_lost(name: &str, count: u64) {
    tracing::debug!(
        target: "policy",
        operation = operation(),
        mechanism = "hedge",
        name,
        kind = "hedge_lost",
        reason = "cancelled",
        count,
        "{count} hedge(s) of `{name}` dropped: another attempt answered first"
    );
}

/// Deferred work with no request in scope starts at once: said once per process, since
/// without `AfterResponseLayer` on the routes every deferral runs before the response.
pub(crate) fn deferred_without_layer(name: &str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        tracing::warn!(
            target: "policy",
            mechanism = "deferred",
            name,
            kind = "no_after_response",
            reason = "no_after_response_layer",
            "deferred task `{name}` started at once: no request's AfterResponse is in scope, so \
             it did not wait for a response (add `.layer(velocity_policy::AfterResponseLayer::new())` to \
             the router for work deferred in handlers; work deferred outside requests always \
             starts at once, and this is said only once)"
        );
    });
}

pub(crate) fn task_finished(name: &str, class: &'static str) {
    tracing::trace!(
        target: "policy",
        mechanism = class,
        name,
        kind = "task_finished",
        reason = "finished",
        class,
        "{class} task `{name}` finished"
    );
}

pub(crate) fn task_failed(name: &str, class: &'static str, error: &str) {
    tracing::warn!(
        target: "policy",
        mechanism = class,
        name,
        kind = "task_failed",
        reason = "error",
        class,
        error,
        "{class} task `{name}` failed: {error}"
    );
}

pub(crate) fn task_refused(name: &str, class: &'static str, refusal: &ResilienceError) {
    tracing::info!(
        target: "policy",
        mechanism = class,
        name,
        kind = "task_refused",
        reason = refusal.reason().code(),
        class,
        refused_by = refusal.kind().as_str(),
        "{class} task `{name}` did not run: {refusal}"
    );
}

pub(crate) fn task_panicked(name: &str, class: &'static str, message: &str) {
    tracing::error!(
        target: "policy",
        mechanism = class,
        name,
        kind = "task_panicked",
        reason = "panic",
        class,
        panic = message,
        "{class} task `{name}` panicked: {message}"
    );
}

/// The code of an abandonment's sentence (the ones the platform and the task use).
fn abandon_code(detail: &str) -> &'static str {
    match detail {
        "handed over after the platform was shut down" => "shut_down",
        "handed over outside a tokio runtime" => "no_runtime",
        "the drain deadline passed" => "drain_deadline",
        "dropped before it finished" => "dropped",
        _ => "abandoned",
    }
}

/// `detail` is the sentence given to [`Task::abandon`](crate::defer::Task::abandon).
pub(crate) fn task_abandoned(name: &str, class: &'static str, detail: &'static str) {
    let code = abandon_code(detail);
    tracing::warn!(
        target: "policy",
        mechanism = class,
        name,
        kind = "task_abandoned",
        reason = code,
        class,
        detail,
        "{class} task `{name}` abandoned: {detail}"
    );
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
    let (reason, why) = if complete {
        ("complete", "everything in flight finished")
    } else {
        ("drain_deadline", "the drain deadline passed")
    };
    tracing::info!(
        target: "policy",
        mechanism = "platform",
        name = "platform",
        kind = "drain",
        reason,
        in_flight,
        finished,
        abandoned,
        drain_deadline_ms = ms(drain_deadline),
        deferred_scheduled = deferred.scheduled,
        deferred_finished = deferred.finished,
        deferred_abandoned = deferred.abandoned,
        deferred_in_flight = deferred.in_flight,
        background_scheduled = background.scheduled,
        background_finished = background.finished,
        background_abandoned = background.abandoned,
        background_in_flight = background.in_flight,
        "drained deferred work within {}: {finished} finished, {abandoned} abandoned ({why}); since start, deferred: {}; background: {}",
        Human(drain_deadline),
        deferred.summary,
        background.summary
    );
}

#[cfg(feature = "http")]
pub(crate) fn shutdown_signal(signal: &'static str) {
    tracing::info!(
        target: "policy",
        mechanism = "platform",
        name = "platform",
        kind = "shutdown_signal",
        reason = "signal",
        signal,
        "{signal} received: stopping"
    );
}
