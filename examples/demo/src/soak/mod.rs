//! The soak: minutes of load on every route while the providers' faults cycle, the service's
//! process measured every few seconds, and a verdict computed from the run.
//!
//! `cargo run --release -p policy-demo -- soak --minutes N` starts the service (the same one
//! `serve` runs: its fake providers, the store, one instance) in a process of its own
//! ([`child`]), so that what is measured is the service and nothing else, and drives it from
//! this one ([`load`]): closed-loop workers saving documents (16), reading them (16), and
//! browsing the pages, the dashboard's JSON and requests that must be rejected (2). Every
//! `--fault-every` seconds (12 by default) the providers move to the next fault of [`faults`]:
//! healthy; the search provider and the notifier slow, then failing, then answering 429; the
//! session store down; and round again.
//!
//! Every `--sample-every` seconds (2 by default) the driver reads the service's resident memory,
//! threads and open file descriptors from `/proc` (Linux), and asks its probe for the tokio
//! runtime's alive tasks (`RuntimeMetrics::num_alive_tasks`, stable since tokio 1.39) and the
//! accounting of its deferred and background work. At the end it stops the load, lets the
//! service drain, and judges the run ([`verdict`]):
//!
//! - **memory**: after the warm-up (the first minute, or the first half of a shorter run), the
//!   resident memory never exceeds its level at the end of the warm-up by more than 10%;
//! - **accounting**: for deferred and for background work, succeeded + failed + refused + shed +
//!   panicked + abandoned = scheduled, once drained, and never more than scheduled on the way;
//!   scheduled is counted by the service's own middleware (four tasks per saved document, one
//!   embedding per indexing start), and must equal the runtime's own count of it
//!   (`velocity_policy::defer::totals`), whose outcomes it checks;
//! - **deferred after the response**: no deferred task started before its response finished;
//! - **panics**: none, anywhere in the service's process, and it exited cleanly;
//! - **file descriptors**: the most the service held after the warm-up is no more than the most
//!   it held during it (the count moves with connections, so its high-water mark is compared).
//!
//! It prints a table per fault (throughput, p50 and p99 per route) and the verdict, writes an
//! HTML report with memory, descriptors and tasks over time ([`crate::report::soak_html`]), and
//! exits non-zero when a check fails.

pub mod child;
pub mod load;
pub mod process;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http::Method;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::DemoError;
use crate::client;
use crate::providers::Mode;
use child::{Farewell, Hello, ServiceStats};
use load::{Load, Route, RouteTally};
use process::ProcessSample;

/// How a soak runs.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// How long the load runs.
    pub duration: Duration,
    /// How long each fault lasts before the next.
    pub fault_every: Duration,
    /// How often the service is measured.
    pub sample_every: Duration,
    /// The binary that runs the service (this one, with the hidden `soak-service` subcommand).
    pub binary: PathBuf,
    /// Print a progress line every ten seconds.
    pub progress: bool,
    /// Saving workers.
    pub savers: usize,
    /// Reading workers.
    pub readers: usize,
    /// Workers on the other routes.
    pub browsers: usize,
}

impl SoakOptions {
    /// `minutes` of load from `binary`, with the defaults above.
    pub fn new(minutes: f64, binary: PathBuf) -> Result<Self, DemoError> {
        if !minutes.is_finite() || !(0.1..=10_080.0).contains(&minutes) {
            return Err(DemoError::Setup(format!(
                "--minutes {minutes}: give a length between 0.1 (six seconds) and 10080 (a week)"
            )));
        }
        let duration = Duration::from_secs_f64(minutes * 60.0);
        Ok(Self {
            duration,
            fault_every: Duration::from_secs(12),
            // A few seconds, and at most about two thousand samples however long the run.
            sample_every: Duration::from_secs(2).max(duration / 2000),
            binary,
            progress: true,
            savers: 16,
            readers: 16,
            browsers: 2,
        })
    }

    /// The warm-up: the first minute, or the first half of a run shorter than two minutes.
    pub fn warm_up(&self) -> Duration {
        Duration::from_secs(60).min(self.duration / 2)
    }
}

