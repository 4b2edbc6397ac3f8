//! The layers against tower's own middleware on the same `service_fn`: our deadline +
//! bulkhead + breaker stack (`DeadlineLayer`, `BulkheadLayer`, `BreakerLayer`) next to tower's
//! `Timeout` + `LoadShed` + `ConcurrencyLimit`, for a service ready at once and one that waits
//! once. Every number is a time per call, driven in one loop inside one `block_on` on a
//! current-thread runtime; the bare `service_fn` is the baseline. Allocations per call are
//! pinned by `velocity-policy-runtime/tests/layer_alloc.rs`; see BENCHMARKS.md.
//!
//! After criterion's groups, the same stacks in interleaved rounds (each stack once per round,
//! `ROUNDS` rounds, each kept at its fastest): criterion measures one stack after another, so
//! on a shared machine a ratio of its medians can be decided by which stack ran while a
//! neighbour built; interleaved, both see the same minutes (as `benches/contention.rs` times
//! the attributes).
//!
//! `--profile NAME OP N` (`NAME`: `bare`, `ours` or `tower`; `OP`: `ready` or `waits_once`)
//! runs only that stack `N` times inside `profiled_loop`, for callgrind:
//! `python3 benches/callgrind.py --layers`.
#![allow(
    clippy::unwrap_used,
    reason = "bench code: a failed call is a failed run"
)]
#![allow(missing_docs, reason = "criterion_group! generates undocumented items")]

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use http::{Request, Response};
use tower::{Service, ServiceBuilder, ServiceExt};
use velocity_policy::layer::{BoxError, BreakerLayer, BulkheadLayer, DeadlineLayer};
use velocity_policy::{Breaker, Bulkhead};

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .without_plots()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

async fn answer(wait: bool) -> Result<Response<()>, BoxError> {
    if wait {
        tokio::task::yield_now().await;
    }
    Ok(Response::new(()))
}

/// `n` calls through `svc`, each waiting for readiness first, timed as a whole.
fn drive<S>(rt: &tokio::runtime::Runtime, svc: &mut S, n: u64) -> Duration
where
    S: Service<Request<()>>,
    S::Error: std::fmt::Debug,
{
    rt.block_on(async {
        let started = Instant::now();
        for _ in 0..n {
            let response = svc.ready().await.unwrap().call(Request::new(())).await;
            std::hint::black_box(response.unwrap());
        }
        started.elapsed()
    })
}

fn bare(wait: bool) -> impl Service<Request<()>, Error = BoxError> {
    tower::service_fn(move |_: Request<()>| answer(wait))
}

/// Ours: deadline + bulkhead + breaker.
fn ours(rt: &tokio::runtime::Runtime, wait: bool) -> impl Service<Request<()>, Error = BoxError> {
    rt.block_on(async {
        ServiceBuilder::new()
            .layer(DeadlineLayer::new(Duration::from_secs(2)))
            .layer(BulkheadLayer::new(
                Bulkhead::builder("bench-layers").max_concurrent(64).build(),
            ))
            .layer(BreakerLayer::new(Breaker::builder("bench-layers").build()))
            .service_fn(move |_: Request<()>| answer(wait))
    })
}

/// Tower's: timeout + load shed + concurrency limit.
fn tower_stack(
    rt: &tokio::runtime::Runtime,
    wait: bool,
) -> impl Service<Request<()>, Error = BoxError> {
    rt.block_on(async {
        ServiceBuilder::new()
            .timeout(Duration::from_secs(2))
            .load_shed()
            .concurrency_limit(64)
            .service_fn(move |_: Request<()>| answer(wait))
    })
}

/// `n` calls through `svc`; kept out of line so callgrind counts it alone.
#[inline(never)]
fn profiled_loop<S>(rt: &tokio::runtime::Runtime, svc: &mut S, n: u64)
where
    S: Service<Request<()>>,
    S::Error: std::fmt::Debug,
{
    std::hint::black_box(drive(rt, svc, n));
}

fn profile(args: &[String]) {
    let name = args.first().map_or("bare", String::as_str);
    let wait = args.get(1).is_some_and(|op| op == "waits_once");
    let n = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let rt = runtime();
    match name {
        "ours" => profiled_loop(&rt, &mut ours(&rt, wait), n),
        "tower" => profiled_loop(&rt, &mut tower_stack(&rt, wait), n),
        _ => profiled_loop(&rt, &mut bare(wait), n),
    }
}

fn stacks(c: &mut Criterion) {
    let rt = runtime();
    for (wait, name) in [(false, "ready"), (true, "waits_once")] {
        let mut bare = bare(wait);
        let mut ours = ours(&rt, wait);
        let mut tower_stack = tower_stack(&rt, wait);
        let mut g = c.benchmark_group(format!("layers_{name}"));
        g.bench_function("bare", |b| b.iter_custom(|n| drive(&rt, &mut bare, n)));
        g.bench_function("ours_deadline_bulkhead_breaker", |b| {
            b.iter_custom(|n| drive(&rt, &mut ours, n))
        });
        g.bench_function("tower_timeout_loadshed_concurrencylimit", |b| {
            b.iter_custom(|n| drive(&rt, &mut tower_stack, n))
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = stacks
}
/// Rounds of [`interleaved`]: every stack once per round.
const ROUNDS: usize = 15;

/// Nanoseconds per call of each stack's fastest of [`ROUNDS`] interleaved rounds, printed as a
/// table with ours over tower's.
fn interleaved() {
    let rt = runtime();
    println!("one thread: nanoseconds per call, fastest of {ROUNDS} interleaved rounds");
    for (wait, name, n) in [(false, "ready", 20_000), (true, "waits_once", 5_000)] {
        let mut bare = bare(wait);
        let mut ours = ours(&rt, wait);
        let mut tower_stack = tower_stack(&rt, wait);
        let mut round = || {
            [
                drive(&rt, &mut bare, n),
                drive(&rt, &mut ours, n),
                drive(&rt, &mut tower_stack, n),
            ]
            .map(|took| took.as_nanos() as f64 / n as f64)
        };
        // One warm-up round: tokio grows its deferred-wake list on the first pendings.
        round();
        let mut best = [f64::INFINITY; 3];
        for _ in 0..ROUNDS {
            for (best, took) in best.iter_mut().zip(round()) {
                *best = best.min(took);
            }
        }
        println!();
        println!("| {name} | ns/call | / tower's |");
        println!("|---|---:|---:|");
        for (stack, ns) in [
            "bare",
            "ours_deadline_bulkhead_breaker",
            "tower_timeout_loadshed_concurrencylimit",
        ]
        .into_iter()
        .zip(best)
        {
            println!("| {stack} | {ns:.1} | {:.2} |", ns / best[2]);
        }
    }
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--profile") {
        profile(&args[at + 1..]);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
    // Only in a full run (`cargo bench`), not under `cargo test --benches` or a name filter.
    if args.iter().any(|a| a == "--bench") && !args.iter().skip(1).any(|a| !a.starts_with('-')) {
        interleaved();
    }
}
