//! The scenario: the service and its fake providers under load, through phases that make a
//! dependency sick in different ways, measured from the client's side (every response's
//! latency and outcome) and from the service's (the policy events, the registry's snapshot,
//! the timeline of responses and deferred work, the providers' own counts).
//!
//! [`run`] starts everything, warms up, and goes through the phases (`phases.rs`: which fault,
//! how long, what load), each driven by the load generator (`load.rs`: saves and reads sent at
//! fixed rates, every response recorded) and measured (`measure.rs`: what changed in the
//! registry, the events and the providers); in Redis mode a second instance in its own process
//! takes saves while the first one's opening holds (`second.rs`).
//!
//! The scenario may run once per process: the registry, the background pool and the event
//! log are process-wide.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::DemoError;
use crate::client;
use crate::events::EventLog;
use crate::stack::{self, Instance, Providers};

mod load;
mod measure;
mod phases;
mod second;

pub use load::{Outcome, Route, SEED_DOCUMENTS, Sample};
pub use measure::{
    BackgroundCount, FallbackCount, PhaseReport, ProviderCalls, QueueCount, RouteStats, RunReport,
    SearchLimits, percentile,
};
pub use phases::{BURST_EVERY, BURST_WAVE, Phase, READ_RATE, SAVE_RATE, phases};
pub use second::SharedReport;

use load::{Load, wait_for_deferred_work, warm_up};
use measure::Reading;
use second::SecondInstance;

/// How the scenario runs.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Phases of 1.5 s instead of 8 s.
    pub short: bool,
    /// Print a line of progress every second.
    pub progress: bool,
    /// The store's file (a temporary one when `None`).
    pub db_path: Option<PathBuf>,
    /// With a Redis URL: a second instance, in its own process, shares the breakers.
    pub redis_url: Option<String>,
    /// The binary that runs the second instance (`policy-demo instance ...`).
    pub instance_binary: Option<PathBuf>,
}

// A poisoned lock means a panic elsewhere while it was held; the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// What every phase runs against.
struct Stage<'a> {
    load: &'a Arc<Load>,
    /// The first instance.
    base: &'a str,
    /// The second instance, in Redis mode.
    second: Option<&'a SecondInstance>,
    providers: &'a Providers,
    log: &'a EventLog,
    /// How many phases there are.
    count: usize,
    /// Print a line of progress every second.
    progress: bool,
}

