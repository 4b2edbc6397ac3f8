//! The orchestrator: for each scenario and each contender, a fresh dependency process, the
//! contender's service process and a load generator process, on loopback, one run after
//! another so they never share the machine's two cores; the fault switched through the
//! dependency's control endpoint at its times; the records read back and measured.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use crate::client::{Hyper, hyper_client};
use crate::dependency::Stats;
use crate::load::{LoadReport, Plan, Segment};
use crate::metrics::{DepBucket, Measurement, measure};
use crate::model::{
    Class, Contender, Control, DEFAULT_SERVICE_TIME, DEFAULT_SLOTS, Mode, Phases, Scenario,
    scenarios,
};

/// Why a run could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A child process could not be started or said nothing usable.
    #[error("the `{role}` process failed: {reason}")]
    Child {
        /// `dependency`, `service` or `load`.
        role: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// Reading or writing a file under the output directory failed.
    #[error("cannot write or read `{path}`: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The dependency's control or stats endpoint failed.
    #[error("the dependency's `{endpoint}` failed: {reason}")]
    Control {
        /// `/_control` or `/_stats`.
        endpoint: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// `--scenario` named no scenario.
    #[error("no scenario is called `{0}`")]
    #[non_exhaustive]
    UnknownScenario(String),
}

fn child_error(role: &'static str, reason: impl std::fmt::Display) -> RunError {
    RunError::Child {
        role,
        reason: reason.to_string(),
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Short phases: a smoke run.
    pub quick: bool,
    /// Where the JSON and the HTML page go (and the generator's records, kept until measured).
    pub out: PathBuf,
    /// Only these scenarios (all when empty).
    pub scenarios: Vec<String>,
    /// Only these contenders (all when empty).
    pub contenders: Vec<Contender>,
    /// Phases other than `--quick`'s or the full run's (the tests' tiny runs).
    pub phases: Option<Phases>,
    /// The binary to re-execute for the child processes.
    pub program: PathBuf,
}

/// One contender's run of a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct ContenderRun {
    /// The contender.
    pub contender: Contender,
    /// Its name.
    pub name: &'static str,
    /// Where its configuration comes from.
    pub source: &'static str,
    /// Its measurements.
    pub measurement: Measurement,
    /// Requests the generator planned.
    pub planned: usize,
    /// How late the generator was behind its schedule, mean and worst, ms.
    pub mean_lag_ms: f64,
    /// See `mean_lag_ms`.
    pub max_lag_ms: f64,
    /// The machine's 1-minute load average before and after the run (`/proc/loadavg`).
    pub load_average: (Option<f64>, Option<f64>),
    /// Dependency totals over the whole run, warm-up included.
    pub dependency_totals: DepBucket,
}

/// One scenario, every contender.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioRun {
    /// The scenario.
    pub scenario: Scenario,
    /// What the dependency can serve during the fault, requests per second (the physical
    /// limit), if it serves at all.
    pub fault_capacity_rps: Option<f64>,
    /// Each contender, in order.
    pub runs: Vec<ContenderRun>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// `--quick` or full.
    pub quick: bool,
    /// The phases.
    pub phases: Phases,
    /// The dependency's healthy capacity, requests per second.
    pub capacity_rps: f64,
    /// The dependency's slots.
    pub slots: u32,
    /// Its service time, ms.
    pub service_time_ms: f64,
    /// Logical CPUs.
    pub cpus: usize,
    /// When the run started, Unix seconds.
    pub started_unix_s: u64,
    /// How long it took, seconds.
    pub took_s: f64,
    /// Every scenario.
    pub scenarios: Vec<ScenarioRun>,
}

/// What the dependency serves under a fault, requests per second.
pub fn fault_capacity(scenario: &Scenario, slots: u32, service: Duration) -> Option<f64> {
    let slots = f64::from(scenario.fault.control.slots.unwrap_or(slots));
    let per_call = service.as_secs_f64();
    match scenario.fault.control.mode {
        Mode::Healthy => Some(slots / per_call),
        Mode::Slow { factor } => Some(slots / (per_call * f64::from(factor))),
        Mode::Down | Mode::TooManyRequests { .. } | Mode::Blackhole => None,
    }
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Starts `program args`, and reads its first stdout line (`listening ADDR`).
async fn spawn_listening(
    program: &Path,
    role: &'static str,
    args: &[String],
) -> Result<(Child, String), RunError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| child_error(role, e))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| child_error(role, "no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .map_err(|_| child_error(role, "did not say where it listens within 10 s"))?
        .map_err(|e| child_error(role, e))?
        .ok_or_else(|| child_error(role, "exited before listening"))?;
    let address = line
        .strip_prefix("listening ")
        .ok_or_else(|| child_error(role, format!("said `{line}`, not `listening ADDR`")))?
        .to_owned();
    Ok((child, address))
}

