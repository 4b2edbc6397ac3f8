//! Allocations per admitted call, for every contender, measured with a counting allocator
//! (`allocation-counter`, which counts per thread).
//!
//! Each contender makes `CALLS` calls in one `block_on` on a current-thread runtime, after as
//! many warm-up calls (tokio grows its deferred-wake list once, on the first pendings). The
//! bare operation is measured the same way and subtracted: tokio's `block_on` allocates once
//! when its future first goes pending, whatever the future.
//!
//! This is a binary of its own because the counting allocator adds a cost to every allocation,
//! which would slow down the alternatives (which allocate) in the timed benches.
//!
//! `--profile NAME OP N` runs only that contender `N` times inside `profiled_loop`, for
//! `valgrind --tool=callgrind --toggle-collect=*profiled_loop*` (see BENCHMARKS.md).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "bench code: a failed setup is a failed run"
)]

mod common;

use velocity_policy::Deadline;

use common::{
    ATTEMPT_MAX, Contender, Op, REQUEST_BUDGET, call_tower, contenders, expansion, runtime,
};

const CALLS: u64 = 10_000;

fn per_call(total: u64, bare: u64) -> f64 {
    (total.saturating_sub(bare)) as f64 / CALLS as f64
}

/// Runs `n` calls of one contender; kept out of line so callgrind can count it alone.
#[inline(never)]
fn profiled_loop(who: Contender, op: Op, n: u64) {
    let rt = runtime();
    let request = rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
    let mut all = contenders(op);
    all.drive(&rt, request, who, n);
}

fn profile(args: &[String]) {
    let who = args
        .first()
        .and_then(|n| Contender::by_name(n))
        .expect("--profile NAME OP N: NAME is a contender's name");
    let op = match args.get(1).map(String::as_str) {
        Some("waits_once") => Op::WaitsOnce,
        _ => Op::Ready,
    };
    let n = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(100_000);
    profiled_loop(who, op, n);
}

/// The size of each contender's future, in bytes: a future is moved (copied) into place when
/// it is awaited, so a large one costs a `memcpy` per call that instruction counts hide.
fn future_sizes() {
    let rt = runtime();
    let request = rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
    let mut all = contenders(Op::Ready);
    let ours = &*all.ours;
    let op = Op::Ready;
    // `tokio::time::timeout` builds its timer eagerly: it needs the runtime's context.
    let _context = rt.enter();
    let sizes = [
        ("bare", size_of_val(&op.run(0))),
        (
            "resilient_expansion",
            size_of_val(&expansion::resilient_macro(op, 0)),
        ),
        (
            "critical_expansion",
            size_of_val(&expansion::critical_macro(op, 0)),
        ),
        (
            "resilient_by_hand",
            size_of_val(&expansion::resilient(ours, op, 0)),
        ),
        ("critical_by_hand", size_of_val(&expansion::critical(op, 0))),
        (
            "ours_breaker_bulkhead_deadline",
            size_of_val(&ours.breaker_bulkhead_deadline(&request, op, 0)),
        ),
        (
            "Bulkhead::acquire",
            size_of_val(&ours.bulkhead.acquire(&request)),
        ),
        ("Deadline::run(op)", size_of_val(&request.run(op.run(0)))),
        (
            "retry_within(op)",
            size_of_val(&ours.retry(&request, op, 0)),
        ),
        (
            "tower_cl_timeout",
            size_of_val(&call_tower(&mut all.tower_cl_timeout, 0)),
        ),
        (
            "tower_retry_cl_timeout",
            size_of_val(&call_tower(&mut all.tower_retry_cl_timeout, 0)),
        ),
        (
            "tokio::time::timeout(op)",
            size_of_val(&tokio::time::timeout(ATTEMPT_MAX, op.run(0))),
        ),
        ("Semaphore::acquire", size_of_val(&all.sem.acquire())),
    ];
    println!("| future | bytes |");
    println!("|---|---:|");
    for (name, size) in sizes {
        println!("| {name} | {size} |");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--sizes") {
        future_sizes();
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--profile") {
        profile(&args[at + 1..]);
        return;
    }
    // `cargo bench` passes `--bench` (and possibly a filter); a filter that names another
    // bench binary's groups skips this one.
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-'))
        && !"allocations".contains(filter.as_str())
    {
        return;
    }

    // The allocator counts: one box is one allocation.
    let check = allocation_counter::measure(|| {
        std::hint::black_box(Box::new(1_u64));
    });
    assert_eq!(
        check.count_total, 1,
        "the counting allocator is not installed"
    );
    println!("allocations per admitted call ({CALLS} calls, bare operation subtracted)");
    println!();
    println!("| operation | contender | allocations/call | bytes/call |");
    println!("|---|---|---:|---:|");
    for op in Op::ALL {
        let rt = runtime();
        let request = rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
        let mut all = contenders(op);
        let mut list: Vec<Contender> = Contender::STACKS.to_vec();
        if op == Op::Ready {
            list.extend(Contender::MECHANISMS.into_iter().skip(1));
        }
        let mut measure = |who: Contender| {
            all.drive(&rt, request, who, CALLS);
            allocation_counter::measure(|| {
                all.drive(&rt, request, who, CALLS);
            })
        };
        let bare = measure(Contender::Bare);
        eprintln!(
            "{}: the bare loop of {CALLS} calls allocated {} times ({} bytes)",
            op.name(),
            bare.count_total,
            bare.bytes_total
        );
        for who in list {
            let counted = measure(who);
            println!(
                "| {} | {} | {:.2} | {:.1} |",
                op.name(),
                who.name(),
                per_call(counted.count_total, bare.count_total),
                per_call(counted.bytes_total, bare.bytes_total),
            );
        }
    }
}
