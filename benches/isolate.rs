//! Inline against isolated execution of the same function, across input sizes, hand-off
//! included: the input is moved into the pool and the result moved out. Where the work's own
//! time dwarfs the hand-off (and exceeds a poll budget), isolation starts to pay.
//!
//! `cargo bench --bench isolate`; the crossover table itself: `cargo run --release --example
//! isolate_crossover`.
#![allow(
    clippy::expect_used,
    reason = "a benchmark that cannot start its runtime cannot measure"
)]

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use velocity_policy::isolate::IsolatedPool;

/// The work: a checksum over the input, consuming it (as a parser or encoder would).
fn checksum(input: Vec<u8>) -> u64 {
    input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn input(size: usize) -> Vec<u8> {
    (0..size).map(|i| i as u8).collect()
}

fn inline_vs_isolated(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let pool = IsolatedPool::builder("bench").max_concurrent(2).build();
    let mut group = c.benchmark_group("isolate");
    group
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20);
    for size in [1usize << 10, 1 << 14, 1 << 18, 1 << 22] {
        group.bench_with_input(BenchmarkId::new("inline", size), &size, |b, &size| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let data = input(size);
                    let started = Instant::now();
                    std::hint::black_box(checksum(std::hint::black_box(data)));
                    total += started.elapsed();
                }
                total
            });
        });
        group.bench_with_input(BenchmarkId::new("isolated", size), &size, |b, &size| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let data = input(size);
                        let started = Instant::now();
                        let out = pool.run(move || checksum(data)).await;
                        total += started.elapsed();
                        std::hint::black_box(out.is_ok());
                    }
                    total
                })
            });
        });
    }
    group.finish();
}

criterion_group!(benches, inline_vs_isolated);
criterion_main!(benches);