async fn send(
    client: &Hyper,
    method: http::Method,
    uri: String,
    body: Vec<u8>,
    endpoint: &'static str,
) -> Result<Bytes, RunError> {
    let error = |reason: String| RunError::Control { endpoint, reason };
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| error(e.to_string()))?;
    let response = tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .map_err(|_| error("no answer within 10 s".into()))?
        .map_err(|e| error(e.to_string()))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| error(e.to_string()))?
        .to_bytes();
    if !status.is_success() {
        return Err(error(format!("answered {status}")));
    }
    Ok(body)
}

async fn set_mode(client: &Hyper, dependency: &str, control: Control) -> Result<(), RunError> {
    let body = serde_json::to_vec(&control).map_err(|e| RunError::Control {
        endpoint: "/_control",
        reason: e.to_string(),
    })?;
    send(
        client,
        http::Method::POST,
        format!("http://{dependency}/_control"),
        body,
        "/_control",
    )
    .await?;
    Ok(())
}

/// Runs one contender through one scenario.
async fn run_one(
    options: &Options,
    scenario: &Scenario,
    contender: Contender,
    phases: &Phases,
    seed: u64,
) -> Result<ContenderRun, RunError> {
    let program = &options.program;
    let load_before = load_average();
    let (mut dependency, dep_address) =
        spawn_listening(program, "dependency", &["dependency".into()]).await?;
    let (mut service, service_address) = spawn_listening(
        program,
        "service",
        &[
            "service".into(),
            "--contender".into(),
            contender.name().into(),
            "--dependency".into(),
            format!("http://{dep_address}"),
        ],
    )
    .await?;
    let warmup_ms = phases.warmup_s * 1000.0;
    let end_ms = phases.end() * 1000.0;
    // t = 0 leaves the generator time to start and to run its warm-up.
    let epoch_unix_ms = unix_ms() + 300 + warmup_ms as u64;
    let mut segments = vec![Segment {
        class: Class::Critical,
        start_ms: -warmup_ms,
        end_ms,
        rps: scenario.critical_rps,
    }];
    if scenario.fault.sheddable_rps > 0.0 {
        segments.push(Segment {
            class: Class::Sheddable,
            start_ms: phases.fault_start() * 1000.0,
            end_ms: phases.fault_end() * 1000.0,
            rps: scenario.fault.sheddable_rps,
        });
    }
    let plan = Plan {
        target: format!("http://{service_address}"),
        epoch_unix_ms,
        segments,
        seed,
    };
    let stem = format!("{}-{}", scenario.name, contender.name());
    let plan_path = options.out.join(format!("{stem}.plan.json"));
    let records_path = options.out.join(format!("{stem}.records.json"));
    let plan_json = serde_json::to_vec(&plan).map_err(|e| child_error("load", e))?;
    std::fs::write(&plan_path, plan_json).map_err(|source| RunError::File {
        path: plan_path.clone(),
        source,
    })?;
    let mut load = Command::new(program)
        .arg("load")
        .arg("--plan")
        .arg(&plan_path)
        .arg("--out")
        .arg(&records_path)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| child_error("load", e))?;

    let client = hyper_client();
    let at = |s: f64| {
        let target = epoch_unix_ms as f64 + s * 1000.0;
        Duration::from_secs_f64(((target - unix_ms() as f64) / 1000.0).max(0.0))
    };
    tokio::time::sleep(at(phases.fault_start())).await;
    set_mode(&client, &dep_address, scenario.fault.control).await?;
    tokio::time::sleep(at(phases.fault_end())).await;
    set_mode(
        &client,
        &dep_address,
        Control {
            mode: Mode::Healthy,
            slots: Some(DEFAULT_SLOTS),
        },
    )
    .await?;
    let status = load.wait().await.map_err(|e| child_error("load", e))?;
    if !status.success() {
        return Err(child_error("load", format!("exited with {status}")));
    }
    let stats = send(
        &client,
        http::Method::GET,
        format!("http://{dep_address}/_stats"),
        Vec::new(),
        "/_stats",
    )
    .await?;
    let stats: Stats = serde_json::from_slice(&stats).map_err(|e| RunError::Control {
        endpoint: "/_stats",
        reason: e.to_string(),
    })?;
    let _ = service.start_kill();
    let _ = dependency.start_kill();
    let _ = service.wait().await;
    let _ = dependency.wait().await;

    let text = std::fs::read(&records_path).map_err(|source| RunError::File {
        path: records_path.clone(),
        source,
    })?;
    let report: LoadReport = serde_json::from_slice(&text).map_err(|e| child_error("load", e))?;
    let _ = std::fs::remove_file(&records_path);
    let _ = std::fs::remove_file(&plan_path);
    let buckets: Vec<DepBucket> = stats
        .buckets
        .iter()
        .map(|b| DepBucket {
            start_ms: b.unix_ms as f64 - epoch_unix_ms as f64,
            received: b.received,
            propagated: b.propagated,
            completed: b.completed,
            wasted: b.wasted,
            dropped_expired: b.dropped_expired,
        })
        .collect();
    let mut totals = DepBucket::default();
    for b in &buckets {
        totals.received += b.received;
        totals.propagated += b.propagated;
        totals.completed += b.completed;
        totals.wasted += b.wasted;
        totals.dropped_expired += b.dropped_expired;
    }
    let measurement = measure(
        &report.records,
        &buckets,
        phases,
        scenario.critical_rps,
        scenario.fault.sheddable_rps,
    );
    Ok(ContenderRun {
        contender,
        name: contender.name(),
        source: contender.source(),
        measurement,
        planned: report.planned,
        mean_lag_ms: report.mean_lag_ms,
        max_lag_ms: report.max_lag_ms,
        load_average: (load_before, load_average()),
        dependency_totals: totals,
    })
}

