//! The Redis breaker store (feature `redis`), against a private `redis-server` started on a
//! unix socket in a temporary folder and stopped at the end:
//!
//! - the hot path with the store enabled: time per call next to the same breaker in process,
//!   and the Redis commands it sends (from `INFO commandstats`: expected zero);
//! - how long an opening on one instance takes to reach a second instance (pub/sub), and a
//!   trip likewise;
//! - the fleet rate limiter's time per decision with Redis up, killed and frozen: during an
//!   outage the calls after the first are decided by the local rate with no round trip.
//!
//! When `redis-server` is not installed, the bench prints that it was skipped (under `CI=true`
//! it fails instead, like the tests).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "bench code: a failed setup is a failed run"
)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use velocity_policy::redis_store::RedisStore;
use velocity_policy::{Breaker, Bulkhead, Deadline, RetryPolicy, Sharing, Shedder};
use velocity_policy_testkit::RedisServer;

use common::{ATTEMPT_MAX, Op, Ours, REQUEST_BUDGET, SLOTS, expansion, runtime};

/// Calls made while counting Redis commands.
const COUNTED_CALLS: u64 = 1_000_000;
/// Openings timed from one instance to another.
const TRIALS: usize = 20;

/// Commands sent between two `INFO commandstats` readings, the `INFO` itself left out.
fn commands_between(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .filter_map(|(name, &n)| {
            let delta = n - before.get(name).copied().unwrap_or(0);
            (delta > 0).then(|| (name.clone(), delta))
        })
        .collect()
}

fn ours_with(breaker: Breaker) -> Ours {
    Ours {
        breaker,
        bulkhead: Bulkhead::builder("redis-bench")
            .max_concurrent(SLOTS)
            .build(),
        retry: RetryPolicy::builder("redis-bench")
            .attempt_timeout(ATTEMPT_MAX)
            .build(),
        shedder: Shedder::new("redis-bench"),
    }
}

fn hot_path(c: &mut Criterion, server: &RedisServer, store: &Arc<RedisStore>) {
    // Shares every opening with the fleet: the most the store ever does for a breaker.
    let shared = Breaker::builder("hot")
        .sharing(Sharing::Openings { quorum: 1 })
        .store(store.clone())
        .build();
    let redis = ours_with(shared);
    let local = ours_with(Breaker::builder("hot-local").build());
    let rt = runtime();
    let request = rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
    let op = Op::Ready;

    let mut g = c.benchmark_group("redis_hot_path");
    for (name, ours) in [("in_process", &local), ("redis_store", &redis)] {
        g.bench_function(format!("breaker_{name}"), |b| {
            b.iter_custom(|n| {
                rt.block_on(async {
                    let start = Instant::now();
                    for x in 0..n {
                        common::sink(ours.breaker(op, x).await.unwrap());
                    }
                    start.elapsed()
                })
            })
        });
        g.bench_function(format!("resilient_expansion_{name}"), |b| {
            b.iter_custom(|n| {
                rt.block_on(request.scope(async {
                    let start = Instant::now();
                    for x in 0..n {
                        common::sink(expansion::resilient(ours, op, x).await.unwrap());
                    }
                    start.elapsed()
                }))
            })
        });
    }
    g.finish();

    // The commands the hot path sends, counted by the server itself.
    let sent_before = store.snapshot().sent;
    let before = server.command_calls();
    rt.block_on(request.scope(async {
        for x in 0..COUNTED_CALLS {
            common::sink(expansion::resilient(&redis, op, x).await.unwrap());
        }
    }));
    let after = server.command_calls();
    let sent_after = store.snapshot().sent;
    let commands = commands_between(&before, &after);
    let total: u64 = commands.values().sum();
    println!();
    println!(
        "redis_hot_path: {COUNTED_CALLS} admitted calls through the `#[resilient]` sequence with a Redis-backed breaker sent {total} Redis commands ({:.6} per call; by command: {commands:?}); the store counted {} calls of its own",
        total as f64 / COUNTED_CALLS as f64,
        sent_after - sent_before,
    );
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Spins (politely) until `breaker` refuses; how long that took, or `None` within 2 s.
fn time_until_refusing(breaker: &Breaker, from: Instant) -> Option<Duration> {
    while from.elapsed() < Duration::from_secs(2) {
        if breaker.check().is_err() {
            return Some(from.elapsed());
        }
        std::thread::yield_now();
    }
    None
}

fn propagation(server: &RedisServer) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime for the stores");
    let connect = |instance: &str| {
        rt.block_on(
            RedisStore::builder()
                .prefix(server.key_prefix("bench-propagation"))
                .instance(instance)
                .connect(&server.url()),
        )
        .map(Arc::new)
        .expect("connect a store")
    };
    let (a, b) = (connect("a"), connect("b"));
    let _context = rt.enter();
    println!();
    println!("| an opening on instance A, seen by instance B | trials | p50 | p90 | max |");
    println!("|---|---:|---:|---:|---:|");
    for (what, sharing) in [
        (
            "3 failures open A (quorum 1)",
            Sharing::Openings { quorum: 1 },
        ),
        ("A is tripped (429, Retry-After)", Sharing::TripsOnly),
    ] {
        let mut seen = Vec::with_capacity(TRIALS);
        for trial in 0..TRIALS {
            let name = format!("prop-{}-{trial}", sharing_name(sharing));
            let build = |store: &Arc<RedisStore>| {
                Breaker::builder(name.as_str())
                    .open_after_failures(3, Duration::from_secs(30))
                    .cooldown(Duration::from_secs(20))
                    .sharing(sharing)
                    .store(store.clone())
                    .build()
            };
            let (on_a, on_b) = (build(&a), build(&b));
            // Let both subscriptions settle, as in a running fleet.
            std::thread::sleep(Duration::from_millis(20));
            let opened = Instant::now();
            if sharing == Sharing::TripsOnly {
                on_a.trip(Duration::from_secs(5), "429 Too Many Requests");
            } else {
                for _ in 0..3 {
                    on_a.record_failure();
                }
            }
            assert!(on_a.check().is_err(), "A's mirror is written first");
            if let Some(d) = time_until_refusing(&on_b, opened) {
                seen.push(d);
            }
        }
        seen.sort();
        let missed = TRIALS - seen.len();
        if seen.is_empty() {
            println!("| {what} | {TRIALS} | never within 2 s | | |");
            continue;
        }
        println!(
            "| {what} | {TRIALS}{} | {:.2} ms | {:.2} ms | {:.2} ms |",
            if missed > 0 {
                format!(" ({missed} not within 2 s)")
            } else {
                String::new()
            },
            percentile(&seen, 0.5).as_secs_f64() * 1e3,
            percentile(&seen, 0.9).as_secs_f64() * 1e3,
            seen[seen.len() - 1].as_secs_f64() * 1e3,
        );
    }
}

