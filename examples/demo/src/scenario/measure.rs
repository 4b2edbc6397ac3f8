//! The measurements: each route's latency and outcomes, and what the service did in each phase
//! (the registry's snapshot before and after it, the policy events, the providers' own counts),
//! all of it read from the run.

use std::collections::BTreeMap;
use std::time::Duration;

use velocity_policy::Registry;
use velocity_policy::breaker::BreakerState;

use super::Stage;
use super::load::{Load, Outcome, Route, Sample};
use super::lock;
use super::phases::Phase;
use super::second::SharedReport;
use crate::events::{Counted, Opening};
use crate::providers::{Budgets, Calls};
use crate::stack::Providers;
use crate::timeline::{Tally, Timeline};

/// Latency and outcomes of one route in one phase.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouteStats {
    /// Requests sent.
    pub count: u64,
    /// Answered 2xx.
    pub ok: u64,
    /// Median latency, over every response.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// The slowest.
    pub max: Duration,
    /// Every outcome but `ok`, counted.
    pub others: Vec<(String, u64)>,
}

impl RouteStats {
    /// The statistics of `samples`.
    pub fn of<'a>(samples: impl Iterator<Item = &'a Sample>) -> Self {
        let mut latencies = Vec::new();
        let mut outcomes: BTreeMap<Outcome, u64> = BTreeMap::new();
        for sample in samples {
            latencies.push(sample.latency);
            *outcomes.entry(sample.outcome.clone()).or_default() += 1;
        }
        latencies.sort_unstable();
        Self {
            count: latencies.len() as u64,
            ok: outcomes.get(&Outcome::Ok).copied().unwrap_or(0),
            p50: percentile(&latencies, 0.50),
            p99: percentile(&latencies, 0.99),
            max: latencies.last().copied().unwrap_or_default(),
            others: outcomes
                .into_iter()
                .filter(|(o, _)| *o != Outcome::Ok)
                .map(|(o, n)| (o.label(), n))
                .collect(),
        }
    }
}

/// The nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One operation's fallbacks in a phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FallbackCount {
    /// The operation.
    pub operation: String,
    /// The function that answered.
    pub answered_by: String,
    /// Answered because the operation was refused.
    pub refused: u64,
    /// Answered because its deadline passed.
    pub expired: u64,
    /// Answered because it failed.
    pub failed: u64,
}

/// Calls one provider received from one caller in a phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderCalls {
    /// The provider.
    pub provider: &'static str,
    /// The calling instance.
    pub caller: String,
    /// What it received and answered.
    pub calls: Calls,
}

/// The background pool in a phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackgroundCount {
    /// Tasks that ran to their end.
    pub finished: u64,
    /// Submissions shed because the pool was full.
    pub shed_load: u64,
    /// Submissions shed because the compartment it yields to was busy.
    pub shed_pressure: u64,
}

/// The durable queue `embeddings` in a phase (the demo built with `redis`, `REDIS_URL` set):
/// this instance's counts over the phase, and the stream's figures (fleet-wide) at its end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCount {
    /// Embeddings this instance enqueued on the stream.
    pub enqueued: u64,
    /// Enqueues refused (full, Redis unavailable, shed).
    pub refused: u64,
    /// Tasks this instance's worker completed and acknowledged.
    pub completed: u64,
    /// Tasks this instance claimed from a worker that had not finished them.
    pub redelivered: u64,
    /// Tasks this instance moved to the dead-letter stream.
    pub dead_lettered: u64,
    /// Unfinished tasks in the stream at the phase's end, as last read.
    pub length: u64,
    /// Of them, delivered and not yet acknowledged.
    pub pending: u64,
}

