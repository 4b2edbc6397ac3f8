//! A hedged call whose first attempt answers at once, the common case a hedge must keep cheap:
//! the attribute's expansion (`#[critical(hedge(after = "50ms"))]`, the hedging loop inline),
//! our `HedgeLayer` (the same loop, boxed), and tower's `Hedge` (what users would pick
//! instead: its latency histogram from `hdrhistogram`, rotated per period), beside the bare
//! call. No hedge fires in any of them. See BENCHMARKS.md, "Hedging".
#![allow(
    clippy::unwrap_used,
    reason = "bench code: a failed call is a failed run"
)]
#![allow(missing_docs, reason = "criterion_group! generates undocumented items")]

use std::time::Duration;

use criterion::{Criterion, criterion_group};
use tower::{Service, ServiceBuilder, ServiceExt};
use velocity_policy::layer::{BoxError, HedgeLayer, IdempotentLayer};
use velocity_policy::{DeadlineExceeded, Registry, ResilienceError};

#[derive(Debug)]
struct Failed;

impl From<ResilienceError> for Failed {
    fn from(_: ResilienceError) -> Self {
        Self
    }
}

impl From<DeadlineExceeded> for Failed {
    fn from(_: DeadlineExceeded) -> Self {
        Self
    }
}

#[velocity_policy::critical(hedge(after = "50ms"), deadline = "1s")]
#[velocity_policy::idempotent]
async fn hedged(id: u64) -> Result<u64, Failed> {
    Ok(id + 1)
}

/// The same operation without its hedge, for what the hedge itself adds.
#[velocity_policy::critical(deadline = "1s")]
async fn unhedged(id: u64) -> Result<u64, Failed> {
    Ok(id + 1)
}

/// tower's policy: every request may be hedged.
#[derive(Clone)]
struct Always;

impl tower::hedge::Policy<u64> for Always {
    fn clone_request(&self, request: &u64) -> Option<u64> {
        Some(*request)
    }

    fn can_retry(&self, _: &u64) -> bool {
        true
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .without_plots()
}

fn answered_at_once(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let bare = || tower::service_fn(|id: u64| async move { Ok::<_, BoxError>(id + 1) });
    let hedge = Registry::global().hedge("bench-hedge", |h| h.after(Duration::from_millis(50)));
    let mut ours_layer = ServiceBuilder::new()
        .layer(HedgeLayer::new(hedge))
        .layer(IdempotentLayer)
        .service(bare());
    // tower's: hedge past the p95 of the last 10 s once 10 latencies were recorded.
    let mut tower_hedge = {
        let _entered = rt.enter();
        tower::hedge::Hedge::new(bare(), Always, 10, 0.95, Duration::from_secs(10))
    };
    let mut plain = bare();
    let mut g = c.benchmark_group("hedge");
    g.bench_function("bare_service", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for i in 0..n {
                    std::hint::black_box(plain.ready().await.unwrap().call(i).await.unwrap());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("ours_attribute", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for i in 0..n {
                    std::hint::black_box(hedged(i).await.unwrap());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("ours_attribute_without_hedge", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for i in 0..n {
                    std::hint::black_box(unhedged(i).await.unwrap());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("ours_hedge_layer", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for i in 0..n {
                    std::hint::black_box(ours_layer.ready().await.unwrap().call(i).await.unwrap());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("tower_hedge", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for i in 0..n {
                    std::hint::black_box(tower_hedge.ready().await.unwrap().call(i).await.unwrap());
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
    targets = answered_at_once
}

fn main() {
    if std::env::args().any(|a| a == "--sizes") {
        // The futures' sizes, in bytes: a future is moved into place when it is awaited.
        println!("hedged: {} bytes", std::mem::size_of_val(&hedged(1)));
        println!("unhedged: {} bytes", std::mem::size_of_val(&unhedged(1)));
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
