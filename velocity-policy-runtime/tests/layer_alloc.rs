//! The layers' admitted path allocates nothing: each mechanism layer, the request's deadline
//! layer, and a whole operation, for a service ready at once and one that waits once.
//! Measured with a counting allocator (`allocation-counter`, per thread). Feature `http`.
#![cfg(feature = "http")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::time::Duration;

use http::{Request, Response};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use velocity_policy_runtime::WorkClass;
use velocity_policy_runtime::layer::{
    BoxError, BreakerLayer, BulkheadLayer, DeadlineLayer, OperationLayer, PropagateDeadlineLayer,
    RetryLayer, ShedLayer,
};
use velocity_policy_runtime::{Breaker, Bulkhead, Deadline, Idempotent, RetryPolicy, Shedder};

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

/// Runs `$call` (an expression with `.await`s) 1,000 times to warm up (tokio grows its
/// deferred-wake list once, on the first pendings), then counts the allocations of 1,000 more.
macro_rules! allocations {
    ($call:expr) => {{
        let rt = runtime();
        rt.block_on(async {
            for _ in 0..1_000 {
                $call;
            }
        });
        allocation_counter::measure(|| {
            rt.block_on(async {
                for _ in 0..1_000 {
                    $call;
                }
            })
        })
        .count_total
    }};
}

#[test]
fn deadline_bulkhead_and_breaker_layers_allocate_nothing_when_admitted() {
    for wait in [false, true] {
        let mut svc = ServiceBuilder::new()
            .layer(DeadlineLayer::new(Duration::from_secs(2)))
            .layer(BreakerLayer::new(Breaker::builder("alloc-layer").build()))
            .layer(BulkheadLayer::new(
                Bulkhead::builder("alloc-layer")
                    .max_concurrent(8)
                    .max_queued(2)
                    .build(),
            ))
            .service_fn(move |_: Request<()>| answer(wait));
        let counted = allocations!({
            let response = svc.ready().await.unwrap().call(Request::new(())).await;
            assert!(response.unwrap().status().is_success());
        });
        // tokio's `block_on` allocates once when its future first goes pending, whatever the
        // future: the bare service is counted the same way.
        let bare = allocations!(answer(wait).await.unwrap());
        assert_eq!(counted, bare, "waits once: {wait}");
    }
}

#[test]
fn shed_retry_and_operation_layers_allocate_nothing_when_admitted() {
    for wait in [false, true] {
        let bulkhead = Bulkhead::builder("alloc-op").max_concurrent(8).build();
        let policy = std::sync::Arc::new(
            RetryPolicy::builder("alloc-op")
                .attempt_timeout(Duration::from_secs(1))
                .build(),
        );
        let shedder = std::sync::Arc::new(Shedder::new("alloc-op"));
        let service =
            tower::service_fn(move |_: u64| async move { answer(wait).await.map(|_| 1u64) });
        let mut shed = ShedLayer::new(shedder.clone(), WorkClass::Deferred)
            .load_of(bulkhead.clone())
            .layer(service);
        let mut retry = RetryLayer::new(policy.clone()).layer(Idempotent::service(service));
        let mut operation = OperationLayer::new("alloc-op", Duration::from_secs(2))
            .min_budget(Duration::from_millis(10))
            .breaker(Breaker::builder("alloc-op").build())
            .bulkhead(bulkhead)
            .shed(shedder, WorkClass::Critical, Duration::ZERO)
            .retry(policy)
            .layer(Idempotent::service(service));
        let counted = allocations!({
            assert_eq!(shed.ready().await.unwrap().call(1).await.unwrap(), 1);
            assert_eq!(retry.ready().await.unwrap().call(1).await.unwrap(), 1);
            assert_eq!(operation.ready().await.unwrap().call(1).await.unwrap(), 1);
        });
        let bare = allocations!(answer(wait).await.unwrap());
        assert_eq!(counted, bare, "waits once: {wait}");
    }
}

/// What users would pick instead, measured the same way: tower's `Timeout` + `LoadShed` +
/// `ConcurrencyLimit` allocates nothing per call either (its permit is a reference count, its
/// timer intrusive), so BENCHMARKS.md compares the two on time alone. Pinned so that table
/// stays true.
#[test]
fn tower_timeout_loadshed_and_concurrency_limit_allocate_nothing_either() {
    for wait in [false, true] {
        let mut svc = ServiceBuilder::new()
            .timeout(Duration::from_secs(2))
            .load_shed()
            .concurrency_limit(8)
            .service_fn(move |_: Request<()>| answer(wait));
        let counted = allocations!({
            let response = svc.ready().await.unwrap().call(Request::new(())).await;
            assert!(response.unwrap().status().is_success());
        });
        let bare = allocations!(answer(wait).await.unwrap());
        assert_eq!(counted, bare, "waits once {wait}");
    }
}