/// Everything measured in one phase.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseReport {
    /// The phase.
    pub phase: Phase,
    /// How long the load paused before it for a breaker's opening to end
    /// ([`Phase::after_cooldown_of`]).
    pub waited_for_cooldown: Option<Duration>,
    /// When it started, from the start of the first phase.
    pub started: Duration,
    /// When it ended.
    pub ended: Duration,
    /// The save route.
    pub save: RouteStats,
    /// The read route (the unrelated one).
    pub read: RouteStats,
    /// Saves on the second instance (Redis mode, shared-opening phase).
    pub save_on_b: Option<RouteStats>,
    /// Refusals by kind and mechanism (the runtime's refusal events).
    pub refusals: Vec<Counted>,
    /// Faults a chaos drill injected, by drill and fault (the runtime's `injected` events).
    pub injected: Vec<Counted>,
    /// Shed decisions by reason (the runtime's shed events).
    pub shed: Vec<Counted>,
    /// Breaker openings, each with what opened it.
    pub openings: Vec<Opening>,
    /// Retries started, per retry policy.
    pub retries: Vec<(String, u64)>,
    /// Why retrying stopped early, per policy.
    pub retry_stops: Vec<Counted>,
    /// Fallbacks per operation.
    pub fallbacks: Vec<FallbackCount>,
    /// Critical work shed for load (the project's promise: always 0).
    pub critical_shed_for_load: u64,
    /// Deferred starts compared with their responses' ends.
    pub deferred: Tally,
    /// Deferred or background tasks that ended with an error (logged by the runtime).
    pub tasks_failed: Vec<Counted>,
    /// The background pool.
    pub background: BackgroundCount,
    /// The durable queue, when the embeddings went through Redis.
    pub queue: Option<QueueCount>,
    /// Calls each provider received, per caller.
    pub provider_calls: Vec<ProviderCalls>,
    /// The most calls each provider had in flight at once.
    pub provider_max_in_flight: Vec<(&'static str, u32)>,
    /// The budgets each provider was given (the propagated `x-deadline-ms`).
    pub provider_budgets: Vec<(&'static str, Budgets)>,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// Each phase, in order.
    pub phases: Vec<PhaseReport>,
    /// Every response.
    pub samples: Vec<Sample>,
    /// The run's length, first phase to last.
    pub elapsed: Duration,
    /// Redis mode.
    pub shared: Option<SharedReport>,
    /// Requests the load generator did not send because 1024 were already in flight (0 on a
    /// healthy run: the phases' load is far below that).
    pub skipped: u64,
    /// The request's budget every route stamped (`demo.policy`'s `request` stanza).
    pub request_budget: Duration,
    /// The `search` breaker's and bulkhead's limits, as configured (`demo.policy`), read from
    /// the registry after the run: what the report's bound on a sick provider's cost is made of.
    pub search_limits: SearchLimits,
    /// The save's tree as the run called it (the registry's observed calls) with
    /// `demo.policy`'s numbers: its operations and both worst cases. `None` if no save ran.
    pub save_tree: Option<velocity_policy_lang::bound::Tree>,
}

/// What bounds the calls a sick search provider gets while its breaker counts failures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchLimits {
    /// Failures that open the `search` breaker (its `open_after` count; 0 if it is not a count).
    pub failures_to_open: u32,
    /// Calls the `search` bulkhead lets run at once.
    pub slots: u32,
}

impl SearchLimits {
    /// The limits of the registry's `search` breaker and bulkhead (zero for one not built).
    pub fn of(registry: &Registry) -> Self {
        let failures_to_open =
            registry
                .find_breaker("search")
                .map_or(0, |b| match b.snapshot().config.open_after {
                    velocity_policy::breaker::OpenAfter::Failures { count, .. } => count,
                    _ => 0,
                });
        let slots = registry
            .find_bulkhead("search")
            .map_or(0, |b| b.snapshot().max_concurrent);
        Self {
            failures_to_open,
            slots,
        }
    }
}

impl RunReport {
    /// The phase named `name`.
    pub fn phase(&self, name: &str) -> Option<&PhaseReport> {
        self.phases.iter().find(|p| p.phase.name == name)
    }
}

