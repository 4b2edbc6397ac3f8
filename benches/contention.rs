//! Two OS threads calling through one shared instance of each contender: one breaker and one
//! bulkhead shared by both threads, against one tower service (each thread calls its own clone;
//! the clones share the concurrency limit's semaphore), one `failsafe` breaker and one
//! semaphore. Each thread drives its calls on its own current-thread runtime, as a
//! thread-per-core server does. Reported as aggregate calls per second.
//!
//! The machine this runs on has two cores shared with other work, so a contender measured
//! while something else ran would look slower than it is. The contenders are therefore run in
//! interleaved rounds (every contender once per round, with one thread and with two, `ROUNDS`
//! rounds after a calibration round), and each is reported by its best and its median round.
//! The best round is the one least disturbed, so best-to-best ratios are the headline. The
//! scaling column (two threads' best over one thread's best) is the control: the bare call
//! shares nothing, so it scales by 2 exactly when both cores were free for the bench.
//!
//! Writes the numbers to `target/contention.json` for `benches/summarize.py`.
//!
//! Then, on one thread, the per-call goals of BENCHMARKS.md (`#[resilient]` and `#[critical]`
//! against tower's `ConcurrencyLimit` + `Timeout` and tokio's `timeout`, ready at once and
//! waiting once) by the same method: the contenders in interleaved rounds, each kept at its
//! fastest round, so a ratio is not decided by which contender ran while a neighbour built.
//! Written to `target/interleaved.json`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "bench code: a failed setup is a failed run"
)]

mod common;

use std::sync::Barrier;
use std::time::Duration;

use velocity_policy::Deadline;

use common::{Contender, Op, REQUEST_BUDGET, contenders, runtime};

const THREADS: usize = 2;
/// Rounds of the one-thread goal timing.
const GOAL_ROUNDS: usize = 15;
/// The one-thread goal timing's contenders.
const GOAL: [Contender; 5] = [
    Contender::Bare,
    Contender::ResilientExpansion,
    Contender::CriticalExpansion,
    Contender::TowerClTimeout,
    Contender::TokioTimeout,
];
const ROUNDS: usize = 9;
/// Each contender's share of a round.
const PER_RUN: Duration = Duration::from_millis(100);

/// Calls per second through `who` with `threads` threads making `n` calls each.
fn run<F, A, B, C>(
    shared: &common::Contenders<F, A, B, C>,
    who: Contender,
    threads: usize,
    n: u64,
) -> f64
where
    common::Contenders<F, A, B, C>: Clone + Send,
    F: failsafe::futures::CircuitBreaker,
    A: tower::Service<u64, Response = u64, Error = tower::BoxError>,
    B: tower::Service<u64, Response = u64, Error = tower::BoxError>,
    C: tower::Service<u64, Response = u64, Error = tower::BoxError>,
{
    let start = Barrier::new(threads);
    let slowest = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let mut mine = shared.clone();
                let start = &start;
                s.spawn(move || {
                    let rt = runtime();
                    let request = rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
                    // Warm this thread's runtime before the clock starts.
                    mine.drive(&rt, request, who, 1_000);
                    start.wait();
                    mine.drive(&rt, request, who, n)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a bench thread panicked"))
            .max()
            .unwrap_or_default()
    });
    (threads as u64 * n) as f64 / slowest.as_secs_f64()
}

