//! The service side of the soak: the same service `serve` runs (its fake providers, the store,
//! one instance), in a process of its own so that what is measured is the service alone, plus a
//! probe on another port that says what the process holds and what its deferred and background
//! work did.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::Json;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt as _;
use tokio::net::TcpListener;
use velocity_policy::WorkClass;
use velocity_policy::defer::{ContainerPlatform, DrainReport};

use crate::DemoError;
use crate::events::EventLog;
use crate::scenario;
use crate::server::{ServeLimits, Server};
use crate::service::Services;
use crate::stack::{self, Instance, Providers};

/// Deferred tasks one saved document schedules: `service::save_document` defers
/// `record_analytics`, `index_document`, `publish_activity` and `notify_followers` once each,
/// after its write succeeded and before it answers `201 Created`.
pub const DEFERRED_PER_SAVE: u64 = 4;

/// The deferred task that submits background work: each start of `index_document` submits one
/// embedding (`service::embed_document`) to the background pool.
pub const SUBMITS_BACKGROUND: &str = "index_document";

/// Where the soak's service process listens, as it announces it on its first line of output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The service's base URL.
    pub service: String,
    /// The probe's base URL (`GET /stats`).
    pub probe: String,
    /// The search provider's base URL.
    pub search: String,
    /// The notifier's base URL.
    pub notifier: String,
    /// The session store's base URL.
    pub sessions: String,
}

/// Work the user does not wait for, counted from its scheduling to its end.
///
/// `scheduled` is counted apart from the runtime's own counts (see [`ServiceStats`]), so that
/// `scheduled = succeeded + failed + refused + shed + panicked + abandoned + in flight` checks
/// the runtime's accounting rather than restating it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkCounts {
    /// Tasks scheduled, counted by the demo.
    pub scheduled: u64,
    /// Tasks scheduled, counted by the runtime (`velocity_policy::defer::totals`): the two counts must
    /// agree.
    pub runtime_scheduled: u64,
    /// Ran to their end without an error.
    pub succeeded: u64,
    /// Ended with an `Err` (logged by the runtime).
    pub failed: u64,
    /// Refused by a mechanism before they ran, other than a shed decision.
    pub refused: u64,
    /// Shed: refused under load by the shedding rules (deferred), or not admitted to the pool
    /// (background).
    pub shed: u64,
    /// Panicked (caught and logged).
    pub panicked: u64,
    /// Dropped before they finished (each logged).
    pub abandoned: u64,
}

impl WorkCounts {
    /// Tasks whose fate is known: every outcome but "in flight".
    pub fn accounted(&self) -> u64 {
        self.succeeded + self.failed + self.refused + self.shed + self.panicked + self.abandoned
    }

    /// Scheduled and not yet ended (negative if the counts disagree).
    pub fn in_flight(&self) -> i64 {
        self.scheduled as i64 - self.accounted() as i64
    }
}

/// What the service process says about itself at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceStats {
    /// Tasks alive on the tokio runtime (`RuntimeMetrics::num_alive_tasks`).
    pub alive_tasks: u64,
    /// The runtime's worker threads.
    pub workers: u64,
    /// Tasks waiting in the runtime's global queue.
    pub global_queue_depth: u64,
    /// Panics anywhere in the process since it started (a panic hook counts them, caught or
    /// not).
    pub panics: u64,
    /// Responses finished.
    pub responses: u64,
    /// Documents saved (`201 Created`).
    pub created: u64,
    /// Deferred starts after their response was finished.
    pub started_after: u64,
    /// Deferred starts before their response was finished (never, if the layer keeps its
    /// promise).
    pub started_before: u64,
    /// Deferred starts whose response the timeline did not remember.
    pub started_unmatched: u64,
    /// Entries the timeline holds (in flight plus recently finished).
    pub timeline_entries: u64,
    /// Deferred work: scheduled is [`DEFERRED_PER_SAVE`] per document saved (counted by the
    /// timeline's middleware, not by the runtime).
    pub deferred: WorkCounts,
    /// Background work: scheduled is one per start of [`SUBMITS_BACKGROUND`] (counted by the
    /// timeline, not by the pool).
    pub background: WorkCounts,
    /// Tasks the process's platform holds now.
    pub platform_in_flight: u64,
    /// Breaker openings the event log no longer keeps (it keeps the latest ones).
    pub openings_forgotten: u64,
}

static PANICS: AtomicU64 = AtomicU64::new(0);

/// Counts every panic of the process, then reports it as the default hook does.
fn count_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::Relaxed);
        report(info);
    }));
}

struct Probe {
    services: Services,
    platform: ContainerPlatform,
    log: &'static EventLog,
}

