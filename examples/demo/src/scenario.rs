//! The scenario: the service and its fake providers under load, through phases that make a
//! dependency sick in different ways, measured from the client's side (every response's
//! latency and outcome) and from the service's (the policy events, the registry's snapshot,
//! the timeline of responses and deferred work, the providers' own counts).
//!
//! The scenario may run once per process: the registry, the background pool and the event
//! log are process-wide.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http::Method;
use policy::Registry;
use policy::breaker::BreakerState;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Semaphore;
use tokio::time::MissedTickBehavior;

use crate::DemoError;
use crate::client::{self, HttpClient, Reply};
use crate::events::{Counted, EventLog, Opening};
use crate::providers::{Calls, Mode};
use crate::service::token_for;
use crate::stack::{self, Instance, ProviderUrls, Providers};
use crate::timeline::Tally;

/// Saves per second, in every phase.
pub const SAVE_RATE: f64 = 20.0;
/// Reads per second, in every phase.
pub const READ_RATE: f64 = 40.0;
/// Saves sent at once in each wave of the burst phase.
pub const BURST_WAVE: usize = 32;
/// How often a burst wave is sent.
pub const BURST_EVERY: Duration = Duration::from_millis(500);
/// Documents stored before the first phase, for the read route.
pub const SEED_DOCUMENTS: u32 = 200;
const USERS: u64 = 50;
const MAX_IN_FLIGHT: u32 = 1024;
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

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

/// One phase of the scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// A short name.
    pub name: &'static str,
    /// What is going on, in one line.
    pub story: &'static str,
    /// How long it lasts.
    pub duration: Duration,
    /// The search provider's behaviour.
    pub search: Mode,
    /// The notifier's behaviour.
    pub notifier: Mode,
    /// The session store's behaviour.
    pub sessions: Mode,
    /// Waves of saves above capacity on top of the steady load.
    pub burst: bool,
    /// With Redis: the second instance takes saves while the shared opening holds.
    pub second_instance: bool,
}

/// The phases, in order.
pub fn phases(short: bool, redis: bool) -> Vec<Phase> {
    let duration = if short {
        Duration::from_millis(1500)
    } else {
        Duration::from_secs(8)
    };
    let phase = |name, story, search, sessions, burst| Phase {
        name,
        story,
        duration,
        search,
        notifier: Mode::Healthy,
        sessions,
        burst,
        second_instance: false,
    };
    vec![
        phase(
            "healthy",
            "every dependency answers in a few milliseconds",
            Mode::Healthy,
            Mode::Healthy,
            false,
        ),
        phase(
            "search slow",
            "the search provider takes 600 ms per call",
            Mode::slow(Duration::from_millis(600)),
            Mode::Healthy,
            false,
        ),
        Phase {
            second_instance: redis,
            // With a second instance, long enough in the short run for it to take saves while
            // the first instance's opening holds.
            duration: if redis {
                duration.max(Duration::from_secs(3))
            } else {
                duration
            },
            ..phase(
                "search down",
                "the search provider answers 503 to everything",
                Mode::Failing,
                Mode::Healthy,
                false,
            )
        },
        phase(
            "search 429",
            "the search provider answers 429 with Retry-After: 2",
            Mode::rate_limited(Duration::from_secs(2)),
            Mode::Healthy,
            false,
        ),
        phase(
            "burst",
            "waves of 32 saves at once, twice a second, on top of the steady load",
            Mode::Healthy,
            Mode::Healthy,
            true,
        ),
        phase(
            "sessions down",
            "the session store answers 503 to everything",
            Mode::Healthy,
            Mode::Failing,
            false,
        ),
        phase(
            "recovery",
            "every dependency is healthy again",
            Mode::Healthy,
            Mode::Healthy,
            false,
        ),
    ]
}

/// Which route a request took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Route {
    /// `POST /documents` on the first instance.
    Save,
    /// `GET /documents/{id}` on the first instance: the unrelated route.
    Read,
    /// `POST /documents` on the second instance (Redis mode).
    SaveOnB,
}

impl Route {
    /// Its label in tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::Save => "save",
            Self::Read => "read",
            Self::SaveOnB => "save (b)",
        }
    }
}