#[test]
fn the_rate_limit_layer_allocates_nothing_when_admitted() {
    use velocity_policy_runtime::layer::RateLimitLayer;
    use velocity_policy_runtime::limiter::RateLimiter;

    for wait in [false, true] {
        // A rate no test reaches: every call is admitted.
        let limiter =
            RateLimiter::builder("alloc-ratelimit", u32::MAX, Duration::from_secs(1)).build();
        let mut svc = ServiceBuilder::new()
            .layer(RateLimitLayer::new(limiter.clone()))
            .service_fn(move |_: Request<()>| answer(wait));
        let counted = allocations!({
            let response = svc.ready().await.unwrap().call(Request::new(())).await;
            assert!(response.unwrap().status().is_success());
        });
        let bare = allocations!(answer(wait).await.unwrap());
        assert_eq!(counted, bare, "waits once: {wait}");
        // The same, inside a whole operation.
        let mut op = OperationLayer::new("alloc-ratelimit-op", Duration::from_secs(2))
            .ratelimit(limiter.clone())
            .layer(tower::service_fn(move |_: Request<()>| answer(wait)));
        let counted = allocations!({
            let response = op.ready().await.unwrap().call(Request::new(())).await;
            assert!(response.unwrap().status().is_success());
        });
        assert_eq!(counted, bare, "operation, waits once: {wait}");
        assert_eq!(limiter.snapshot().refused, 0);
        assert_eq!(limiter.snapshot().admitted, 4_000);
    }
}

/// The hedge layer's response future must be a type that can be named, so the runtime's
/// hedging loop is boxed: one allocation per call, whether or not a hedge starts (the
/// attribute's expansion holds the loop inline and allocates nothing: tests/macro_alloc.rs).
#[test]
fn the_hedge_layer_allocates_once_per_call_its_boxed_loop() {
    use velocity_policy_runtime::hedge::Hedge;
    use velocity_policy_runtime::layer::{HedgeLayer, IdempotentLayer};
    for wait in [false, true] {
        let hedge = std::sync::Arc::new(
            Hedge::builder("alloc-hedge")
                .after(Duration::from_secs(1))
                .build(),
        );
        let mut svc = ServiceBuilder::new()
            .layer(HedgeLayer::new(hedge))
            .layer(IdempotentLayer)
            .service_fn(move |_: u64| async move { answer(wait).await.map(|_| 1u64) });
        let counted = allocations!(assert_eq!(
            svc.ready().await.unwrap().call(1).await.unwrap(),
            1
        ));
        let bare = allocations!(answer(wait).await.unwrap());
        assert_eq!(
            counted,
            bare + 1_000,
            "one box per call, waits once: {wait}"
        );
    }
}

#[test]
fn the_propagating_layer_sets_both_headers_without_allocating() {
    // Requests whose header maps have room already: what is counted is the layer's values,
    // not a map's first growth.
    fn requests() -> Vec<Request<()>> {
        (0..1_000)
            .map(|_| {
                let mut request = Request::new(());
                request.headers_mut().reserve(4);
                request
            })
            .collect()
    }
    let rt = runtime();
    let count = |propagate: bool| {
        let mut svc = tower::util::option_layer(propagate.then(PropagateDeadlineLayer::new)).layer(
            tower::service_fn(move |request: Request<()>| async move {
                let sent = request.headers().get("x-deadline-ms").is_some()
                    && request.headers().get("grpc-timeout").is_some();
                Ok::<_, BoxError>(sent)
            }),
        );
        let batch = requests();
        let deadline = Deadline::after(Duration::from_secs(2));
        let counted = allocation_counter::measure(|| {
            rt.block_on(deadline.scope(async {
                for request in batch {
                    let sent = svc.ready().await.unwrap().call(request).await.unwrap();
                    assert_eq!(sent, propagate);
                }
            }));
        });
        counted.count_total
    };
    // Warm up (the table of values is written on the first call), then compare with the bare
    // service counted the same way.
    count(true);
    assert_eq!(count(true), count(false));
}