/// Runs every selected scenario with every selected contender, printing each scenario's
/// table as it finishes.
pub async fn run(options: &Options) -> Result<RunReport, RunError> {
    let started = std::time::Instant::now();
    let phases = options.phases.unwrap_or(if options.quick {
        Phases::QUICK
    } else {
        Phases::FULL
    });
    let capacity = f64::from(DEFAULT_SLOTS) / DEFAULT_SERVICE_TIME.as_secs_f64();
    let all = scenarios(capacity);
    for name in &options.scenarios {
        if !all.iter().any(|s| s.name == name) {
            return Err(RunError::UnknownScenario(name.clone()));
        }
    }
    std::fs::create_dir_all(&options.out).map_err(|source| RunError::File {
        path: options.out.clone(),
        source,
    })?;
    let contenders: Vec<Contender> = if options.contenders.is_empty() {
        Contender::ALL.to_vec()
    } else {
        options.contenders.clone()
    };
    let mut report = RunReport {
        quick: options.quick,
        phases,
        capacity_rps: capacity,
        slots: DEFAULT_SLOTS,
        service_time_ms: DEFAULT_SERVICE_TIME.as_secs_f64() * 1000.0,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        started_unix_s: unix_ms() / 1000,
        took_s: 0.0,
        scenarios: Vec::new(),
    };
    for (index, scenario) in all.iter().enumerate() {
        if !options.scenarios.is_empty() && !options.scenarios.iter().any(|n| n == scenario.name) {
            continue;
        }
        let mut runs = Vec::new();
        for &contender in &contenders {
            eprintln!("proving-ground: {} / {}", scenario.name, contender.name());
            runs.push(run_one(options, scenario, contender, &phases, 40 + index as u64).await?);
        }
        let run = ScenarioRun {
            scenario: *scenario,
            fault_capacity_rps: fault_capacity(scenario, DEFAULT_SLOTS, DEFAULT_SERVICE_TIME),
            runs,
        };
        println!("{}", crate::report::table(&run, &phases));
        report.scenarios.push(run);
    }
    report.took_s = started.elapsed().as_secs_f64();
    Ok(report)
}