/// How a request ended, seen by the client.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// 200 or 201.
    Ok,
    /// 503 marked `x-degraded`: the session store could not answer, the request ran as
    /// anonymous, and a save, which needs more, was told to retry.
    Degraded,
    /// 503 with `x-refusal`: the work never ran.
    Refused(String),
    /// 504: the service stopped waiting.
    TimedOut,
    /// Another 4xx.
    Rejected(u16),
    /// Another 5xx.
    Failed(u16),
    /// No response (or none within 10 s).
    NoResponse,
}

impl Outcome {
    /// Its label in tables.
    pub fn label(&self) -> String {
        match self {
            Self::Ok => "ok".to_owned(),
            Self::Degraded => "503 degraded to anonymous".to_owned(),
            Self::Refused(kind) => format!("503 {kind}"),
            Self::TimedOut => "504 timed out".to_owned(),
            Self::Rejected(status) => format!("{status}"),
            Self::Failed(status) => format!("{status}"),
            Self::NoResponse => "no response".to_owned(),
        }
    }

    /// How the client saw `reply`.
    pub fn of(reply: &Reply) -> Self {
        match reply.status.as_u16() {
            200..=299 => Self::Ok,
            503 if reply.header("x-degraded").is_some() => Self::Degraded,
            503 => Self::Refused(
                reply
                    .header("x-refusal")
                    .unwrap_or("unavailable")
                    .to_owned(),
            ),
            504 => Self::TimedOut,
            status @ 400..=499 => Self::Rejected(status),
            status => Self::Failed(status),
        }
    }
}

/// One response, as the client saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The phase it was sent in.
    pub phase: usize,
    /// Its route.
    pub route: Route,
    /// When it was sent, from the start of the first phase.
    pub at: Duration,
    /// How long until the whole response was read.
    pub latency: Duration,
    /// How it ended.
    pub outcome: Outcome,
}

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

/// Everything measured in one phase.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseReport {
    /// The phase.
    pub phase: Phase,
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
    /// Critical work shed for load (the seed's promise: always 0).
    pub critical_shed_for_load: u64,
    /// Deferred starts compared with their responses' ends.
    pub deferred: Tally,
    /// Deferred or background tasks that ended with an error (logged by the runtime).
    pub tasks_failed: Vec<Counted>,
    /// The background pool.
    pub background: BackgroundCount,
    /// Calls each provider received, per caller.
    pub provider_calls: Vec<ProviderCalls>,
    /// The most calls each provider had in flight at once.
    pub provider_max_in_flight: Vec<(&'static str, u32)>,
}

/// What the second instance did in Redis mode.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedReport {
    /// The phase it took saves in.
    pub phase: usize,
    /// How long it took saves (while the first instance's opening held).
    pub window: Duration,
    /// Saves it answered.
    pub saves: u64,
    /// Calls it made to the search provider in that window.
    pub calls_to_search: u64,
    /// Calls the first instance made to the search provider in that window.
    pub calls_to_search_from_a: u64,
    /// Refusals of its `search` breaker (from its `/policy`).
    pub refusals: u64,
    /// What its `search` breaker says opened it.
    pub cause: String,
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
}

impl RunReport {
    /// The phase named `name`.
    pub fn phase(&self, name: &str) -> Option<&PhaseReport> {
        self.phases.iter().find(|p| p.phase.name == name)
    }
}

// A poisoned lock means a panic elsewhere while it was held; the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The load generator's shared state.
struct Load {
    client: HttpClient,
    t0: Instant,
    samples: Mutex<Vec<Sample>>,
    next: AtomicU64,
    in_flight: Arc<Semaphore>,
    skipped: AtomicU64,
}

