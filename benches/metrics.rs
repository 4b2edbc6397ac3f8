//! What the `metrics` feature costs an admitted call when no recorder is installed: the
//! `#[resilient]` and `#[critical]` expansions (`common::expansion`) and the bare operation,
//! in a binary built once without the feature and once with it. The criterion group is named
//! after the build (`metrics_off`, `metrics_on`), so both runs sit side by side in
//! `target/criterion`; `benches/callgrind.py --metrics` counts instructions in both builds.
//!
//! ```sh
//! cargo bench --bench metrics                     # metrics_off
//! cargo bench --bench metrics --features metrics  # metrics_on, no recorder installed
//! python3 benches/callgrind.py --metrics          # instructions per call, both builds
//! ```
//!
//! With `--features metrics` and `POLICY_BENCH_RECORDER=1` in the environment, the group is
//! `metrics_recorder`: the same calls with `metrics-util`'s `DebuggingRecorder` installed
//! before the first call, what a recorder's handles cost on top (its histograms keep every
//! value, so its memory grows with the run; it is there to show the order of magnitude).
//!
//! `--profile NAME OP N` runs only that contender `N` times (`OP`: `ready` or `waits_once`) inside
//! `profiled_loop`, for callgrind; `--build` prints `metrics_on` or `metrics_off`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "bench code: a failed call is a failed run"
)]
#![allow(missing_docs, reason = "criterion_group! generates undocumented items")]

mod common;

use std::time::Duration;

use criterion::{Criterion, criterion_group};
use velocity_policy::Deadline;

use common::{Contender, Op, REQUEST_BUDGET, contenders, runtime};

/// This build's name: whether the `metrics` feature is compiled in.
const BUILD: &str = if cfg!(feature = "metrics") {
    "metrics_on"
} else {
    "metrics_off"
};

/// Installs the debugging recorder when asked to (feature `metrics`); the group's name.
fn group() -> &'static str {
    #[cfg(feature = "metrics")]
    if std::env::var_os("POLICY_BENCH_RECORDER").is_some() {
        metrics_util::debugging::DebuggingRecorder::new()
            .install()
            .expect("no recorder installed yet");
        return "metrics_recorder";
    }
    BUILD
}

const MEASURED: [Contender; 3] = [
    Contender::Bare,
    Contender::ResilientExpansion,
    Contender::CriticalExpansion,
];

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .without_plots()
}

fn expansions(c: &mut Criterion) {
    let rt = runtime();
    let request = rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
    let mut all = contenders(Op::Ready);
    let mut g = c.benchmark_group(group());
    for who in MEASURED {
        g.bench_function(who.name(), |b| {
            b.iter_custom(|n| all.drive(&rt, request, who, n))
        });
    }
    g.finish();
}

/// Runs `n` calls of one contender; kept out of line so callgrind can count it alone.
#[inline(never)]
fn profiled_loop(who: Contender, op: Op, n: u64) {
    let rt = runtime();
    let request = rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
    let mut all = contenders(op);
    all.drive(&rt, request, who, n);
}

criterion_group! {
    name = benches;
    config = config();
    targets = expansions
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--build") {
        println!("{BUILD}");
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--profile") {
        let who = args
            .get(at + 1)
            .and_then(|n| Contender::by_name(n))
            .expect("--profile NAME OP N: NAME is a contender's name");
        let op = match args.get(at + 2).map(String::as_str) {
            Some("waits_once") => Op::WaitsOnce,
            _ => Op::Ready,
        };
        let n = args
            .get(at + 3)
            .and_then(|n| n.parse().ok())
            .unwrap_or(100_000);
        profiled_loop(who, op, n);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