/// One fault of the cycle: how each provider behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fault {
    /// A short name.
    pub name: &'static str,
    /// The search provider.
    pub search: Mode,
    /// The notifier.
    pub notifier: Mode,
    /// The session store.
    pub sessions: Mode,
}

/// The faults, in the order they cycle.
pub fn faults() -> Vec<Fault> {
    let both = |name, mode| Fault {
        name,
        search: mode,
        notifier: mode,
        sessions: Mode::Healthy,
    };
    vec![
        both("healthy", Mode::Healthy),
        both("slow", Mode::slow(Duration::from_millis(600))),
        both("failing", Mode::Failing),
        both("429", Mode::rate_limited(Duration::from_secs(2))),
        Fault {
            sessions: Mode::Failing,
            ..both("sessions down", Mode::Healthy)
        },
    ]
}

/// The text `POST /_mode` takes for `mode` (see [`Mode::parse`]).
pub fn mode_text(mode: Mode) -> String {
    match mode {
        Mode::Healthy => "healthy".to_owned(),
        Mode::Slow { delay } => format!("slow {}ms", delay.as_millis()),
        Mode::Failing => "failing".to_owned(),
        Mode::RateLimited { retry_after } => format!("429 {}s", retry_after.as_secs()),
    }
}

/// One measurement of the service.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoakSample {
    /// When, from the start of the load.
    pub at: Duration,
    /// The fault then.
    pub fault: usize,
    /// Requests answered so far.
    pub requests: u64,
    /// What `/proc` says.
    pub process: ProcessSample,
    /// What the service says.
    pub stats: ServiceStats,
}

/// A stretch of the run spent in one fault.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    /// The fault.
    pub fault: usize,
    /// From, since the start of the load.
    pub from: Duration,
    /// Until.
    pub until: Duration,
}

/// One route during one fault.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteRow {
    /// The route.
    pub route: Route,
    /// Requests.
    pub count: u64,
    /// Requests per second of the time spent in the fault.
    pub per_second: f64,
    /// Answered as the route should be.
    pub ok: u64,
    /// Median latency.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// The slowest.
    pub max: Duration,
    /// Every other outcome, by label.
    pub others: Vec<(String, u64)>,
}

/// One fault over the whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRow {
    /// The fault.
    pub fault: Fault,
    /// Time spent in it, in all.
    pub time: Duration,
    /// Its routes.
    pub routes: Vec<RouteRow>,
}

/// One check of the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What is checked.
    pub name: &'static str,
    /// Whether the run passed it.
    pub passed: bool,
    /// The numbers that decided it.
    pub detail: String,
}

/// The whole soak.
#[derive(Debug, Clone, PartialEq)]
pub struct SoakReport {
    /// How long the load ran.
    pub duration: Duration,
    /// The warm-up the memory and descriptor checks start after.
    pub warm_up: Duration,
    /// The faults, with what each route did during them.
    pub faults: Vec<FaultRow>,
    /// When each fault was on.
    pub bands: Vec<Band>,
    /// The measurements, in order.
    pub samples: Vec<SoakSample>,
    /// What the service said after its deferred work drained.
    pub farewell: Option<Farewell>,
    /// Whether the service's process exited with success.
    pub exited_cleanly: bool,
    /// The checks.
    pub verdict: Vec<Check>,
    /// The machine: its cores, and its one-minute load average when the load started and when
    /// it stopped (other work on the machine moves throughput and latency, not the verdict).
    pub machine: Machine,
}

