//! Per-call cost on the admitted path of a trivial async operation, against what users pick
//! instead: each mechanism alone, the full `#[resilient]` and `#[critical]` expansions, tower's
//! `ConcurrencyLimit` + `Timeout` (+ `Retry`), `failsafe`'s breaker, and a bare semaphore plus
//! `tokio::time::timeout`. Every number is a time per call; the bare call is the baseline.
//!
//! Each sample drives its calls in one loop inside one `block_on` on a current-thread runtime
//! (the way a request handler drives them), so the runtime's own entry cost is not counted.
//! Allocations per call are measured by `benches/allocations.rs`; see BENCHMARKS.md.
#![allow(
    clippy::unwrap_used,
    reason = "bench code: a failed call is a failed run"
)]
#![allow(missing_docs, reason = "criterion_group! generates undocumented items")]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use velocity_policy::Deadline;

use common::*;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .without_plots()
}

/// The breaker's admission decision on a closed breaker, synchronously, against one atomic
/// load and `failsafe`'s `is_call_permitted`; and the price of one clock read on this machine,
/// the floor of anything that bounds time.
fn breaker_check(c: &mut Criterion) {
    let ours = Ours::new();
    let fs = failsafe::Config::new().build();
    let word = AtomicU64::new(0);
    let mut g = c.benchmark_group("primitive");
    g.bench_function("atomic_load", |b| {
        b.iter(|| std::hint::black_box(&word).load(Ordering::Acquire) == 0)
    });
    g.bench_function("clock_read", |b| b.iter(tokio::time::Instant::now));
    g.bench_function("ours_check", |b| {
        b.iter(|| std::hint::black_box(&ours.breaker).check().is_ok())
    });
    g.bench_function("failsafe_is_call_permitted", |b| {
        b.iter(|| failsafe::futures::CircuitBreaker::is_call_permitted(std::hint::black_box(&fs)))
    });
    // What reload support adds to a call: an operation's deadline and minimum budget, and a
    // retry's numbers, each read whole from the cell a reload publishes into.
    let operation = velocity_policy::deadline::OperationDeadline::new(
        "bench::search",
        Duration::from_secs(2),
        Duration::from_millis(100),
    );
    g.bench_function("operation_deadline_current", |b| {
        b.iter(|| std::hint::black_box(&operation).current())
    });
    let retry = velocity_policy::RetryPolicy::builder("bench").build();
    g.bench_function("retry_numbers", |b| {
        b.iter(|| std::hint::black_box(&retry).numbers())
    });
    g.finish();
}

/// Each mechanism alone around the ready operation, next to the alternative users write.
fn mechanisms(c: &mut Criterion) {
    let rt = runtime();
    let request = rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
    let mut all = contenders(Op::Ready);
    let mut g = c.benchmark_group("mechanism");
    for who in Contender::MECHANISMS {
        g.bench_function(who.name(), |b| {
            b.iter_custom(|n| all.drive(&rt, request, who, n))
        });
    }
    g.finish();
}

/// The full stacks, for an operation ready at once and for one that waits once.
fn stacks(c: &mut Criterion) {
    let rt = runtime();
    let request = rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
    for op in Op::ALL {
        let mut all = contenders(op);
        let mut g = c.benchmark_group(format!("stack_{}", op.name()));
        for who in Contender::STACKS {
            g.bench_function(who.name(), |b| {
                b.iter_custom(|n| all.drive(&rt, request, who, n))
            });
        }
        g.finish();
    }
}

/// What each proposed runtime change would buy: the `#[resilient]` expansion with one cost
/// removed at a time (see `common::what_if`). Not the documented sequence.
fn what_if(c: &mut Criterion) {
    let rt = runtime();
    let request = rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
    for op in Op::ALL {
        let mut all = contenders(op);
        let mut g = c.benchmark_group(format!("what_if_{}", op.name()));
        for i in 0..what_if::VARIANTS.len() {
            let who = Contender::WhatIf(i);
            let name = who.name().trim_start_matches("what_if_");
            g.bench_function(name, |b| b.iter_custom(|n| all.drive(&rt, request, who, n)));
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = breaker_check, mechanisms, stacks, what_if
}
criterion_main!(benches);
