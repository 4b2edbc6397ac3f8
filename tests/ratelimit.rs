//! Rate limits that run: `ratelimit = "name"` on an attribute, `ratelimit = NAME` in a `.policy`
//! operation (tests/policies/layer.policy), `operation_layer!` and a `RateLimitLayer` share one
//! registry entry by name; a limited call is a refusal with the wait that would admit it; the
//! admitted path allocates nothing. Features `ratelimit` and `tower`.
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    reason = "test helpers: an unexpected outcome fails the test"
)]

use std::time::Duration;

use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use velocity_policy::layer::{BoxError, RateLimitLayer};
use velocity_policy::{DeadlineExceeded, RefusalKind, Registry, ResilienceError};

#[derive(Debug)]
enum AppError {
    Refused(ResilienceError),
    TimedOut,
}

impl From<ResilienceError> for AppError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for AppError {
    fn from(_: DeadlineExceeded) -> Self {
        Self::TimedOut
    }
}

/// Binds by name to the file's operation: its rate limit applies.
#[velocity_policy::operation("limited_sign_up")]
async fn sign_up(id: u64) -> Result<u64, AppError> {
    Ok(id)
}

/// Names the file's rate limit from the attribute.
#[velocity_policy::critical(ratelimit = "shared_signups", deadline = "1s")]
async fn sign_up_again(id: u64) -> Result<u64, AppError> {
    Ok(id)
}

fn refused(outcome: Result<u64, AppError>) -> ResilienceError {
    match outcome {
        Err(AppError::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn boxed_refusal(error: &BoxError) -> &ResilienceError {
    error
        .downcast_ref::<ResilienceError>()
        .unwrap_or_else(|| panic!("expected a refusal, got {error:?}"))
}

#[tokio::test(start_paused = true)]
async fn the_attribute_the_operation_and_the_layers_share_one_state_by_name() {
    // 4 per second: a burst of 4, then one every 250 ms.
    sign_up(1).await.unwrap();
    sign_up_again(2).await.unwrap();
    let limiter = Registry::global()
        .find_rate_limiter("shared_signups")
        .expect("the attributes registered the file's rate limit");
    assert_eq!(
        (limiter.limit(), limiter.per()),
        (4, Duration::from_secs(1))
    );
    let mut layered = ServiceBuilder::new()
        .layer(RateLimitLayer::new(limiter.clone()))
        .service_fn(|id: u64| async move { Ok::<_, BoxError>(id) });
    assert_eq!(layered.ready().await.unwrap().call(3).await.unwrap(), 3);
    let mut operation = velocity_policy::operation_layer!("limited_sign_up").layer(
        tower::service_fn(|id: u64| async move { Ok::<_, BoxError>(id) }),
    );
    assert_eq!(operation.ready().await.unwrap().call(4).await.unwrap(), 4);

    // The fifth call, whichever interface makes it, is over the shared rate.
    let refusal = refused(sign_up(5).await);
    assert_eq!(refusal.kind(), RefusalKind::RateLimited);
    assert_eq!(refusal.name(), "shared_signups");
    assert_eq!(refusal.retry_after(), Some(Duration::from_millis(250)));
    let error = layered.ready().await.unwrap().call(6).await.unwrap_err();
    assert_eq!(
        boxed_refusal(&error).retry_after(),
        Some(Duration::from_millis(250))
    );
    let error = operation.ready().await.unwrap().call(7).await.unwrap_err();
    assert_eq!(boxed_refusal(&error).kind(), RefusalKind::RateLimited);

    // It refills: one more call a quarter second later, and the wait counts down.
    tokio::time::advance(Duration::from_millis(100)).await;
    let refusal = refused(sign_up_again(8).await);
    assert_eq!(refusal.retry_after(), Some(Duration::from_millis(150)));
    tokio::time::advance(Duration::from_millis(150)).await;
    sign_up_again(9).await.unwrap();
    refused(sign_up(10).await);

    let snapshot = Registry::global().snapshot();
    let row = snapshot
        .limiters
        .iter()
        .find(|row| &*row.name == "shared_signups")
        .expect("the limiter is in the snapshot");
    assert_eq!((row.admitted, row.refused), (5, 5));
    assert_eq!(row.scope, "in_process");
    let json = serde_json::to_value(row).unwrap();
    assert_eq!(json["config"]["per_ms"], 1000.0);
}

#[velocity_policy::critical(ratelimit = "shared_signups_alloc", deadline = "1s")]
async fn admitted(id: u64) -> Result<u64, AppError> {
    Ok(id)
}

#[test]
fn an_admitted_call_allocates_nothing() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        for i in 0..1_000 {
            admitted(i).await.unwrap();
        }
    });
    let counted = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                assert_eq!(admitted(i).await.unwrap(), i);
            }
        });
    });
    assert_eq!(counted.count_total, 0, "{counted:?}");
}
