//! Each mechanism as a tower layer: its refusal distinct by type and kind behind axum's
//! `HandleErrorLayer` on a real server, its state shared with the registry's entry, and the
//! retry layer's rules (one budget, never a refusal). Feature `http` (for the server test).
#![cfg(feature = "http")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use velocity_policy_runtime::WorkClass;
use velocity_policy_runtime::layer::{
    BoxError, BreakerLayer, BulkheadLayer, DeadlineLayer, IdempotentLayer, OperationLayer,
    RetryLayer, ShedLayer,
};
use velocity_policy_runtime::{
    DeadlineExceeded, Idempotent, RefusalKind, Registry, ResilienceError,
};
use velocity_policy_testkit::http::{Server, client, get as fetch};

/// What a service maps the layers' errors to: the three outcomes told apart by type.
async fn map_error(error: BoxError) -> Response {
    if let Some(refusal) = error.downcast_ref::<ResilienceError>() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [("x-refusal", refusal.kind().as_str())],
        )
            .into_response()
    } else if error.is::<DeadlineExceeded>() {
        (StatusCode::GATEWAY_TIMEOUT, "deadline exceeded").into_response()
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response()
    }
}

async fn refusal_of(url: String) -> (u16, String) {
    let response = client().get(url.parse().unwrap()).await.unwrap();
    let kind = response
        .headers()
        .get("x-refusal")
        .map_or("-", |v| v.to_str().unwrap())
        .to_owned();
    (response.status().as_u16(), kind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_layer_refuses_with_its_own_kind_and_handle_error_maps_them() {
    let registry = Registry::new();
    let breaker = registry.breaker("layers-breaker", |b| b);
    let bulkhead = registry.bulkhead("layers-bulkhead", |b| b.max_concurrent(1));
    let shedder = registry.shedder("layers-shed", Default::default());
    let handler = get(|| async { "ran" });
    let app = Router::new()
        .route(
            "/breaker",
            handler.clone().layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(map_error))
                    .layer(BreakerLayer::new(breaker.clone())),
            ),
        )
        .route(
            "/bulkhead",
            handler.clone().layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(map_error))
                    .layer(BulkheadLayer::new(bulkhead.clone())),
            ),
        )
        .route(
            "/shed",
            handler.clone().layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(map_error))
                    .layer(
                        ShedLayer::new(shedder, WorkClass::Background).load_of(bulkhead.clone()),
                    ),
            ),
        )
        .route(
            "/operation",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            })
            .layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(map_error))
                    .layer(OperationLayer::new("slow", Duration::from_millis(50))),
            ),
        )
        .route(
            "/budget",
            handler.layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(map_error))
                    .layer(
                        OperationLayer::new("needs_time", Duration::from_secs(1))
                            .min_budget(Duration::from_millis(500)),
                    ),
            ),
        )
        .layer(DeadlineLayer::new(Duration::from_millis(200)));
    let server = Server::start(app).await;

    // Open for business: every route runs its handler.
    assert_eq!(
        fetch(&client(), &server.url("/breaker")).await,
        (200, "ran".into())
    );
    assert_eq!(
        fetch(&client(), &server.url("/bulkhead")).await,
        (200, "ran".into())
    );
    assert_eq!(
        fetch(&client(), &server.url("/shed")).await,
        (200, "ran".into())
    );

    breaker.trip(Duration::from_secs(30), "maintenance");
    let held = bulkhead.try_acquire_owned().unwrap();
    assert_eq!(
        refusal_of(server.url("/breaker")).await,
        (503, "breaker_open".into())
    );
    assert_eq!(
        refusal_of(server.url("/bulkhead")).await,
        (503, "bulkhead_full".into())
    );
    assert_eq!(refusal_of(server.url("/shed")).await, (503, "shed".into()));
    assert_eq!(
        refusal_of(server.url("/budget")).await,
        (503, "insufficient_budget".into())
    );
    assert_eq!(
        refusal_of(server.url("/operation")).await,
        (504, "-".into())
    );
    drop(held);

    // The layers counted into the registry's entries.
    let snapshot = registry.snapshot();
    assert_eq!(snapshot.breakers[0].refusals, 1);
    assert_eq!(snapshot.bulkheads[0].refused_full, 1);
    server.stop().await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_layer_and_another_handle_of_the_same_name_share_one_breaker() {
    let registry = Registry::global();
    // What `#[resilient(breaker = "layers-shared")]` looks up, and what a layer is given.
    let for_layer = registry.breaker("layers-shared", |b| {
        b.open_after_failures(2, Duration::from_secs(10))
    });
    let mut svc = BreakerLayer::new(for_layer).layer(tower::service_fn(|fail: bool| async move {
        if fail {
            Err(BoxError::from("boom"))
        } else {
            Ok(())
        }
    }));
    for _ in 0..2 {
        assert!(svc.ready().await.unwrap().call(true).await.is_err());
    }
    let attribute_side = registry.find_breaker("layers-shared").unwrap();
    assert_eq!(
        attribute_side.check().unwrap_err().kind(),
        RefusalKind::BreakerOpen
    );
    let error = svc.ready().await.unwrap().call(false).await.unwrap_err();
    assert_eq!(
        error.downcast_ref::<ResilienceError>().unwrap().kind(),
        RefusalKind::BreakerOpen
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_refusal_from_below_is_not_a_breaker_failure() {
    let breaker = velocity_policy_runtime::Breaker::builder("below")
        .open_after_failures(1, Duration::from_secs(10))
        .build();
    let bulkhead = velocity_policy_runtime::Bulkhead::builder("below")
        .max_concurrent(1)
        .build();
    let _held = bulkhead.try_acquire_owned().unwrap();
    let mut svc = ServiceBuilder::new()
        .layer(BreakerLayer::new(breaker.clone()))
        .layer(BulkheadLayer::new(bulkhead))
        .service_fn(|()| async { Ok::<_, BoxError>(()) });
    let error = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert_eq!(
        error.downcast_ref::<ResilienceError>().unwrap().kind(),
        RefusalKind::BulkheadFull
    );
    assert!(
        breaker.check().is_ok(),
        "the work never ran: nothing to count"
    );
}

fn flaky(
    fail_first: u32,
    calls: Arc<AtomicU32>,
) -> impl Service<u32, Response = u32, Error = BoxError, Future = impl Send> + Clone {
    tower::service_fn(move |x: u32| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            if n <= fail_first {
                Err(BoxError::from(std::io::Error::from(
                    std::io::ErrorKind::TimedOut,
                )))
            } else {
                Ok::<_, BoxError>(x)
            }
        }
    })
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_retry_layer_retries_transient_failures_within_one_budget() {
    let policy = Arc::new(
        velocity_policy_runtime::RetryPolicy::builder("layers-retry")
            .attempts(3)
            .backoff(Duration::from_millis(10), Duration::from_millis(20))
            .build(),
    );
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy.clone()))
        .layer(IdempotentLayer)
        .service(flaky(2, calls.clone()));
    assert_eq!(svc.ready().await.unwrap().call(7).await.unwrap(), 7);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(policy.snapshot().retries, 2);

    // Every attempt fails: the policy's attempts bound it, and the last error stands.
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc =
        RetryLayer::new(policy.clone()).layer(Idempotent::service(flaky(10, calls.clone())));
    let error = svc.ready().await.unwrap().call(7).await.unwrap_err();
    assert!(error.downcast_ref::<std::io::Error>().is_some(), "{error}");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(policy.snapshot().exhausted, 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_retry_layer_never_retries_a_refusal_and_keeps_to_the_deadline() {
    let policy = Arc::new(
        velocity_policy_runtime::RetryPolicy::builder("layers-retry-refusal")
            .attempts(5)
            .backoff(Duration::from_millis(10), Duration::from_millis(20))
            .attempt_timeout(Duration::from_millis(100))
            .build(),
    );
    let breaker = velocity_policy_runtime::Breaker::builder("layers-retry-refusal").build();
    breaker.trip(Duration::from_secs(10), "told to back off");
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy.clone()))
        .layer(IdempotentLayer)
        .layer(BreakerLayer::new(breaker))
        .service(flaky(0, calls.clone()));
    let error = svc.ready().await.unwrap().call(1).await.unwrap_err();
    assert_eq!(
        error.downcast_ref::<ResilienceError>().unwrap().kind(),
        RefusalKind::BreakerOpen
    );
    assert_eq!(policy.snapshot().retries, 0);

    // A service that never answers: attempts time out (retryable) until the call's 250 ms
    // budget is spent, never past it.
    let started = tokio::time::Instant::now();
    let hangs = tower::service_fn(|()| std::future::pending::<Result<(), Infallible>>());
    let mut svc = RetryLayer::new(policy.clone())
        .budget(Duration::from_millis(250))
        .layer(Idempotent::service(hangs));
    let error = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert!(error.is::<DeadlineExceeded>(), "{error}");
    assert!(
        started.elapsed() <= Duration::from_millis(251),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_bulkhead_layer_takes_its_slot_in_call_not_in_poll_ready() {
    let bulkhead = velocity_policy_runtime::Bulkhead::builder("layers-ready-slot")
        .max_concurrent(1)
        .build();
    let mut svc = BulkheadLayer::new(bulkhead.clone())
        .layer(tower::service_fn(|()| async { Ok::<_, BoxError>(()) }));
    // Polled ready, then not called (a layer above refused, say): the one slot stays free for
    // every other user of the bulkhead.
    svc.ready().await.unwrap();
    assert!(bulkhead.try_acquire().is_ok(), "readiness holds no slot");
    svc.call(()).await.unwrap();
    // With the slot held elsewhere, the call is refused.
    let held = bulkhead.try_acquire_owned().unwrap();
    let error = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert_eq!(
        error.downcast_ref::<ResilienceError>().unwrap().kind(),
        RefusalKind::BulkheadFull
    );
    drop(held);
    svc.ready().await.unwrap().call(()).await.unwrap();
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_breaker_layer_looks_in_poll_ready_and_checks_an_open_breaker_in_call() {
    let breaker = velocity_policy_runtime::Breaker::builder("layers-ready-look")
        .cooldown(Duration::from_secs(1))
        .build();
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = BreakerLayer::new(breaker.clone()).layer(tower::service_fn({
        let calls = calls.clone();
        move |()| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, BoxError>(()) }
        }
    }));
    breaker.trip(Duration::from_secs(1), "told to back off");
    let error = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert_eq!(
        error.downcast_ref::<ResilienceError>().unwrap().kind(),
        RefusalKind::BreakerOpen
    );
    assert_eq!(breaker.snapshot().refusals, 1, "one refusal, counted once");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    // Looked at while open; the cooldown ends before the call, which closes it and runs.
    svc.ready().await.unwrap();
    tokio::time::advance(Duration::from_millis(1_100)).await;
    svc.call(()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // Looked at while closed: the next call is admitted at once.
    svc.ready().await.unwrap().call(()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
