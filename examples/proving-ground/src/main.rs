//! `cargo run --release -p proving-ground -- [--quick] [--out DIR]`: every contender through
//! every scenario; see the crate docs. The subcommands are the child processes the run starts.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use proving_ground::model::{Contender, DEFAULT_SERVICE_TIME, DEFAULT_SLOTS, Phases};
use proving_ground::{contenders, dependency, fifo, load, report, run};

#[derive(Debug, Parser)]
#[command(
    about = "This engine against no policy, a naive retry, tower and tower-resilience, under real faults"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Child>,
    /// Short phases: a smoke run of every contender in every scenario.
    #[arg(long)]
    quick: bool,
    /// Where the JSON and the HTML page go.
    #[arg(long, default_value = "target/proving-ground")]
    out: PathBuf,
    /// Only this scenario (repeatable): outage, metastable, slow, blackhole, 429, spike.
    #[arg(long)]
    scenario: Vec<String>,
    /// Only this contender (repeatable).
    #[arg(long, value_enum)]
    contender: Vec<Contender>,
    /// The phases' lengths in seconds, `WARMUP,BASELINE,FAULT,AFTER` (for the tests).
    #[arg(long, hide = true, value_parser = parse_phases)]
    phases: Option<Phases>,
}

/// `WARMUP,BASELINE,FAULT,AFTER` in seconds, each positive and finite.
fn parse_phases(text: &str) -> Result<Phases, String> {
    let values: Vec<f64> = text
        .split(',')
        .map(|v| v.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("`{text}` is not four numbers: {e}"))?;
    match values[..] {
        [warmup_s, baseline_s, fault_s, after_s]
            if values
                .iter()
                .all(|v| v.is_finite() && *v > 0.0 && *v <= 600.0) =>
        {
            Ok(Phases {
                warmup_s,
                baseline_s,
                fault_s,
                after_s,
            })
        }
        _ => Err(format!(
            "`{text}`: write four lengths in seconds, each above 0 and at most 600, as `0.5,1.5,1.5,2`"
        )),
    }
}

#[derive(Debug, Subcommand)]
enum Child {
    /// The dependency: prints `listening ADDR`, serves until killed.
    Dependency {
        /// Calls served at once.
        #[arg(long, default_value_t = DEFAULT_SLOTS)]
        slots: u32,
        /// Service time per call, ms.
        #[arg(long, default_value_t = DEFAULT_SERVICE_TIME.as_millis() as u64)]
        service_ms: u64,
    },
    /// One contender's service: prints `listening ADDR`, serves until killed.
    Service {
        /// Which.
        #[arg(long, value_enum)]
        contender: Contender,
        /// The dependency, `http://127.0.0.1:PORT`.
        #[arg(long)]
        dependency: String,
    },
    /// The load generator: runs a plan, writes every request's record.
    Load {
        /// The plan (JSON).
        #[arg(long)]
        plan: PathBuf,
        /// Where the records go (JSON).
        #[arg(long)]
        out: PathBuf,
    },
}

async fn serve(router: axum::Router) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on loopback: {e}"))?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("no local address: {e}"))?;
    println!("listening {address}");
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    axum::serve(listener, router)
        .await
        .map_err(|e| format!("the server failed: {e}"))
}

async fn child(command: Child) -> Result<(), String> {
    match command {
        Child::Dependency { slots, service_ms } => {
            let capacity = fifo::Capacity::new(slots, std::time::Duration::from_millis(service_ms));
            serve(dependency::router(capacity)).await
        }
        Child::Service {
            contender,
            dependency,
        } => serve(contenders::router(contender, &dependency).map_err(|e| e.to_string())?).await,
        Child::Load { plan, out } => {
            let text = std::fs::read(&plan)
                .map_err(|e| format!("cannot read `{}`: {e}", plan.display()))?;
            let plan: load::Plan = serde_json::from_slice(&text)
                .map_err(|e| format!("`{}` is not a plan: {e}", plan.display()))?;
            let report = load::run(&plan).await;
            let json = serde_json::to_vec(&report).map_err(|e| e.to_string())?;
            std::fs::write(&out, json).map_err(|e| format!("cannot write `{}`: {e}", out.display()))
        }
    }
}

async fn orchestrate(cli: Cli) -> Result<(), String> {
    let program = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let options = run::Options {
        quick: cli.quick,
        out: cli.out,
        scenarios: cli.scenario,
        contenders: cli.contender,
        phases: cli.phases,
        program,
    };
    let report = run::run(&options).await.map_err(|e| e.to_string())?;
    let json_path = options.out.join("proving-ground.json");
    let html_path = options.out.join("proving-ground.html");
    let json = serde_json::to_vec_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, json)
        .map_err(|e| format!("cannot write `{}`: {e}", json_path.display()))?;
    std::fs::write(&html_path, report::html(&report))
        .map_err(|e| format!("cannot write `{}`: {e}", html_path.display()))?;
    println!("json: {}", json_path.display());
    println!("html: {}", html_path.display());
    println!("took {:.0} s", report.took_s);
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Some(command) => child(command).await,
            None => orchestrate(cli).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
