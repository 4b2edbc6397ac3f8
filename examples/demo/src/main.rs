//! `cargo run -p policy-demo`: the document service under a sick dependency, measured.
//!
//! ```text
//! policy-demo [--short] [--report PATH] [--db PATH]   the scenario (about a minute; --short: ~10 s)
//! policy-demo serve [--port N]                        the service and its fake providers, until Ctrl-C or SIGTERM
//! policy-demo soak --minutes N [--report PATH]        N minutes of load while faults cycle, judged
//! ```
//!
//! With `REDIS_URL` set (and the `redis` feature), the scenario runs a second instance (this binary's `instance`
//! subcommand, in its own process) that shares its breakers through Redis.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};
use policy_demo::scenario::{self, Options};
use policy_demo::stack::{self, Instance, ProviderUrls, Providers};
use policy_demo::{DemoError, events::EventLog, report};
use tokio::io::AsyncReadExt as _;

/// A document service whose dependencies misbehave, and what the policy engine does about it.
#[derive(Debug, Parser)]
#[command(name = "policy-demo", version)]
struct Cli {
    /// Phases of 1.5 s instead of 8 s (about ten seconds in all).
    #[arg(long)]
    short: bool,
    /// Where to write the HTML report (default: a new file in the temporary directory).
    #[arg(long, value_name = "PATH")]
    report: Option<PathBuf>,
    /// The SQLite file to use (default: a temporary file, removed at the end).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
    /// No progress lines, only the tables.
    #[arg(long)]
    quiet: bool,
    #[command(subcommand)]
    command: Option<Commands>,
}

#[derive(Debug, Subcommand)]
enum Commands {
    /// Runs the service and its fake providers until Ctrl-C or SIGTERM (then drains deferred
    /// work and reports it), to explore by hand: the dashboard, `curl`, and switching a
    /// provider with `curl -d 'slow 800ms' URL/_mode`.
    Serve {
        /// The service's port (default: any free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
    /// Drives load on every route of the service (in a process of its own) while the
    /// providers' faults cycle, measures its memory, descriptors, tasks and deferred work every
    /// few seconds, and judges the run; exits non-zero when a check fails. Build it with
    /// `--release` for figures worth quoting.
    Soak {
        /// How long the load runs, in minutes (0.1 to 10080).
        #[arg(long, default_value_t = 1.0)]
        minutes: f64,
        /// Seconds each fault lasts before the next.
        #[arg(long, default_value_t = 12, value_name = "SECS")]
        fault_every: u64,
        /// Where to write the HTML report (default: a new file in the temporary directory).
        #[arg(long, value_name = "PATH")]
        report: Option<PathBuf>,
    },
    /// The service side of `soak`: the service, its providers and a probe, until stdin closes.
    #[command(hide = true)]
    SoakService,
    /// Runs one service instance against given providers until its stdin closes (the
    /// scenario starts the second instance this way when REDIS_URL is set).
    #[command(hide = true)]
    Instance {
        /// The instance's name (its `x-caller` to the providers).
        #[arg(long)]
        name: String,
        /// The search provider's base URL.
        #[arg(long)]
        search: String,
        /// The notifier's base URL.
        #[arg(long)]
        notifier: String,
        /// The session store's base URL.
        #[arg(long)]
        sessions: String,
        /// The Redis key prefix the instances share.
        #[arg(long)]
        redis_prefix: String,
    },
}

fn default_report_path() -> PathBuf {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    std::env::temp_dir().join(format!("policy-demo-report-{stamp}.html"))
}

async fn run_scenario(cli: &Cli) -> Result<(), DemoError> {
    let redis_url = std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty());
    let options = Options {
        short: cli.short,
        progress: !cli.quiet,
        db_path: cli.db.clone(),
        instance_binary: match &redis_url {
            Some(_) => Some(std::env::current_exe()?),
            None => None,
        },
        redis_url,
    };
    let phases = scenario::phases(options.short, options.redis_url.is_some());
    let total: Duration = phases.iter().map(|p| p.duration).sum();
    println!(
        "policy demo: a document service, its search provider, notifier and session store on loopback;\n{} phases, {} s of load (saves at {}/s, reads at {}/s){}",
        phases.len(),
        total.as_secs_f64(),
        scenario::SAVE_RATE,
        scenario::READ_RATE,
        if options.redis_url.is_some() {
            "; two instances sharing breakers through Redis"
        } else {
            ""
        }
    );
    let run = scenario::run(&options).await?;
    print!("{}", report::tables(&run));
    println!("\nThe promises, each judged on this run's numbers against its threshold:");
    for finding in report::findings(&run) {
        println!("  - {finding}");
    }
    let path = cli.report.clone().unwrap_or_else(default_report_path);
    std::fs::write(&path, report::html(&run)).map_err(|e| {
        DemoError::Setup(format!(
            "cannot write the report to {}: {e}",
            path.display()
        ))
    })?;
    println!(
        "\nThe HTML report (charts per route and phase): {}",
        path.display()
    );
    Ok(())
}

/// How long `serve` waits for deferred work at shutdown: well inside the 30 s a container
/// runtime or Kubernetes gives between SIGTERM and SIGKILL.
const SERVE_DRAIN: Duration = Duration::from_secs(10);