/// The registry's snapshot and the providers' counts at one moment: a phase's measurements are
/// what changed between two of these.
pub(super) struct Reading {
    snapshot: velocity_policy::Snapshot,
    calls: Vec<(&'static str, BTreeMap<String, Calls>)>,
}

impl Reading {
    pub(super) fn now(providers: &Providers) -> Self {
        Self {
            snapshot: Registry::global().snapshot(),
            calls: calls_of(providers),
        }
    }
}

/// What the service did in phase `index`, between `before` and `after`. The routes' statistics
/// and the deferred tally are filled in once every response is in ([`add_route_stats`]).
pub(super) fn phase_report(
    stage: &Stage<'_>,
    index: usize,
    phase: &Phase,
    started: Duration,
    before: &Reading,
    after: &Reading,
    counts: &[Counted],
) -> PhaseReport {
    let pick = |kinds: &[&str]| -> Vec<Counted> {
        counts
            .iter()
            .filter(|c| kinds.contains(&c.kind.as_str()))
            .cloned()
            .collect()
    };
    let retries = counts
        .iter()
        .filter(|c| c.kind == "retry")
        .map(|c| (c.name.clone(), c.count))
        .collect();
    let (before, after, calls_before, calls_after) = (
        &before.snapshot,
        &after.snapshot,
        &before.calls,
        &after.calls,
    );
    PhaseReport {
        phase: phase.clone(),
        waited_for_cooldown: None,
        started,
        ended: stage.load.t0.elapsed(),
        save: RouteStats::default(),
        read: RouteStats::default(),
        save_on_b: None,
        refusals: pick(&[
            "breaker_open",
            "bulkhead_full",
            "insufficient_budget",
            "rate_limited",
        ]),
        injected: pick(&["injected"]),
        shed: pick(&["shed"]),
        openings: stage.log.openings(index),
        retries,
        retry_stops: pick(&["retry_stopped"]),
        fallbacks: fallbacks_since(before, after),
        critical_shed_for_load: critical_shed(after) - critical_shed(before),
        deferred: Tally::default(),
        tasks_failed: pick(&["task_failed", "task_panicked", "task_abandoned"]),
        background: background_since(before, after),
        queue: queue_since(before, after),
        provider_calls: calls_since(calls_before, calls_after),
        provider_max_in_flight: stage
            .providers
            .all()
            .iter()
            .map(|p| (p.name(), p.take_max_in_flight()))
            .collect(),
        provider_budgets: stage
            .providers
            .all()
            .iter()
            .map(|p| (p.name(), p.take_budgets()))
            .collect(),
    }
}

/// Each phase's routes from every response, and its deferred tally from the service's timeline
/// (requests of phase `i` have ids starting `a{i}-`).
pub(super) fn add_route_stats(
    reports: &mut [PhaseReport],
    samples: &[Sample],
    timeline: &Timeline,
) {
    for (index, report) in reports.iter_mut().enumerate() {
        let of = |route: Route| {
            RouteStats::of(
                samples
                    .iter()
                    .filter(|s| s.phase == index && s.route == route),
            )
        };
        report.save = of(Route::Save);
        report.read = of(Route::Read);
        let on_b = of(Route::SaveOnB);
        report.save_on_b = (on_b.count > 0).then_some(on_b);
        report.deferred = timeline.tally(&format!("a{index}-"));
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn breaker_state(name: &str) -> Option<BreakerState> {
    Registry::global().find_breaker(name).map(|b| b.state())
}

fn state_word(state: Option<BreakerState>) -> &'static str {
    match state {
        Some(BreakerState::Open) => "OPEN",
        Some(BreakerState::Probation) => "probation",
        Some(BreakerState::Closed) | None => "closed",
    }
}

pub(super) fn progress_line(
    load: &Load,
    index: usize,
    count: usize,
    phase: &Phase,
    phase_started: Duration,
) {
    let now = load.t0.elapsed();
    let since = now
        .saturating_sub(Duration::from_secs(1))
        .max(phase_started);
    let samples = lock(&load.samples);
    let recent = |route: Route| {
        RouteStats::of(
            samples
                .iter()
                .filter(|s| s.phase == index && s.route == route && s.at >= since),
        )
    };
    let (save, read) = (recent(Route::Save), recent(Route::Read));
    drop(samples);
    let refused = Registry::global()
        .find_breaker("search")
        .map_or(0, |b| b.snapshot().refusals);
    println!(
        "  {:>5.1}s  [{}/{}] {:<13}  saves {:>3} p99 {:>6.1} ms  reads {:>3} p99 {:>5.1} ms  breakers: search {}, sessions {}  (search refusals so far: {refused})",
        now.as_secs_f64(),
        index + 1,
        count,
        phase.name,
        save.count,
        ms(save.p99),
        read.count,
        ms(read.p99),
        state_word(breaker_state("search")),
        state_word(breaker_state("sessions")),
    );
}

fn fallbacks_since(
    before: &velocity_policy::Snapshot,
    after: &velocity_policy::Snapshot,
) -> Vec<FallbackCount> {
    after
        .fallbacks
        .iter()
        .filter_map(|f| {
            let was = before.fallbacks.iter().find(|b| b.operation == f.operation);
            let (r, e, x) = was.map_or((0, 0, 0), |b| (b.refused, b.expired, b.failed));
            let count = FallbackCount {
                operation: f.operation.to_string(),
                answered_by: f.answered_by.to_string(),
                refused: f.refused - r,
                expired: f.expired - e,
                failed: f.failed - x,
            };
            (count.refused + count.expired + count.failed > 0).then_some(count)
        })
        .collect()
}

fn queue_since(
    before: &velocity_policy::Snapshot,
    after: &velocity_policy::Snapshot,
) -> Option<QueueCount> {
    let pick = |s: &velocity_policy::Snapshot| {
        s.queues
            .iter()
            .find(|q| &*q.name == "embeddings")
            .map(|q| QueueCount {
                enqueued: q.enqueued,
                refused: q.refused_full + q.refused_unavailable + q.refused_shed,
                completed: q.completed,
                redelivered: q.redelivered,
                dead_lettered: q.dead_lettered,
                length: q.length,
                pending: q.pending,
            })
    };
    let a = pick(after)?;
    let b = pick(before).unwrap_or_default();
    Some(QueueCount {
        enqueued: a.enqueued - b.enqueued,
        refused: a.refused - b.refused,
        completed: a.completed - b.completed,
        redelivered: a.redelivered - b.redelivered,
        dead_lettered: a.dead_lettered - b.dead_lettered,
        length: a.length,
        pending: a.pending,
    })
}

fn background_since(
    before: &velocity_policy::Snapshot,
    after: &velocity_policy::Snapshot,
) -> BackgroundCount {
    let pick = |s: &velocity_policy::Snapshot| {
        s.background
            .iter()
            .find(|b| &*b.name == "embedding")
            .map_or(BackgroundCount::default(), |b| BackgroundCount {
                finished: b.finished,
                shed_load: b.shed_load,
                shed_pressure: b.shed_pressure,
            })
    };
    let (b, a) = (pick(before), pick(after));
    BackgroundCount {
        finished: a.finished - b.finished,
        shed_load: a.shed_load - b.shed_load,
        shed_pressure: a.shed_pressure - b.shed_pressure,
    }
}

fn critical_shed(snapshot: &velocity_policy::Snapshot) -> u64 {
    snapshot.shedders.iter().map(|s| s.shed_load.critical).sum()
}

fn calls_of(providers: &Providers) -> Vec<(&'static str, BTreeMap<String, Calls>)> {
    providers
        .all()
        .iter()
        .map(|p| (p.name(), p.calls()))
        .collect()
}

fn calls_since(
    before: &[(&'static str, BTreeMap<String, Calls>)],
    after: &[(&'static str, BTreeMap<String, Calls>)],
) -> Vec<ProviderCalls> {
    let mut out = Vec::new();
    for (provider, now) in after {
        let was = before.iter().find(|(p, _)| p == provider).map(|(_, c)| c);
        for (caller, calls) in now {
            let previous = was.and_then(|w| w.get(caller)).copied().unwrap_or_default();
            out.push(ProviderCalls {
                provider,
                caller: caller.clone(),
                calls: calls.since(&previous),
            });
        }
    }
    out
}

pub(super) fn search_calls_from(providers: &Providers, caller: &str) -> u64 {
    providers
        .search
        .calls()
        .get(caller)
        .map_or(0, |c| c.received)
}