/// Runs the scenario and measures it.
pub async fn run(options: &Options) -> Result<RunReport, DemoError> {
    let log = EventLog::install()?;
    let redis_prefix = format!(
        "policy-demo-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    );
    if let Some(url) = &options.redis_url {
        stack::share_breakers(url, &redis_prefix, "a").await?;
    }
    let db = stack::prepare_database(options.db_path.as_deref(), SEED_DOCUMENTS).await?;
    let providers = Providers::start().await?;
    let instance = Instance::start("a", &providers.urls(), db, 0).await?;
    let base = instance.url();
    let second = SecondInstance::for_options(options, &redis_prefix, &providers.urls()).await?;
    if options.progress {
        println!("  the service listens at {base} (dashboard: {base}/dashboard)");
        if let Some(second) = &second {
            println!(
                "  a second instance listens at {}, sharing breakers through Redis",
                second.url
            );
        }
    }

    let http = client::http_client();
    warm_up(
        &Load::new(http.clone()),
        &base,
        second.as_ref().map(|s| s.url.as_str()),
    )
    .await;

    let plan = phases(options.short, second.is_some());
    // Each phase's requests are counted apart (their ids start `a{phase}-`).
    for index in 0..plan.len() {
        instance
            .services
            .timeline
            .count_group(&format!("a{index}-"))
            .map_err(|e| DemoError::Setup(e.to_string()))?;
    }
    let load = Load::new(http);
    let stage = Stage {
        load: &load,
        base: &base,
        second: second.as_ref(),
        providers: &providers,
        log,
        count: plan.len(),
        progress: options.progress,
    };
    let mut reports = Vec::with_capacity(plan.len());
    let mut shared = None;
    for (index, phase) in plan.iter().enumerate() {
        let (report, shared_in_phase) = run_phase(&stage, index, phase).await;
        reports.push(report);
        shared = shared_in_phase.or(shared);
    }
    let elapsed = load.t0.elapsed();
    // Every response is in; then every piece of deferred work they scheduled has run.
    load.settle().await;
    wait_for_deferred_work(Duration::from_secs(10)).await;

    let samples = std::mem::take(&mut *lock(&load.samples));
    measure::add_route_stats(&mut reports, &samples, &instance.services.timeline);
    if let Some(shared) = &mut shared {
        second::count_saves(shared, &samples, &providers);
    }

    if let Some(second) = second {
        second.stop().await;
    }
    instance.stop().await;
    stack::drain_queue_worker(Duration::from_secs(2)).await;
    providers.stop().await;
    Ok(RunReport {
        phases: reports,
        samples,
        elapsed,
        shared,
        skipped: load.skipped.load(Ordering::Relaxed),
        request_budget: crate::model::request_deadline()?,
        search_limits: SearchLimits::of(velocity_policy::Registry::global()),
        save_tree: crate::model::observed_tree(
            velocity_policy::Registry::global(),
            "save_document",
        ),
    })
}

/// One phase: its faults set, its load driven, what changed measured; and in the phase where
/// the second instance took saves, what it says of them.
async fn run_phase(
    stage: &Stage<'_>,
    index: usize,
    phase: &Phase,
) -> (PhaseReport, Option<SharedReport>) {
    let providers = stage.providers;
    let waited = match phase.after_cooldown_of {
        Some(breaker) => Some(wait_for_cooldown(stage, breaker).await),
        None => None,
    };
    providers.search.set_mode(phase.search);
    providers.notifier.set_mode(phase.notifier);
    providers.sessions.set_mode(phase.sessions);
    stage.log.set_phase(index);
    for p in providers.all() {
        p.take_max_in_flight();
        p.take_budgets();
    }
    let before = Reading::now(providers);
    let started = stage.load.t0.elapsed();
    if stage.progress {
        println!(
            "\n  phase {}/{}: {} ({})",
            index + 1,
            stage.count,
            phase.name,
            phase.story
        );
    }
    // A drill is switched at run time through the registry, like an operator would.
    let drill = phase
        .chaos
        .map(|name| velocity_policy::Registry::global().chaos(name));
    if let Some(drill) = &drill {
        // The scenario is a drill run on purpose: it arms drills for the phase.
        velocity_policy::chaos::arm();
        drill.enable();
    }
    let b_window = phases::drive_phase(stage, index, phase).await;
    if let Some(drill) = &drill {
        drill.disable();
        velocity_policy::chaos::disarm();
    }
    let after = Reading::now(providers);
    let counts = stage.log.counts(index);
    let mut shared = None;
    if let (Some(window), Some(second)) = (b_window, stage.second) {
        shared = Some(second::shared_report(stage.load, &second.url, index, window).await);
    }
    let mut report = measure::phase_report(stage, index, phase, started, &before, &after, &counts);
    report.waited_for_cooldown = waited;
    (report, shared)
}

/// The longest pause before a phase for a breaker's opening to end; past it the phase starts
/// anyway (and its report shows the provider's calls it got, perhaps none).
const MAX_COOLDOWN_WAIT: Duration = Duration::from_secs(10);

/// Pauses between phases, with no load sent and every provider healthy, until `breaker` is no
/// longer open (its cooldown is over; the next call probes it). Returns how long that took.
async fn wait_for_cooldown(stage: &Stage<'_>, breaker: &str) -> Duration {
    let started = tokio::time::Instant::now();
    for p in stage.providers.all() {
        p.set_mode(crate::providers::Mode::Healthy);
    }
    let Some(breaker) = velocity_policy::Registry::global().find_breaker(breaker) else {
        return Duration::ZERO;
    };
    while breaker.state() == velocity_policy::breaker::BreakerState::Open
        && started.elapsed() < MAX_COOLDOWN_WAIT
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let waited = started.elapsed();
    if stage.progress && !waited.is_zero() {
        println!(
            "
  (paused {:.1} s, no load, every provider healthy, until the `{}` breaker's opening ended)",
            waited.as_secs_f64(),
            breaker.name()
        );
    }
    waited
}