async fn serve(port: u16, db: Option<PathBuf>) -> Result<(), DemoError> {
    // First: from here on SIGINT and SIGTERM are ours to handle, not a kill.
    let mut signals = velocity_policy::defer::ShutdownSignals::install()?;
    EventLog::install()?;
    let db = stack::prepare_database(db.as_deref(), scenario::SEED_DOCUMENTS).await?;
    let providers = Providers::start().await?;
    let instance = Instance::start("a", &providers.urls(), db, port).await?;
    let base = instance.url();
    println!(
        "the service:   {base}/  (dashboard: {base}/dashboard, JSON: {base}/policy, {base}/locality)"
    );
    for provider in providers.all() {
        println!(
            "{:<14} {}  (switch it: curl -d 'slow 800ms' {}/_mode; or 'failing', '429 5s', 'healthy')",
            format!("{}:", provider.name()),
            provider.url(),
            provider.url()
        );
    }
    println!(
        "save a document: curl -H 'authorization: Bearer {}' -d '{{\"title\":\"hello\",\"body\":\"world\"}}' {base}/documents",
        policy_demo::service::token_for(1)
    );
    let limits = instance.limits();
    println!(
        "serving within: headers in {} s, a body in {} s, {} connections at most",
        limits.header_read_timeout.as_secs_f64(),
        limits.body_read_timeout.as_secs_f64(),
        limits.max_connections
    );
    println!("Ctrl-C or SIGTERM to stop.");
    let signal = signals.recv().await;
    println!("{signal}: stopping: no new connections; the open requests finish");
    instance.stop().await;
    // The responses are finished, so the work they deferred is in flight: it still calls the
    // providers, so it drains before they stop.
    let report = velocity_policy::defer::shutdown(SERVE_DRAIN).await;
    providers.stop().await;
    println!(
        "stopped; deferred work still in flight at shutdown: {} finished, {} abandoned",
        report.finished, report.abandoned
    );
    println!("since start, deferred: {}", report.deferred);
    println!("since start, background: {}", report.background);
    if !report.accounted_for() {
        println!("not every task is accounted for: the counts above do not add up");
    }
    Ok(())
}

async fn soak(
    minutes: f64,
    fault_every: u64,
    report: Option<PathBuf>,
    quiet: bool,
) -> Result<ExitCode, DemoError> {
    let mut options = policy_demo::soak::SoakOptions::new(minutes, std::env::current_exe()?)?;
    options.fault_every = Duration::from_secs(fault_every.max(1));
    options.progress = !quiet;
    println!(
        "policy demo soak: {:.1} minutes of load on every route ({} saving, {} reading, {} browsing), the providers' faults changing every {} s{}",
        minutes,
        options.savers,
        options.readers,
        options.browsers,
        options.fault_every.as_secs(),
        if cfg!(debug_assertions) {
            " (a debug build: use --release for figures worth quoting)"
        } else {
            ""
        }
    );
    let run = policy_demo::soak::run(&options).await?;
    print!("{}", report::soak_tables(&run));
    let path = report.unwrap_or_else(policy_demo::soak::default_report_path);
    std::fs::write(&path, report::soak_html(&run)).map_err(|e| {
        DemoError::Setup(format!(
            "cannot write the report to {}: {e}",
            path.display()
        ))
    })?;
    println!(
        "\nThe HTML report (memory over time, per fault): {}",
        path.display()
    );
    Ok(if run.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn instance(
    name: &str,
    urls: ProviderUrls,
    redis_prefix: &str,
    db: Option<PathBuf>,
) -> Result<(), DemoError> {
    let redis_url = std::env::var("REDIS_URL")
        .map_err(|_| DemoError::Setup("the `instance` subcommand needs REDIS_URL".into()))?;
    stack::share_breakers(&redis_url, redis_prefix, name).await?;
    let db = stack::prepare_database(db.as_deref(), scenario::SEED_DOCUMENTS).await?;
    let instance = Instance::start(name, &urls, db, 0).await?;
    println!("listening {}", instance.url());
    // Runs until the parent closes our stdin (or goes away).
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 64];
    while stdin.read(&mut buf).await.unwrap_or(0) > 0 {}
    instance.stop().await;
    stack::drain_queue_worker(Duration::from_secs(2)).await;
    let _ = velocity_policy::defer::shutdown(Duration::from_secs(2)).await;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        None => {
            tokio::select! {
                result = run_scenario(&cli) => result,
                _ = tokio::signal::ctrl_c() => {
                    eprintln!("interrupted");
                    return ExitCode::from(130);
                }
            }
        }
        Some(Commands::Serve { port }) => serve(*port, cli.db.clone()).await,
        Some(Commands::Soak {
            minutes,
            fault_every,
            report,
        }) => {
            let report = report.clone().or_else(|| cli.report.clone());
            match soak(*minutes, *fault_every, report, cli.quiet).await {
                Ok(code) => return code,
                Err(error) => Err(error),
            }
        }
        Some(Commands::SoakService) => policy_demo::soak::serve_child().await,
        Some(Commands::Instance {
            name,
            search,
            notifier,
            sessions,
            redis_prefix,
        }) => {
            let urls = ProviderUrls {
                search: search.clone(),
                notifier: notifier.clone(),
                sessions: sessions.clone(),
            };
            instance(name, urls, redis_prefix, None).await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("policy-demo: {error}");
            ExitCode::FAILURE
        }
    }
}
