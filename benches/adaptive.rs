//! The adaptive bulkhead's admitted path (a slot taken and given back, its latency counted and,
//! at each window's end, the limit decided) beside a fixed bulkhead's and beside a tokio
//! `Semaphore` permit, which is what tower's `ConcurrencyLimit` takes per call and what users
//! would pick instead (no well-kept crate adapts a tower concurrency limit to latency). Every
//! call is admitted. See BENCHMARKS.md, "The adaptive bulkhead".
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "bench code: a failed call is a failed run"
)]
#![allow(missing_docs, reason = "criterion_group! generates undocumented items")]

use std::time::Duration;

use criterion::{Criterion, criterion_group};
use tokio::sync::Semaphore;
use velocity_policy::Bulkhead;
use velocity_policy::bulkhead::AdaptiveLimit;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .without_plots()
}

struct Contenders {
    fixed: Bulkhead,
    adaptive: Bulkhead,
    semaphore: Semaphore,
}

fn contenders() -> Contenders {
    Contenders {
        fixed: Bulkhead::builder("bench-fixed").max_concurrent(64).build(),
        adaptive: Bulkhead::builder("bench-adaptive")
            .adaptive(AdaptiveLimit::new(64, 64))
            .build(),
        semaphore: Semaphore::new(64),
    }
}

fn admitted(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _entered = rt.enter();
    let Contenders {
        fixed,
        adaptive,
        semaphore,
    } = contenders();
    let mut g = c.benchmark_group("adaptive");
    g.bench_function("tokio_semaphore", |b| {
        b.iter(|| drop(std::hint::black_box(&semaphore).try_acquire().unwrap()))
    });
    g.bench_function("ours_fixed", |b| {
        b.iter(|| drop(std::hint::black_box(&fixed).try_acquire().unwrap()))
    });
    g.bench_function("ours_adaptive", |b| {
        b.iter(|| drop(std::hint::black_box(&adaptive).try_acquire().unwrap()))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = admitted
}

/// `N` admitted calls of `what` inside `profiled_loop`, for callgrind:
/// `valgrind --tool=callgrind --toggle-collect='*profiled_loop*' target/release/deps/adaptive-* --profile WHAT N`
/// (instructions per call: the loop's count over `N`; a clock read is a system call under
/// valgrind, counted apart as calls to `clock_gettime`).
fn profile(what: &str, n: u64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _entered = rt.enter();
    let Contenders {
        fixed,
        adaptive,
        semaphore,
    } = contenders();
    let mut call: Box<dyn FnMut() -> bool> = match what {
        "tokio_semaphore" => Box::new(|| semaphore.try_acquire().is_ok()),
        "ours_fixed" => Box::new(|| fixed.try_acquire().is_ok()),
        "ours_adaptive" => Box::new(|| adaptive.try_acquire().is_ok()),
        other => panic!("unknown profile `{other}`: tokio_semaphore, ours_fixed or ours_adaptive"),
    };
    assert!(profiled_loop(&mut *call, n));
    if what == "ours_adaptive" {
        eprintln!(
            "windows closed: {}",
            adaptive.snapshot().adaptive.unwrap().windows
        );
    }
}

#[inline(never)]
fn profiled_loop(call: &mut dyn FnMut() -> bool, n: u64) -> bool {
    let mut all = true;
    for _ in 0..n {
        all &= std::hint::black_box(call());
    }
    all
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--profile") {
        let what = args.get(at + 1).map_or("ours_adaptive", String::as_str);
        let n = args
            .get(at + 2)
            .and_then(|n| n.parse().ok())
            .unwrap_or(100_000);
        profile(what, n);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
