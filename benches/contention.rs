//! Two OS threads calling through one shared instance of each contender: one breaker and one
//! bulkhead shared by both threads, against one tower service (each thread calls its own clone,
//! the clones share the concurrency limit's semaphore), one `failsafe` breaker and one
//! semaphore. Each thread drives its calls on its own current-thread runtime, as a
//! thread-per-core server does. Reported as aggregate calls per second (criterion's
//! throughput: each iteration is one call on each thread).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "bench code: a failed setup is a failed run"
)]
#![allow(missing_docs, reason = "criterion_group! generates undocumented items")]

mod common;

use std::sync::Barrier;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use policy::Deadline;

use common::{Contender, Op, REQUEST_BUDGET, contenders, runtime};

const THREADS: usize = 2;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .without_plots()
}

fn two_threads(c: &mut Criterion) {
    let shared = contenders(Op::Ready);
    let mut g = c.benchmark_group("contention_2_threads");
    g.throughput(Throughput::Elements(THREADS as u64));
    for who in Contender::CONTENTION {
        g.bench_function(who.name(), |b| {
            b.iter_custom(|n| {
                let start = Barrier::new(THREADS);
                std::thread::scope(|s| {
                    let handles: Vec<_> = (0..THREADS)
                        .map(|_| {
                            let mut mine = shared.clone();
                            let start = &start;
                            s.spawn(move || {
                                let rt = runtime();
                                let request =
                                    rt.block_on(async { Deadline::after(REQUEST_BUDGET) });
                                // Warm this thread's runtime before the clock starts.
                                mine.drive(&rt, request, who, 100);
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
                })
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = two_threads
}
criterion_main!(benches);