impl Load {
    /// A generator whose clock starts now.
    fn new(client: HttpClient) -> Arc<Self> {
        Arc::new(Self {
            client,
            t0: Instant::now(),
            samples: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)),
            skipped: AtomicU64::new(0),
        })
    }

    fn record(&self, sample: Sample) {
        lock(&self.samples).push(sample);
    }

    /// Sends one save to `base` as part of `phase`, recorded as `route`.
    fn save(self: &Arc<Self>, base: &str, instance: &'static str, phase: usize, route: Route) {
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let load = self.clone();
        let url = format!("{base}/documents");
        tokio::spawn(async move {
            let _permit = permit;
            let n = load.next.fetch_add(1, Ordering::Relaxed);
            let user = 1 + n % USERS;
            let bearer = format!("Bearer {}", token_for(user));
            let request_id = format!("{instance}{phase}-s{n}");
            let body = serde_json::json!({
                "title": format!("Notes {n}"),
                "body": stack::sample_text(n),
            });
            let sent = Instant::now();
            let reply = tokio::time::timeout(
                CLIENT_TIMEOUT,
                client::send(
                    &load.client,
                    Method::POST,
                    &url,
                    &[
                        ("authorization", &bearer),
                        ("x-request-id", &request_id),
                        ("content-type", "application/json"),
                    ],
                    Bytes::from(body.to_string()),
                ),
            )
            .await;
            load.finish(phase, route, sent, reply);
        });
    }

    /// Reads one of the seeded documents from `base`.
    fn read(self: &Arc<Self>, base: &str, phase: usize) {
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let load = self.clone();
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let url = format!("{base}/documents/{}", 1 + n % u64::from(SEED_DOCUMENTS));
        tokio::spawn(async move {
            let _permit = permit;
            let sent = Instant::now();
            let reply = tokio::time::timeout(CLIENT_TIMEOUT, client::get(&load.client, &url)).await;
            load.finish(phase, Route::Read, sent, reply);
        });
    }

    fn finish(
        &self,
        phase: usize,
        route: Route,
        sent: Instant,
        reply: Result<Result<Reply, client::ClientError>, tokio::time::error::Elapsed>,
    ) {
        let latency = sent.elapsed();
        let outcome = match reply {
            Ok(Ok(reply)) => Outcome::of(&reply),
            _ => Outcome::NoResponse,
        };
        self.record(Sample {
            phase,
            route,
            at: sent.saturating_duration_since(self.t0),
            latency,
            outcome,
        });
    }

    /// Waits until every request sent has its response.
    async fn settle(&self) {
        let _ = self.in_flight.acquire_many(MAX_IN_FLIGHT).await;
    }
}

/// The second instance, in its own process (Redis mode).
struct SecondInstance {
    child: Child,
    url: String,
}

