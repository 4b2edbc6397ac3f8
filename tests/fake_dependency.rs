//! Annotated functions against the test kit's fake dependency, on tokio's paused clock: the
//! breaker opens after the dependency goes down and closes once it is back, the deadline bounds
//! a slow dependency, and retries repeat a 503 but not a 429.
#![allow(
    clippy::panic,
    reason = "test helpers: an unexpected outcome fails the test"
)]

use std::time::Duration;

use tokio::time::Instant;
use velocity_policy::{DeadlineExceeded, RefusalKind, Registry, ResilienceError, Transient};
use velocity_policy_testkit::fake::{Behaviour, FakeDependency, FakeError, Phase};

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Dependency(#[from] FakeError),
    #[error(transparent)]
    Refused(#[from] ResilienceError),
    #[error(transparent)]
    TimedOut(#[from] DeadlineExceeded),
}

impl Transient for AppError {
    fn is_transient(&self) -> bool {
        match self {
            Self::Dependency(e) => e.is_transient(),
            Self::TimedOut(_) => true,
            Self::Refused(_) => false,
        }
    }
}

fn refusal(result: Result<u64, AppError>) -> RefusalKind {
    match result {
        Err(AppError::Refused(refusal)) => refusal.kind(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[velocity_policy::resilient(
    breaker(failures = 3, within = "30s", cooldown = "10s"),
    deadline = "1s"
)]
async fn find_documents(dep: &FakeDependency) -> Result<u64, AppError> {
    Ok(dep.call().await?.call)
}

/// An inline mechanism is named after its function, made unique by the module path.
const SEARCH_BREAKER: &str = "fake_dependency::find_documents";

fn breaker_state() -> String {
    let snapshot = Registry::global().snapshot();
    let breaker = snapshot
        .breakers
        .iter()
        .find(|b| b.name.as_ref() == SEARCH_BREAKER)
        .unwrap_or_else(|| panic!("no breaker {SEARCH_BREAKER}"));
    format!("{:?}", breaker.state)
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_after_the_dependency_goes_down_and_closes_once_it_is_back() {
    let dep = FakeDependency::new("search").with_latency(Duration::from_millis(20));
    for _ in 0..5 {
        assert!(find_documents(&dep).await.is_ok());
    }

    dep.set(Behaviour::down());
    for _ in 0..3 {
        assert!(matches!(
            find_documents(&dep).await,
            Err(AppError::Dependency(FakeError::Down { .. }))
        ));
    }
    assert_eq!(dep.counts().failed, 3);
    // Open: refused without calling the dependency.
    for _ in 0..10 {
        assert_eq!(
            refusal(find_documents(&dep).await),
            RefusalKind::BreakerOpen
        );
    }
    assert_eq!(dep.counts().calls, 8, "no call reached it while open");
    assert!(breaker_state().contains("Open"), "{}", breaker_state());

    // Back up; after the cooldown the first call is the probe, and it succeeds.
    dep.set(Behaviour::healthy());
    assert_eq!(
        refusal(find_documents(&dep).await),
        RefusalKind::BreakerOpen
    );
    tokio::time::advance(Duration::from_secs(10)).await;
    assert!(find_documents(&dep).await.is_ok());
    assert_eq!(dep.counts().calls, 9);
    assert!(!breaker_state().contains("Open"), "{}", breaker_state());
}

#[velocity_policy::resilient(deadline = "300ms")]
async fn bounded(dep: &FakeDependency) -> Result<u64, AppError> {
    Ok(dep.call().await?.call)
}

#[tokio::test(start_paused = true)]
async fn the_deadline_bounds_a_slow_dependency_and_the_call_is_given_up() {
    let dep = FakeDependency::new("search").with(Behaviour::slow(Duration::from_secs(2)));
    let start = Instant::now();
    assert!(matches!(bounded(&dep).await, Err(AppError::TimedOut(_))));
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    let counts = dep.counts();
    assert_eq!(
        (counts.calls, counts.cancelled, counts.in_flight),
        (1, 1, 0)
    );
}

#[velocity_policy::resilient(retry(attempts = 3, base = "1ms", cap = "2ms"), deadline = "1s")]
#[velocity_policy::idempotent]
async fn retried(dep: &FakeDependency) -> Result<u64, AppError> {
    Ok(dep.call().await?.call)
}

#[tokio::test(start_paused = true)]
async fn retries_repeat_a_503_but_not_a_429() {
    // Down for two calls, then healthy: the third attempt answers.
    let dep = FakeDependency::new("search").with(Behaviour::script([
        Phase::calls(2, Behaviour::down()),
        Phase::forever(Behaviour::healthy()),
    ]));
    assert_eq!(retried(&dep).await.ok(), Some(3));
    assert_eq!((dep.counts().failed, dep.counts().ok), (2, 1));

    let dep = FakeDependency::new("search").with(Behaviour::rate_limited(Duration::from_secs(5)));
    match retried(&dep).await {
        Err(AppError::Dependency(error)) => {
            assert_eq!(error.retry_after(), Some(Duration::from_secs(5)));
        }
        other => panic!("expected the 429, got {other:?}"),
    }
    assert_eq!(dep.counts().calls, 1, "a 429 is not retried");
}
