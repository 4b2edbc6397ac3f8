//! A call that never answers, through a [`BreakerLayer`]: the layer above that stops waiting
//! (a deadline in scope, a retry's attempt timeout, a whole operation's deadline) drops the
//! breaker's future, and the breaker records that expiry as the attribute does, a failure, or a
//! caller's expiry when the caller's budget decided it. A call dropped before its deadline
//! records nothing. Feature `tower`; tokio's paused clock.
#![cfg(feature = "tower")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use velocity_policy_runtime::breaker::BreakerState;
use velocity_policy_runtime::layer::{BreakerLayer, IdempotentLayer, OperationLayer, RetryLayer};
use velocity_policy_runtime::{
    Breaker, Deadline, DeadlineExceeded, Idempotent, RefusalKind, ResilienceError, RetryPolicy,
};

const MS: Duration = Duration::from_millis(1);

/// A dependency that never answers (a blackhole), counting the calls it is given.
fn hangs(calls: Arc<AtomicU32>) -> impl Service<(), Response = (), Error = Infallible> + Clone {
    tower::service_fn(move |()| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<Result<(), Infallible>>()
    })
}

fn breaker(name: &str) -> Breaker {
    Breaker::builder(name)
        .open_after_failures(3, Duration::from_secs(10))
        .cooldown(Duration::from_secs(1))
        .build()
}

/// A retry policy of three attempts of at most `attempt_timeout` each, with pauses of 1 or 2 ms.
fn three_attempts(name: &str, attempt_timeout: Duration) -> Arc<RetryPolicy> {
    Arc::new(
        RetryPolicy::builder(name)
            .attempts(3)
            .backoff(MS, 2 * MS)
            .attempt_timeout(attempt_timeout)
            .build(),
    )
}

fn refusal(error: &velocity_policy_runtime::layer::BoxError) -> Option<RefusalKind> {
    error
        .downcast_ref::<ResilienceError>()
        .map(ResilienceError::kind)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn calls_a_deadline_above_gives_up_on_open_the_breaker() {
    let breaker = breaker("expiry-deadline");
    let calls = Arc::new(AtomicU32::new(0));
    let svc = BreakerLayer::new(breaker.clone()).layer(hangs(calls.clone()));
    for n in 1..=3 {
        let out = Deadline::after(100 * MS)
            .run_in_scope(svc.clone().oneshot(()))
            .await;
        assert!(out.is_err(), "the deadline above ended call {n}");
        assert_eq!(breaker.snapshot().failures, n, "call {n} is a failure");
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    assert_eq!(breaker.snapshot().caller_expiries, 0);
    // Open: the next call is refused at once and the dependency never sees it.
    let error = svc.clone().oneshot(()).await.unwrap_err();
    assert_eq!(refusal(&error), Some(RefusalKind::BreakerOpen));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_dropped_before_its_deadline_records_nothing() {
    let breaker = breaker("expiry-dropped-early");
    let svc = BreakerLayer::new(breaker.clone()).layer(hangs(Arc::default()));
    for _ in 0..5 {
        // The deadline in scope has a second left; something else (a hedge's faster attempt, a
        // caller gone) stops waiting after 10 ms.
        let call = Deadline::after(Duration::from_secs(1)).run_in_scope(svc.clone().oneshot(()));
        assert!(tokio::time::timeout(10 * MS, call).await.is_err());
    }
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.failures, snapshot.caller_expiries), (0, 0));
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_callers_short_deadline_never_opens_the_breaker() {
    let breaker = breaker("expiry-caller");
    let calls = Arc::new(AtomicU32::new(0));
    let svc = BreakerLayer::new(breaker.clone()).layer(hangs(calls.clone()));
    for _ in 0..5 {
        // The caller sent 50 ms; the call's own bound would have been a second.
        let deadline = Deadline::from_caller(50 * MS).child(Duration::from_secs(1));
        assert!(deadline.is_callers());
        let out = deadline.run_in_scope(svc.clone().oneshot(())).await;
        assert!(out.is_err());
    }
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.failures, snapshot.caller_expiries), (0, 5));
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        5,
        "every call reached the dependency"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retry_layers_attempt_timeouts_open_the_breaker_below_it() {
    let breaker = breaker("expiry-retry");
    let policy = three_attempts("expiry-retry", 100 * MS);
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy.clone()))
        .layer(IdempotentLayer)
        .layer(BreakerLayer::new(breaker.clone()))
        .service(hangs(calls.clone()));
    // Three attempts, each timed out: three failures, and the breaker opens on the third.
    let error = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert!(error.is::<DeadlineExceeded>(), "{error}");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(breaker.snapshot().failures, 3);
    assert_eq!(breaker.state(), BreakerState::Open);
    // The next request is refused at once: no attempt pays the timeout again.
    let started = tokio::time::Instant::now();
    let error = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert_eq!(refusal(&error), Some(RefusalKind::BreakerOpen));
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_operation_layers_attempts_that_hang_open_its_breaker() {
    let breaker = breaker("expiry-operation");
    let policy = three_attempts("expiry-operation", 150 * MS);
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = OperationLayer::new("expiry-operation", Duration::from_secs(1))
        .breaker(breaker.clone())
        .retry(policy)
        .layer(Idempotent::service(hangs(calls.clone())));
    let error = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert!(error.is::<DeadlineExceeded>(), "{error}");
    assert_eq!(
        (calls.load(Ordering::SeqCst), breaker.snapshot().failures),
        (3, 3)
    );
    assert_eq!(breaker.state(), BreakerState::Open);
    let error = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert_eq!(refusal(&error), Some(RefusalKind::BreakerOpen));

    // Without a retry, the operation's own deadline is the one that gives up.
    let breaker = self::breaker("expiry-operation-once");
    let mut svc = OperationLayer::new("expiry-operation-once", 200 * MS)
        .breaker(breaker.clone())
        .layer(hangs(Arc::default()));
    for _ in 0..3 {
        let error = svc.ready().await.unwrap().call(()).await.unwrap_err();
        assert!(error.is::<DeadlineExceeded>(), "{error}");
    }
    assert_eq!(breaker.state(), BreakerState::Open);
}