/// Calls timed per phase of the limiter's outage.
const LIMITER_CALLS: usize = 2_000;

/// The fleet limiter through an outage, on a server of its own: time per `acquire` while
/// Redis answers, once it is killed (connections refused), and once it is frozen (SIGSTOP:
/// every round trip would wait for the timeout).
fn limiter_outage() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime for the limiter");
    let store = rt
        .block_on(
            RedisStore::builder()
                .prefix(server.key_prefix("bench-limiter"))
                .resync_every(Duration::from_secs(3600))
                .connect(&server.url()),
        )
        .expect("connect the store");
    let limiter = store
        .rate_limiter("bench", 1_000_000, Duration::from_secs(1))
        .probe_every(Duration::from_millis(50))
        .build();
    let timed = |phase: &str| {
        let before = limiter.snapshot();
        let mut took: Vec<Duration> = Vec::with_capacity(LIMITER_CALLS);
        let mut refused = 0;
        rt.block_on(async {
            for _ in 0..LIMITER_CALLS {
                let start = Instant::now();
                if limiter.acquire().await.is_err() {
                    refused += 1;
                }
                took.push(start.elapsed());
            }
        });
        took.sort();
        let after = limiter.snapshot();
        println!(
            "| {phase} | {LIMITER_CALLS} | {refused} | {} | {} | {:.1} µs | {:.1} µs | {:.2} ms |",
            after.local_admitted - before.local_admitted,
            after.store_calls - before.store_calls,
            percentile(&took, 0.5).as_secs_f64() * 1e6,
            percentile(&took, 0.99).as_secs_f64() * 1e6,
            took[took.len() - 1].as_secs_f64() * 1e3,
        );
    };
    println!();
    println!(
        "| fleet limiter, Redis ... | calls | refused | decided locally | round trips | p50 | p99 | max |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    timed("up");
    server.kill();
    timed("killed (connections refused)");
    server.restart();
    // Back on Redis once a probe finds it.
    rt.block_on(async {
        while limiter.snapshot().degraded {
            let _ = limiter.acquire().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    server.pause();
    timed("frozen (SIGSTOP, 50 ms timeout)");
    server.resume();
}

fn sharing_name(sharing: Sharing) -> &'static str {
    match sharing {
        Sharing::TripsOnly => "trips",
        _ => "openings",
    }
}

fn main() {
    let Some(server) = RedisServer::start() else {
        println!("SKIPPED: the Redis bench needs `redis-server` (apt-get install redis-server)");
        return;
    };
    let store_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime for the store");
    // No periodic re-sync during the count: every command the server sees comes from calls.
    let store = store_rt
        .block_on(
            RedisStore::builder()
                .prefix(server.key_prefix("bench-hot"))
                .resync_every(Duration::from_secs(3600))
                .connect(&server.url()),
        )
        .map(Arc::new)
        .expect("connect the store");
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .without_plots()
        .configure_from_args();
    {
        let _context = store_rt.enter();
        hot_path(&mut c, &server, &store);
    }
    propagation(&server);
    limiter_outage();
    c.final_summary();
}
