//! The rate limiter's admitted path: ours in process (GCRA from `governor`, on tokio's clock,
//! with its counts and its refusal), synchronously and awaited as the expansion awaits it,
//! against `governor` alone (its own `direct` limiter and default clock), which is what users
//! would pick instead. Every limiter is built with a rate no run reaches, so every call is
//! admitted. See BENCHMARKS.md, "The rate limiter".
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "bench code: a failed call is a failed run"
)]
#![allow(missing_docs, reason = "criterion_group! generates undocumented items")]

use std::num::NonZeroU32;
use std::time::Duration;

use criterion::{Criterion, criterion_group};
use velocity_policy::limiter::RateLimiter;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .without_plots()
}

fn admitted(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _entered = rt.enter();
    let ours = RateLimiter::builder("bench", u32::MAX, Duration::from_secs(1)).build();
    let governor = governor::RateLimiter::direct(governor::Quota::per_second(NonZeroU32::MAX));
    let mut g = c.benchmark_group("ratelimit");
    g.bench_function("governor_check", |b| {
        b.iter(|| std::hint::black_box(&governor).check().is_ok())
    });
    g.bench_function("ours_decide_now", |b| {
        b.iter(|| matches!(std::hint::black_box(&ours).decide_now(), Some(Ok(()))))
    });
    g.bench_function("ours_acquire_awaited", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for _ in 0..n {
                    std::hint::black_box(&ours).acquire().await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = admitted
}

/// `N` admitted calls of `what` inside `profiled_loop`, for callgrind:
/// `valgrind --tool=callgrind --toggle-collect='*profiled_loop*' target/release/deps/ratelimit-* --profile WHAT N`
/// (instructions per call: the loop's count over `N`; a clock read is a system call under
/// valgrind, counted apart as calls to `clock_gettime`).
fn profile(what: &str, n: u64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _entered = rt.enter();
    let ours = RateLimiter::builder("bench", u32::MAX, Duration::from_secs(1)).build();
    let governor = governor::RateLimiter::direct(governor::Quota::per_second(NonZeroU32::MAX));
    let mut call: Box<dyn FnMut() -> bool> = match what {
        "governor_check" => Box::new(|| governor.check().is_ok()),
        "ours_decide_now" => Box::new(|| matches!(ours.decide_now(), Some(Ok(())))),
        other => panic!("unknown profile `{other}`: governor_check or ours_decide_now"),
    };
    assert!(profiled_loop(&mut *call, n));
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
        let what = args.get(at + 1).map_or("ours_decide_now", String::as_str);
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