/// What else the machine was doing.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Machine {
    /// Cores available to this process.
    pub cores: usize,
    /// The one-minute load average at the start (`None` without `/proc/loadavg`).
    pub load_at_start: Option<f64>,
    /// ...and at the end.
    pub load_at_end: Option<f64>,
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl SoakReport {
    /// Every check passed.
    pub fn passed(&self) -> bool {
        !self.verdict.is_empty() && self.verdict.iter().all(|c| c.passed)
    }

    /// Requests in all.
    pub fn requests(&self) -> u64 {
        self.faults
            .iter()
            .flat_map(|f| &f.routes)
            .map(|r| r.count)
            .sum()
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn work_detail(what: &str, end: &child::WorkCounts) -> String {
    format!(
        "{what}: scheduled {} (the runtime counted {}) = {} succeeded + {} failed + {} refused + {} shed + {} panicked + {} abandoned{}",
        end.scheduled,
        end.runtime_scheduled,
        end.succeeded,
        end.failed,
        end.refused,
        end.shed,
        end.panicked,
        end.abandoned,
        match end.in_flight() {
            0 => String::new(),
            n => format!(" (off by {n})"),
        }
    )
}

/// The verdict, computed from the samples and the service's last words.
pub fn verdict(
    samples: &[SoakSample],
    warm_up: Duration,
    farewell: Option<&Farewell>,
    exited_cleanly: bool,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let (during, after): (Vec<&SoakSample>, Vec<&SoakSample>) =
        samples.iter().partition(|s| s.at <= warm_up);

    // Memory: the level at the end of the warm-up, and the most after it.
    checks.push(match (during.last(), after.iter().max_by_key(|s| s.process.rss_bytes)) {
        (Some(reference), Some(peak)) => {
            let limit = reference.process.rss_bytes as f64 * 1.10;
            let last = after.last().unwrap_or(peak);
            Check {
                name: "memory flat after warm-up",
                passed: (peak.process.rss_bytes as f64) <= limit,
                detail: format!(
                    "{:.1} MB at {:.0} s (end of warm-up); at most {:.1} MB after it ({:.1} MB at {:.0} s, {:+.1}%), {:.1} MB at the end; limit {:.1} MB (+10%)",
                    mb(reference.process.rss_bytes),
                    reference.at.as_secs_f64(),
                    mb(peak.process.rss_bytes),
                    mb(peak.process.rss_bytes),
                    peak.at.as_secs_f64(),
                    (peak.process.rss_bytes as f64 / reference.process.rss_bytes.max(1) as f64 - 1.0)
                        * 100.0,
                    mb(last.process.rss_bytes),
                    limit / (1024.0 * 1024.0),
                ),
            }
        }
        _ => Check {
            name: "memory flat after warm-up",
            passed: false,
            detail: format!(
                "not enough samples: {} during the warm-up, {} after it",
                during.len(),
                after.len()
            ),
        },
    });

    // Accounting: exact once drained, never more ended than scheduled on the way.
    let negative = samples
        .iter()
        .filter(|s| s.stats.deferred.in_flight() < 0 || s.stats.background.in_flight() < 0)
        .count();
    checks.push(match farewell {
        Some(end) => {
            let (d, b) = (&end.stats.deferred, &end.stats.background);
            let exact = d.in_flight() == 0
                && b.in_flight() == 0
                && d.scheduled > 0
                && d.scheduled == d.runtime_scheduled
                && b.scheduled == b.runtime_scheduled;
            Check {
                name: "every deferred and background task accounted for",
                passed: exact && negative == 0,
                detail: format!(
                    "{}; {}{}",
                    work_detail("deferred", d),
                    work_detail("background", b),
                    if negative > 0 {
                        format!("; {negative} samples counted more ended than scheduled")
                    } else {
                        String::new()
                    }
                ),
            }
        }
        None => Check {
            name: "every deferred and background task accounted for",
            passed: false,
            detail: "the service did not report its counts after the drain".to_owned(),
        },
    });

    let last_stats = farewell
        .map(|f| f.stats)
        .or_else(|| samples.last().map(|s| s.stats));
    checks.push(match last_stats {
        Some(stats) => Check {
            name: "deferred work started after its response",
            passed: stats.started_before == 0 && stats.started_after > 0,
            detail: format!(
                "{} after, {} before, {} unmatched (of {} responses)",
                stats.started_after, stats.started_before, stats.started_unmatched, stats.responses
            ),
        },
        None => Check {
            name: "deferred work started after its response",
            passed: false,
            detail: "no counts from the service".to_owned(),
        },
    });

    let panics = last_stats.map_or(0, |s| s.panics);
    checks.push(Check {
        name: "no panics",
        passed: last_stats.is_some() && panics == 0 && exited_cleanly,
        detail: format!(
            "{panics} panics in the service's process; it {}",
            if exited_cleanly {
                "exited cleanly"
            } else {
                "did not exit cleanly"
            }
        ),
    });

    let most = |set: &[&SoakSample]| set.iter().map(|s| s.process.fds).max();
    let sockets = |set: &[&SoakSample]| set.iter().map(|s| s.process.sockets).max().unwrap_or(0);
    checks.push(match (most(&during), most(&after)) {
        (Some(before), Some(later)) => Check {
            name: "no file-descriptor growth",
            passed: later <= before,
            detail: format!(
                "at most {before} open during the warm-up ({} sockets), at most {later} after it ({} sockets; {:+}); {} at the end",
                sockets(&during),
                sockets(&after),
                later as i64 - before as i64,
                after.last().map_or(0, |s| s.process.fds)
            ),
        },
        _ => Check {
            name: "no file-descriptor growth",
            passed: false,
            detail: "not enough samples".to_owned(),
        },
    });
    checks
}

fn rows(recorded: &[Vec<RouteTally>], faults: &[Fault], bands: &[Band]) -> Vec<FaultRow> {
    faults
        .iter()
        .enumerate()
        .map(|(index, fault)| {
            let time: Duration = bands
                .iter()
                .filter(|b| b.fault == index)
                .map(|b| b.until.saturating_sub(b.from))
                .sum();
            let routes = Route::ALL
                .iter()
                .zip(recorded.get(index).into_iter().flatten())
                .map(|(route, tally)| RouteRow {
                    route: *route,
                    count: tally.count(),
                    per_second: tally.count() as f64 / time.as_secs_f64().max(1e-9),
                    ok: tally.ok,
                    p50: tally.quantile(0.50),
                    p99: tally.quantile(0.99),
                    max: tally.max(),
                    others: tally.others.iter().map(|(k, v)| (k.clone(), *v)).collect(),
                })
                .collect();
            FaultRow {
                fault: *fault,
                time,
                routes,
            }
        })
        .collect()
}

/// The service's process, started and announced.
struct Service {
    child: tokio::process::Child,
    pid: u32,
    hello: Hello,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Service {
    async fn start(binary: &PathBuf) -> Result<Self, DemoError> {
        let mut child = Command::new(binary)
            .arg("soak-service")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                DemoError::Setup(format!(
                    "cannot start the service for the soak ({}): {e}",
                    binary.display()
                ))
            })?;
        let pid = child
            .id()
            .ok_or_else(|| DemoError::Setup("the soak's service exited at once".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| DemoError::Setup("the soak's service has no stdout".into()))?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .map_err(|_| DemoError::Setup("the soak's service did not start in 60 s".into()))??
            .unwrap_or_default();
        let hello: Hello = serde_json::from_str(&first).map_err(|e| {
            DemoError::Setup(format!(
                "the soak's service said {first:?} instead of its addresses ({e})"
            ))
        })?;
        Ok(Self {
            child,
            pid,
            hello,
            lines,
        })
    }

    /// Closes its stdin (it stops serving and drains), reads its last line, waits for it.
    async fn finish(mut self) -> (Option<Farewell>, bool) {
        drop(self.child.stdin.take());
        let farewell = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(line)) = self.lines.next_line().await {
                if let Ok(farewell) = serde_json::from_str::<Farewell>(&line) {
                    return Some(farewell);
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        let exited = match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(Ok(status)) => status.success(),
            _ => {
                let _ = self.child.kill().await;
                false
            }
        };
        (farewell, exited)
    }
}

async fn set_fault(http: &client::HttpClient, hello: &Hello, fault: &Fault) {
    for (base, mode) in [
        (&hello.search, fault.search),
        (&hello.notifier, fault.notifier),
        (&hello.sessions, fault.sessions),
    ] {
        let url = format!("{base}/_mode");
        let body = Bytes::from(mode_text(mode));
        if let Err(error) = client::send(http, Method::POST, &url, &[], body).await {
            eprintln!("soak: cannot switch {url}: {error}");
        }
    }
}

async fn measure(
    http: &client::HttpClient,
    service: &Service,
    at: Duration,
    fault: usize,
    load: &Load,
) -> Result<SoakSample, DemoError> {
    // The service's counts first, then its process: neither moves much in between.
    let reply = client::get(http, &format!("{}/stats", service.hello.probe))
        .await
        .map_err(|e| DemoError::Setup(format!("the soak's probe did not answer: {e}")))?;
    let stats: ServiceStats = serde_json::from_slice(&reply.body)
        .map_err(|e| DemoError::Setup(format!("the soak's probe said nonsense: {e}")))?;
    let process = process::sample(Some(service.pid))?;
    Ok(SoakSample {
        at,
        fault,
        requests: load.requests(),
        process,
        stats,
    })
}

fn progress_line(sample: &SoakSample, faults: &[Fault], previous: Option<&SoakSample>) {
    let rate = previous.map_or(0.0, |p| {
        (sample.requests - p.requests) as f64
            / (sample.at.saturating_sub(p.at)).as_secs_f64().max(1e-9)
    });
    println!(
        "  {:>6.0} s  {:<13}  {:>6.0} req/s  rss {:>6.1} MB  fds {:>4} ({:>3} sockets)  tasks {:>5}  deferred in flight {:>4}  background in flight {:>3}",
        sample.at.as_secs_f64(),
        faults.get(sample.fault).map_or("?", |f| f.name),
        rate,
        mb(sample.process.rss_bytes),
        sample.process.fds,
        sample.process.sockets,
        sample.stats.alive_tasks,
        sample.stats.deferred.in_flight(),
        sample.stats.background.in_flight(),
    );
}

/// Runs the soak and judges it.
pub async fn run(options: &SoakOptions) -> Result<SoakReport, DemoError> {
    let faults = faults();
    let service = Service::start(&options.binary).await?;
    let http = client::http_client();
    if options.progress {
        println!(
            "  the service (pid {}) listens at {} (dashboard: {}/dashboard)",
            service.pid, service.hello.service, service.hello.service
        );
    }
    let load = Load::new(service.hello.service.clone(), faults.len())?;
    let mut workers = Vec::new();
    for worker in 0..options.savers {
        workers.push(tokio::spawn(load.clone().saver(worker)));
    }
    for worker in 0..options.readers {
        workers.push(tokio::spawn(load.clone().reader(worker)));
    }
    for worker in 0..options.browsers {
        workers.push(tokio::spawn(load.clone().browser(worker)));
    }

    let load_at_start = load_average();
    let t0 = Instant::now();
    let mut samples: Vec<SoakSample> = Vec::new();
    let mut bands = vec![Band {
        fault: 0,
        from: Duration::ZERO,
        until: Duration::ZERO,
    }];
    set_fault(&http, &service.hello, &faults[0]).await;
    let mut next_fault = options.fault_every;
    let mut next_sample = Duration::ZERO;
    let mut next_progress = Duration::ZERO;
    let mut failure = None;
    loop {
        let now = t0.elapsed();
        if now >= options.duration {
            break;
        }
        if now >= next_fault {
            let index = (bands.len()) % faults.len();
            if let Some(band) = bands.last_mut() {
                band.until = now;
            }
            set_fault(&http, &service.hello, &faults[index]).await;
            load.set_fault(index);
            bands.push(Band {
                fault: index,
                from: now,
                until: now,
            });
            next_fault += options.fault_every;
        }
        if now >= next_sample {
            let fault = bands.last().map_or(0, |b| b.fault);
            match measure(&http, &service, now, fault, &load).await {
                Ok(sample) => {
                    if options.progress && now >= next_progress {
                        progress_line(&sample, &faults, samples.last());
                        next_progress += Duration::from_secs(10);
                    }
                    samples.push(sample);
                }
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
            next_sample += options.sample_every;
        }
        let wake = next_fault.min(next_sample).min(options.duration);
        tokio::time::sleep(wake.saturating_sub(t0.elapsed())).await;
    }
    let ended = t0.elapsed();
    let load_at_end = load_average();
    if let Some(band) = bands.last_mut() {
        band.until = ended;
    }
    load.stop();
    for worker in workers {
        let _ = worker.await;
    }
    // The last measurement under load's end, before the service stops.
    if failure.is_none() {
        let fault = bands.last().map_or(0, |b| b.fault);
        match measure(&http, &service, t0.elapsed(), fault, &load).await {
            Ok(sample) => samples.push(sample),
            Err(error) => failure = Some(error),
        }
    }
    drop(http);
    let (farewell, exited_cleanly) = service.finish().await;
    if let Some(error) = failure {
        return Err(error);
    }
    let recorded = load.take();
    let warm_up = options.warm_up();
    let verdict = verdict(&samples, warm_up, farewell.as_ref(), exited_cleanly);
    Ok(SoakReport {
        duration: ended,
        warm_up,
        faults: rows(&recorded.tallies, &faults, &bands),
        bands,
        samples,
        farewell,
        exited_cleanly,
        verdict,
        machine: Machine {
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            load_at_start,
            load_at_end,
        },
    })
}

/// The child side, for the hidden `soak-service` subcommand.
pub async fn serve_child() -> Result<(), DemoError> {
    child::run().await
}

/// A convenience for tests and the CLI: the report's path when none is given.
pub fn default_report_path() -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    std::env::temp_dir().join(format!("policy-demo-soak-{stamp}.html"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use child::WorkCounts;

    fn sample(at: u64, rss_mb: u64, fds: u64) -> SoakSample {
        let work = WorkCounts {
            scheduled: 10,
            runtime_scheduled: 10,
            succeeded: 8,
            ..WorkCounts::default()
        };
        SoakSample {
            at: Duration::from_secs(at),
            fault: 0,
            requests: at * 100,
            process: ProcessSample {
                rss_bytes: rss_mb << 20,
                threads: 8,
                fds,
                sockets: fds - 10,
            },
            stats: ServiceStats {
                started_after: 40,
                responses: 10,
                created: 10,
                deferred: work,
                background: work,
                ..ServiceStats::default()
            },
        }
    }

    fn drained() -> Farewell {
        let work = WorkCounts {
            scheduled: 12,
            runtime_scheduled: 12,
            succeeded: 5,
            failed: 2,
            refused: 1,
            shed: 2,
            panicked: 0,
            abandoned: 2,
        };
        Farewell {
            stats: ServiceStats {
                started_after: 48,
                responses: 12,
                created: 3,
                deferred: work,
                background: work,
                ..ServiceStats::default()
            },
            drained_finished: 10,
            drained_abandoned: 2,
        }
    }

    fn check<'a>(checks: &'a [Check], name: &str) -> &'a Check {
        checks
            .iter()
            .find(|c| c.name.starts_with(name))
            .unwrap_or_else(|| panic!("no check {name}: {checks:?}"))
    }

    fn steady() -> Vec<SoakSample> {
        (0..=60).step_by(2).map(|t| sample(t, 40, 60)).collect()
    }

    #[test]
    fn a_steady_run_passes_every_check() {
        let checks = verdict(&steady(), Duration::from_secs(30), Some(&drained()), true);
        assert_eq!(checks.len(), 5);
        assert!(checks.iter().all(|c| c.passed), "{checks:#?}");
    }

    #[test]
    fn memory_growing_past_ten_percent_after_the_warm_up_fails() {
        let mut samples = steady();
        // 40 MB at the end of the warm-up; 44 MB is within 10%, 45 MB is not.
        samples[20].process.rss_bytes = 44 << 20;
        let checks = verdict(&samples, Duration::from_secs(30), Some(&drained()), true);
        assert!(check(&checks, "memory").passed, "{checks:#?}");
        samples[25].process.rss_bytes = 45 << 20;
        let checks = verdict(&samples, Duration::from_secs(30), Some(&drained()), true);
        let memory = check(&checks, "memory");
        assert!(!memory.passed);
        assert!(memory.detail.contains("45.0 MB"), "{}", memory.detail);
        // Growth during the warm-up is the warm-up's.
        let mut early = steady();
        early[3].process.rss_bytes = 80 << 20;
        let checks = verdict(&early, Duration::from_secs(30), Some(&drained()), true);
        assert!(check(&checks, "memory").passed);
    }

    #[test]
    fn a_task_missing_from_the_accounting_fails() {
        let mut end = drained();
        end.stats.background.succeeded -= 1;
        let checks = verdict(&steady(), Duration::from_secs(30), Some(&end), true);
        let accounting = check(&checks, "every deferred");
        assert!(!accounting.passed);
        assert!(
            accounting.detail.contains("off by 1"),
            "{}",
            accounting.detail
        );
        let checks = verdict(&steady(), Duration::from_secs(30), None, true);
        assert!(!check(&checks, "every deferred").passed);
        // The demo's count of what was scheduled and the runtime's must agree.
        let mut end = drained();
        end.stats.deferred.runtime_scheduled += 1;
        let checks = verdict(&steady(), Duration::from_secs(30), Some(&end), true);
        let accounting = check(&checks, "every deferred");
        assert!(!accounting.passed);
        assert!(
            accounting.detail.contains("the runtime counted 13"),
            "{}",
            accounting.detail
        );
    }

    #[test]
    fn more_ended_than_scheduled_on_the_way_fails() {
        let mut samples = steady();
        samples[5].stats.deferred.succeeded = 11;
        let checks = verdict(&samples, Duration::from_secs(30), Some(&drained()), true);
        assert!(!check(&checks, "every deferred").passed);
    }

    #[test]
    fn a_panic_or_an_unclean_exit_fails() {
        let mut end = drained();
        end.stats.panics = 1;
        let checks = verdict(&steady(), Duration::from_secs(30), Some(&end), true);
        assert!(!check(&checks, "no panics").passed);
        let checks = verdict(&steady(), Duration::from_secs(30), Some(&drained()), false);
        assert!(!check(&checks, "no panics").passed);
    }

    #[test]
    fn a_start_before_its_response_fails() {
        let mut end = drained();
        end.stats.started_before = 1;
        let checks = verdict(&steady(), Duration::from_secs(30), Some(&end), true);
        assert!(!check(&checks, "deferred work started").passed);
    }

    #[test]
    fn more_descriptors_after_the_warm_up_than_during_it_fails() {
        let mut samples = steady();
        samples[4].process.fds = 70;
        samples[28].process.fds = 70;
        let checks = verdict(&samples, Duration::from_secs(30), Some(&drained()), true);
        assert!(check(&checks, "no file-descriptor").passed, "{checks:#?}");
        samples[29].process.fds = 71;
        let checks = verdict(&samples, Duration::from_secs(30), Some(&drained()), true);
        let fds = check(&checks, "no file-descriptor");
        assert!(!fds.passed);
        assert!(fds.detail.contains("; +1)"), "{}", fds.detail);
    }

    #[test]
    fn every_fault_can_be_set_through_the_providers_mode_route() {
        for fault in faults() {
            for mode in [fault.search, fault.notifier, fault.sessions] {
                assert_eq!(Mode::parse(&mode_text(mode)), Ok(mode));
            }
        }
    }

    #[test]
    fn the_length_is_checked() {
        assert!(SoakOptions::new(0.0, PathBuf::new()).is_err());
        assert!(SoakOptions::new(f64::NAN, PathBuf::new()).is_err());
        let ten = SoakOptions::new(10.0, PathBuf::new()).unwrap();
        assert_eq!(ten.warm_up(), Duration::from_secs(60));
        assert_eq!(ten.sample_every, Duration::from_secs(2));
        let one = SoakOptions::new(1.0, PathBuf::new()).unwrap();
        assert_eq!(one.warm_up(), Duration::from_secs(30));
    }
}
