//! The attributes under a renamed dependency (`pol`), run: each expansion reached the facade
//! through the name this crate gave it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use policy_renamed::{CatalogError, price, reindex, stock};

#[tokio::test(start_paused = true)]
async fn critical_runs_under_its_deadline() {
    assert!(matches!(price(Duration::from_millis(10)).await, Ok(42)));
    assert!(matches!(
        price(Duration::from_secs(1)).await,
        Err(CatalogError::TimedOut(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn resilient_retries_then_its_breaker_opens() {
    // One failure, then a success: the retry ran the idempotent call twice.
    let calls = Arc::new(AtomicU32::new(0));
    assert!(matches!(stock(calls.clone(), 1).await, Ok(2)));
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // Every attempt fails: the breaker (two failures within 30s) opens, and the next call is
    // refused without running.
    let failing = Arc::new(AtomicU32::new(0));
    let _ = stock(failing.clone(), u32::MAX).await;
    let ran = failing.load(Ordering::SeqCst);
    assert!(ran >= 1);
    assert!(matches!(
        stock(failing.clone(), u32::MAX).await,
        Err(CatalogError::Refused(_))
    ));
    assert_eq!(
        failing.load(Ordering::SeqCst),
        ran,
        "a refused call never ran"
    );
}

#[tokio::test(start_paused = true)]
async fn deferred_is_scheduled_and_runs_later() {
    let done = Arc::new(tokio::sync::Notify::new());
    let () = reindex(done.clone());
    // The paused clock jumps ahead when every task is idle: a body that never ran times out.
    tokio::time::timeout(Duration::from_secs(5), done.notified())
        .await
        .expect("the deferred body ran");
}