/// The goals' contenders on one thread, interleaved: nanoseconds per call of each one's fastest
/// round, printed and returned as JSON.
fn goal_timing() -> String {
    let rt = runtime();
    let request = rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
    let mut json = String::from("{");
    println!("one thread: nanoseconds per call, fastest of {GOAL_ROUNDS} interleaved rounds");
    for (k, op) in Op::ALL.into_iter().enumerate() {
        let mut all = contenders(op);
        let n: u64 = if op == Op::Ready { 20_000 } else { 5_000 };
        for who in GOAL {
            all.drive(&rt, request, who, n);
        }
        let mut best = [f64::INFINITY; GOAL.len()];
        for _ in 0..GOAL_ROUNDS {
            for (i, &who) in GOAL.iter().enumerate() {
                let per_call = all.drive(&rt, request, who, n).as_nanos() as f64 / n as f64;
                best[i] = best[i].min(per_call);
            }
        }
        let at = |c: Contender| best[GOAL.iter().position(|&g| g == c).unwrap_or(0)];
        let (tower, timeout) = (at(Contender::TowerClTimeout), at(Contender::TokioTimeout));
        println!();
        println!(
            "| {} | ns/call | / tower CL+Timeout | / tokio `timeout` |",
            op.name()
        );
        println!("|---|---:|---:|---:|");
        if k > 0 {
            json.push(',');
        }
        json.push_str(&format!("\"{}\":{{", op.name()));
        for (i, &who) in GOAL.iter().enumerate() {
            println!(
                "| {} | {:.1} | {:.2} | {:.2} |",
                who.name(),
                best[i],
                best[i] / tower,
                best[i] / timeout
            );
            if i > 0 {
                json.push(',');
            }
            json.push_str(&format!("\"{}\":{:.2}", who.name(), best[i]));
        }
        json.push('}');
    }
    json.push('}');
    println!();
    json
}

fn median(sorted: &[f64]) -> f64 {
    sorted[sorted.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-'))
        && !"contention".contains(filter.as_str())
    {
        return;
    }
    let shared = contenders(Op::Ready);
    let list = Contender::CONTENTION;
    // Calibration round: how many calls fill `PER_RUN` for each contender.
    let calls: Vec<u64> = list
        .iter()
        .map(|&who| {
            let rate = run(&shared, who, THREADS, 20_000);
            ((rate * PER_RUN.as_secs_f64()) as u64 / THREADS as u64).max(10_000)
        })
        .collect();
    let mut two: Vec<Vec<f64>> = vec![Vec::with_capacity(ROUNDS); list.len()];
    let mut one: Vec<Vec<f64>> = vec![Vec::with_capacity(ROUNDS); list.len()];
    for _ in 0..ROUNDS {
        for (i, &who) in list.iter().enumerate() {
            two[i].push(run(&shared, who, THREADS, calls[i]));
            one[i].push(run(&shared, who, 1, calls[i]));
        }
    }
    for r in two.iter_mut().chain(one.iter_mut()) {
        r.sort_by(f64::total_cmp);
    }
    let tower = list
        .iter()
        .position(|&c| c == Contender::TowerClTimeout)
        .expect("tower is a contender");
    let (tower_best, tower_median) = (two[tower][ROUNDS - 1], median(&two[tower]));

    println!(
        "two threads through one shared instance: million calls per second, best and median of {ROUNDS} interleaved rounds"
    );
    println!();
    println!(
        "| contender | 2 threads, best | 2 threads, median | 1 thread, best | scaling (best) | best / tower's best | median / tower's median |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut json = String::from("{");
    for (i, &who) in list.iter().enumerate() {
        let (best, med, single) = (two[i][ROUNDS - 1], median(&two[i]), one[i][ROUNDS - 1]);
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} |",
            who.name(),
            best / 1e6,
            med / 1e6,
            single / 1e6,
            best / single,
            best / tower_best,
            med / tower_median
        );
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!(
            "\"{}\":{{\"best\":{best:.0},\"median\":{med:.0},\"single\":{single:.0}}}",
            who.name()
        ));
    }
    json.push('}');
    let bare = list
        .iter()
        .position(|&c| c == Contender::Bare)
        .expect("bare is a contender");
    let scaling = two[bare][ROUNDS - 1] / one[bare][ROUNDS - 1];
    println!();
    if scaling < 1.8 {
        println!(
            "WARNING: the bare call scaled by {scaling:.2} from one thread to two (2.00 when both cores are free): the second core was busy, so these two-thread numbers do not show contention; run again on a quiet machine"
        );
    } else {
        println!("control: the bare call scaled by {scaling:.2} from one thread to two");
    }
    println!();
    let goals = goal_timing();
    if std::path::Path::new("target").is_dir() {
        std::fs::write("target/contention.json", json).expect("write target/contention.json");
        std::fs::write("target/interleaved.json", goals).expect("write target/interleaved.json");
    }
}