impl Probe {
    /// The counts now. The runtime's counts are read before the timeline's, so a task counted
    /// as ended was already counted as scheduled: in flight is never negative unless a count
    /// is wrong.
    fn stats(&self) -> ServiceStats {
        let metrics = tokio::runtime::Handle::current().metrics();
        let deferred = velocity_policy::defer::totals(WorkClass::Deferred);
        let background = velocity_policy::defer::totals(WorkClass::Background);
        let deferred_shed: u64 = self
            .log
            .counts(0)
            .iter()
            .filter(|c| c.kind == "shed" && c.detail.starts_with("deferred"))
            .map(|c| c.count)
            .sum();
        let tally = self.services.timeline.total();
        let (in_flight, finished) = self.services.timeline.held();
        ServiceStats {
            alive_tasks: metrics.num_alive_tasks() as u64,
            workers: metrics.num_workers() as u64,
            global_queue_depth: metrics.global_queue_depth() as u64,
            panics: PANICS.load(Ordering::Relaxed),
            responses: tally.responses,
            created: tally.created,
            started_after: tally.after,
            started_before: tally.before,
            started_unmatched: tally.unmatched,
            timeline_entries: (in_flight + finished) as u64,
            deferred: WorkCounts {
                scheduled: tally.created * DEFERRED_PER_SAVE,
                runtime_scheduled: deferred.scheduled,
                succeeded: deferred.succeeded(),
                failed: deferred.failed,
                // A shed decision inside deferred work is a refusal to the runtime; the shed
                // events tell it apart.
                refused: deferred.refused.saturating_sub(deferred_shed),
                shed: deferred_shed + deferred.shed,
                panicked: deferred.panicked,
                abandoned: deferred.abandoned,
            },
            background: WorkCounts {
                scheduled: tally.starts_of(SUBMITS_BACKGROUND),
                runtime_scheduled: background.scheduled,
                succeeded: background.succeeded(),
                failed: background.failed,
                refused: background.refused,
                shed: background.shed,
                panicked: background.panicked,
                abandoned: background.abandoned,
            },
            platform_in_flight: self.platform.in_flight() as u64,
            openings_forgotten: self.log.openings_forgotten(),
        }
    }
}

async fn stats(State(probe): State<std::sync::Arc<Probe>>) -> Json<ServiceStats> {
    Json(probe.stats())
}

/// The service process's last words, after its load stopped and its deferred work drained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Farewell {
    /// The counts after the drain.
    pub stats: ServiceStats,
    /// Tasks the drain saw finish.
    pub drained_finished: u64,
    /// Tasks the drain abandoned.
    pub drained_abandoned: u64,
}

/// Runs the service, its providers and the probe until stdin closes; then stops serving,
/// drains the deferred work and prints a [`Farewell`] line.
pub async fn run() -> Result<(), DemoError> {
    count_panics();
    let log = EventLog::install()?;
    let platform = ContainerPlatform::new();
    velocity_policy::defer::set_platform(platform.clone())
        .map_err(|e| DemoError::Setup(e.to_string()))?;
    let db = stack::prepare_database(None, scenario::SEED_DOCUMENTS).await?;
    let providers = Providers::start().await?;
    let instance = Instance::start("a", &providers.urls(), db, 0).await?;
    let probe = std::sync::Arc::new(Probe {
        services: instance.services.clone(),
        platform: platform.clone(),
        log,
    });
    let app = Router::new()
        .route("/stats", get(stats))
        .with_state(probe.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let probe_server = Server::spawn(
        listener,
        app,
        "the soak's probe".to_owned(),
        ServeLimits::default(),
    )?;
    let hello = Hello {
        service: instance.url(),
        probe: probe_server.url(),
        search: providers.search.url(),
        notifier: providers.notifier.url(),
        sessions: providers.sessions.url(),
    };
    println!("{}", serde_json::to_string(&hello).unwrap_or_default());

    // Runs until the driver closes our stdin (or goes away).
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 64];
    while stdin.read(&mut buf).await.unwrap_or(0) > 0 {}

    // As serve does: stop serving, drain the deferred work (it still calls the providers),
    // then stop the providers.
    instance.stop().await;
    let DrainReport {
        finished,
        abandoned,
        ..
    } = platform.shutdown(Duration::from_secs(10)).await;
    providers.stop().await;
    let farewell = Farewell {
        stats: probe.stats(),
        drained_finished: finished,
        drained_abandoned: abandoned,
    };
    probe_server.stop().await;
    println!("{}", serde_json::to_string(&farewell).unwrap_or_default());
    Ok(())
}