impl SecondInstance {
    async fn start(
        binary: &PathBuf,
        redis_url: &str,
        prefix: &str,
        urls: &ProviderUrls,
    ) -> Result<Self, DemoError> {
        let mut child = Command::new(binary)
            .args(["instance", "--name", "b", "--redis-prefix", prefix])
            .args(["--search", &urls.search])
            .args(["--notifier", &urls.notifier])
            .args(["--sessions", &urls.sessions])
            .env("REDIS_URL", redis_url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                DemoError::Setup(format!(
                    "cannot start the second instance ({}): {e}",
                    binary.display()
                ))
            })?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| DemoError::Setup("the second instance has no stdout".into()))?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .map_err(|_| DemoError::Setup("the second instance did not start in 30 s".into()))??;
        let url = first
            .as_deref()
            .and_then(|l| l.strip_prefix("listening "))
            .map(str::to_owned)
            .ok_or_else(|| {
                DemoError::Setup(format!(
                    "the second instance said {first:?} instead of its address"
                ))
            })?;
        Ok(Self { child, url })
    }

    async fn stop(mut self) {
        // Closing its stdin asks it to stop; it is killed if it does not.
        drop(self.child.stdin.take());
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
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

fn progress_line(load: &Load, index: usize, count: usize, phase: &Phase, phase_started: Duration) {
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

fn fallbacks_since(before: &policy::Snapshot, after: &policy::Snapshot) -> Vec<FallbackCount> {
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

fn background_since(before: &policy::Snapshot, after: &policy::Snapshot) -> BackgroundCount {
    let pick = |s: &policy::Snapshot| {
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

fn critical_shed(snapshot: &policy::Snapshot) -> u64 {
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

fn search_calls_from(providers: &Providers, caller: &str) -> u64 {
    providers
        .search
        .calls()
        .get(caller)
        .map_or(0, |c| c.received)
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
    let second = match (&options.redis_url, &options.instance_binary) {
        (Some(url), Some(binary)) => {
            Some(SecondInstance::start(binary, url, &redis_prefix, &providers.urls()).await?)
        }
        (Some(_), None) => {
            return Err(DemoError::Setup(
                "REDIS_URL is set but no binary was given to run the second instance".into(),
            ));
        }
        _ => None,
    };
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
    let count = plan.len();
    // Each phase's requests are counted apart (their ids start `a{phase}-`).
    for index in 0..count {
        instance
            .services
            .timeline
            .count_group(&format!("a{index}-"))
            .map_err(|e| DemoError::Setup(e.to_string()))?;
    }
    let load = Load::new(http);
    let t0 = load.t0;
    let mut reports = Vec::with_capacity(count);
    let mut shared = None;
    for (index, phase) in plan.iter().enumerate() {
        providers.search.set_mode(phase.search);
        providers.notifier.set_mode(phase.notifier);
        providers.sessions.set_mode(phase.sessions);
        log.set_phase(index);
        for p in providers.all() {
            p.take_max_in_flight();
        }
        let before = Registry::global().snapshot();
        let calls_before = calls_of(&providers);
        let started = t0.elapsed();
        if options.progress {
            println!(
                "\n  phase {}/{count}: {} ({})",
                index + 1,
                phase.name,
                phase.story
            );
        }
        let b_window = drive_phase(
            &load,
            &base,
            index,
            count,
            phase,
            options.progress,
            second.as_ref().map(|s| s.url.as_str()),
            &providers,
        )
        .await;
        let after = Registry::global().snapshot();
        let calls_after = calls_of(&providers);
        let counts = log.counts(index);
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
        if let (Some(window), Some(second)) = (b_window, &second) {
            shared = Some(shared_report(&load, &second.url, index, window).await);
        }
        reports.push(PhaseReport {
            phase: phase.clone(),
            started,
            ended: t0.elapsed(),
            save: RouteStats::default(),
            read: RouteStats::default(),
            save_on_b: None,
            refusals: pick(&[
                "breaker_open",
                "bulkhead_full",
                "insufficient_budget",
                "rate_limited",
            ]),
            shed: pick(&["shed"]),
            openings: log.openings(index),
            retries,
            retry_stops: pick(&["retry_stopped"]),
            fallbacks: fallbacks_since(&before, &after),
            critical_shed_for_load: critical_shed(&after) - critical_shed(&before),
            deferred: Tally::default(),
            tasks_failed: pick(&["task_failed", "task_panicked", "task_abandoned"]),
            background: background_since(&before, &after),
            provider_calls: calls_since(&calls_before, &calls_after),
            provider_max_in_flight: providers
                .all()
                .iter()
                .map(|p| (p.name(), p.take_max_in_flight()))
                .collect(),
        });
    }
    let elapsed = t0.elapsed();
    // Every response is in; then every piece of deferred work they scheduled has run.
    load.settle().await;
    wait_for_deferred_work(Duration::from_secs(10)).await;

    let samples = std::mem::take(&mut *lock(&load.samples));
    let timeline = &instance.services.timeline;
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
    if let Some(shared) = &mut shared {
        shared.saves = samples.iter().filter(|s| s.route == Route::SaveOnB).count() as u64;
        // The second instance took saves only in its window, and called nothing else that
        // reaches the search provider: every call it ever made to it is counted here.
        shared.calls_to_search = search_calls_from(&providers, "b");
    }

    if let Some(second) = second {
        second.stop().await;
    }
    instance.stop().await;
    providers.stop().await;
    Ok(RunReport {
        phases: reports,
        samples,
        elapsed,
        shared,
        skipped: load.skipped.load(Ordering::Relaxed),
    })
}

/// A few requests before the first phase, not measured: connections opened, every annotated
/// function's mechanisms built.
async fn warm_up(load: &Arc<Load>, base: &str, second: Option<&str>) {
    for _ in 0..10 {
        load.save(base, "w", 0, Route::Save);
        load.read(base, 0);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if let Some(second) = second {
        // The second instance takes no saves until its phase: it never calls the search
        // provider before then. One read opens its connection.
        let _ = client::get(&load.client, &format!("{second}/documents/1")).await;
    }
    load.settle().await;
    lock(&load.samples).clear();
    wait_for_deferred_work(Duration::from_secs(5)).await;
}

/// Waits until no deferred or background work is queued or running (at most `limit`).
async fn wait_for_deferred_work(limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let snapshot = Registry::global().snapshot();
        let background_busy = snapshot
            .background
            .iter()
            .any(|b| b.running > 0 || b.queued > 0);
        if snapshot.deferred.queued == 0 && snapshot.deferred.running == 0 && !background_busy {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The second instance's turn in a phase: how long it took saves, and how many calls the first
/// instance made to the search provider meanwhile.
#[derive(Debug, Clone, Copy)]
struct Window {
    length: Duration,
    calls_from_a: u64,
}

/// Drives one phase's load; returns the second instance's window, if it had one.
#[expect(
    clippy::too_many_arguments,
    reason = "one call site; the arguments are the phase's whole context"
)]
async fn drive_phase(
    load: &Arc<Load>,
    base: &str,
    index: usize,
    count: usize,
    phase: &Phase,
    progress: bool,
    second: Option<&str>,
    providers: &Providers,
) -> Option<Window> {
    let started = load.t0.elapsed();
    let end = tokio::time::Instant::now() + phase.duration;
    let mut saves = tokio::time::interval(Duration::from_secs_f64(1.0 / SAVE_RATE));
    let mut reads = tokio::time::interval(Duration::from_secs_f64(1.0 / READ_RATE));
    let mut bursts = tokio::time::interval(BURST_EVERY);
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    let mut b_saves = tokio::time::interval(Duration::from_secs_f64(1.0 / SAVE_RATE));
    for interval in [
        &mut saves,
        &mut reads,
        &mut bursts,
        &mut ticks,
        &mut b_saves,
    ] {
        interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
    }
    ticks.tick().await;
    let b = second.filter(|_| phase.second_instance);
    // (from, until, search calls from `a` at `from`), then the closed window.
    let mut open: Option<(tokio::time::Instant, tokio::time::Instant, u64)> = None;
    let mut closed: Option<Window> = None;
    loop {
        tokio::select! {
            // The end first: nothing is sent at the boundary into the next phase's fault.
            biased;
            _ = tokio::time::sleep_until(end) => break,
            _ = saves.tick() => load.save(base, "a", index, Route::Save),
            _ = reads.tick() => load.read(base, index),
            _ = bursts.tick(), if phase.burst => {
                for _ in 0..BURST_WAVE {
                    load.save(base, "a", index, Route::Save);
                }
            }
            _ = b_saves.tick(), if b.is_some() && closed.is_none() => {
                let now = tokio::time::Instant::now();
                match open {
                    None => {
                        // The second instance takes saves only once the first has opened the
                        // shared breaker, and only while that opening holds.
                        if let Some(until) = Registry::global()
                            .find_breaker("search")
                            .and_then(|breaker| breaker.open_until())
                        {
                            let until = until.min(end);
                            if until > now + Duration::from_millis(400) {
                                let from_a = search_calls_from(providers, "a");
                                open = Some((now, until - Duration::from_millis(200), from_a));
                            }
                        }
                    }
                    Some((_, until, _)) if now < until => {
                        if let Some(b) = b {
                            load.save(b, "b", index, Route::SaveOnB);
                        }
                    }
                    Some((from, until, from_a)) => {
                        closed = Some(Window {
                            length: until.saturating_duration_since(from),
                            calls_from_a: search_calls_from(providers, "a") - from_a,
                        });
                    }
                }
            }
            _ = ticks.tick(), if progress => progress_line(load, index, count, phase, started),
        }
    }
    closed.or_else(|| {
        open.map(|(from, until, from_a)| Window {
            length: until.saturating_duration_since(from),
            calls_from_a: search_calls_from(providers, "a") - from_a,
        })
    })
}

/// What the second instance's `/policy` says about its `search` breaker.
async fn shared_report(load: &Load, b: &str, phase: usize, window: Window) -> SharedReport {
    let mut report = SharedReport {
        phase,
        window: window.length,
        saves: 0,
        calls_to_search: 0,
        calls_to_search_from_a: window.calls_from_a,
        refusals: 0,
        cause: String::new(),
    };
    let snapshot = match client::get(&load.client, &format!("{b}/policy")).await {
        Ok(reply) => serde_json::from_slice::<serde_json::Value>(&reply.body).ok(),
        Err(_) => None,
    };
    if let Some(search) = snapshot.as_ref().and_then(|s| {
        s["breakers"]
            .as_array()
            .and_then(|all| all.iter().find(|b| b["name"] == "search"))
    }) {
        report.refusals = search["refusals"].as_u64().unwrap_or(0);
        report.cause = match &search["last_cause"] {
            serde_json::Value::Null => String::new(),
            cause => cause["detail"]
                .as_str()
                .map_or_else(|| cause.to_string(), |d| format!("another instance: {d}")),
        };
    }
    report
}
