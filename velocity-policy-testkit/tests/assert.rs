//! The assertion helpers against functions whose mechanisms behave, and against functions
//! without the mechanism each helper asserts, which must make the helper panic.
#![allow(
    clippy::panic,
    reason = "test helpers: an unexpected outcome fails the test"
)]

use std::time::Duration;

use velocity_policy::{DeadlineExceeded, ResilienceError};
use velocity_policy_testkit::assert::{
    Attempts, breaker_opens_after, critical_never_shed, no_call_outlives, retries_within_budget,
};
use velocity_policy_testkit::isolation::isolate;

#[derive(Debug)]
enum AppError {
    Refused,
    TimedOut,
    Down,
}

impl From<ResilienceError> for AppError {
    fn from(_: ResilienceError) -> Self {
        Self::Refused
    }
}

impl From<DeadlineExceeded> for AppError {
    fn from(_: DeadlineExceeded) -> Self {
        Self::TimedOut
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl velocity_policy::Transient for AppError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::Down | Self::TimedOut)
    }
}

// --- breaker_opens_after

/// `breaker lookup`: 3 failures within 10 s, open for 5 s (policies/kit.policy).
#[velocity_policy::resilient(breaker = "lookup")]
async fn lookup() -> Result<u32, AppError> {
    Err(AppError::Down)
}

/// No breaker at all.
async fn unguarded() -> Result<u32, AppError> {
    Err(AppError::Down)
}

/// A breaker of 5 failures, asserted as 3 (an inline breaker: named `assert::five_failures`,
/// found by its last segment).
#[velocity_policy::resilient(breaker(failures = 5, within = "10s", cooldown = "5s"))]
async fn five_failures() -> Result<u32, AppError> {
    Err(AppError::Down)
}

/// A breaker whose window is a minute, asserted as 10 s.
#[velocity_policy::resilient(breaker(failures = 3, within = "60s", cooldown = "5s"))]
async fn long_window() -> Result<u32, AppError> {
    Err(AppError::Down)
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_after_its_failures_in_its_window() {
    let _test = isolate();
    let report = breaker_opens_after("lookup", 3, Duration::from_secs(10), lookup).await;
    assert_eq!(report.opened_after, 3);
    assert_eq!(report.spread_failures, 2);
    assert_eq!(report.refused_after_opening, 1);
    assert_eq!(report.open_for, Some(Duration::from_secs(5)));
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "never used a breaker named `lookup`")]
async fn a_function_without_the_breaker_fails_the_assertion() {
    let _test = isolate();
    breaker_opens_after("lookup", 3, Duration::from_secs(10), unguarded).await;
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "was still closed after 3 failures")]
async fn a_breaker_with_another_count_fails_the_assertion() {
    let _test = isolate();
    breaker_opens_after("five_failures", 3, Duration::from_secs(10), five_failures).await;
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "its window is longer than 10s")]
async fn a_breaker_with_a_longer_window_fails_the_assertion() {
    let _test = isolate();
    breaker_opens_after("long_window", 3, Duration::from_secs(10), long_window).await;
}

/// A ratio breaker: the count helper says it cannot judge it.
#[velocity_policy::resilient(breaker(ratio = 0.5, min_calls = 4, within = "10s", cooldown = "5s"))]
async fn by_ratio() -> Result<u32, AppError> {
    Err(AppError::Down)
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "opens on a failure ratio (50% of at least 4 calls within 10s)")]
async fn a_ratio_breaker_is_named_as_such() {
    let _test = isolate();
    breaker_opens_after("by_ratio", 3, Duration::from_secs(10), by_ratio).await;
}

#[tokio::test]
#[should_panic(expected = "tokio's clock is running")]
async fn the_helpers_refuse_a_running_clock() {
    breaker_opens_after("lookup", 3, Duration::from_secs(10), lookup).await;
}

// --- no_call_outlives

#[velocity_policy::critical(deadline = "2s")]
async fn hangs() -> Result<(), AppError> {
    tokio::time::sleep(Duration::from_secs(30)).await;
    Ok(())
}

async fn hangs_unbounded() -> Result<(), AppError> {
    tokio::time::sleep(Duration::from_secs(30)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn no_call_outlives_the_request_deadline() {
    let report = no_call_outlives(Duration::from_millis(300), 3, hangs).await;
    assert_eq!(report.elapsed, vec![Duration::from_millis(300); 3]);
    // The function's own deadline, when tighter than the request's, bounds it.
    let report = no_call_outlives(Duration::from_secs(10), 1, hangs).await;
    assert_eq!(report.max, Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
#[should_panic(
    expected = "3 of 3 calls outlived the request deadline of 300ms: the longest took 30s"
)]
async fn a_function_without_a_deadline_fails_the_assertion() {
    no_call_outlives(Duration::from_millis(300), 3, hangs_unbounded).await;
}

// --- retries_within_budget

/// `retry flaky`: 3 attempts (policies/kit.policy).
#[velocity_policy::resilient(retry = "flaky", deadline = "2s")]
#[velocity_policy::idempotent]
async fn fetch(dependency: Attempts) -> Result<(), AppError> {
    dependency.hit();
    Err(AppError::Down)
}

/// The same, with a hand-written retry loop inside: five attempts per call.
#[velocity_policy::resilient(retry = "flaky", deadline = "2s")]
#[velocity_policy::idempotent]
async fn fetch_retrying_by_hand(dependency: Attempts) -> Result<(), AppError> {
    for _ in 0..5 {
        dependency.hit();
    }
    Err(AppError::Down)
}

#[tokio::test(start_paused = true)]
async fn retries_stay_within_the_attempts_and_the_allowance() {
    let _test = isolate();
    let dependency = Attempts::new();
    let report =
        retries_within_budget("flaky", 100, &dependency, || fetch(dependency.clone())).await;
    assert!(
        report.attempts.iter().all(|a| (1..=3).contains(a)),
        "{report:?}"
    );
    assert!(report.retries <= report.allowed, "{report:?}");
    // The default allowance (20% + 10/s over 10 s: 120 for 100 calls) runs out before 100
    // calls' worth of 2 retries each: the policy stopped retrying, and said so.
    assert!(report.stopped_by_allowance > 0, "{report:?}");
    assert_eq!(report.max_attempts, 3);
}

#[tokio::test(start_paused = true)]
#[should_panic(
    expected = "reached the dependency 15 times, but retry policy `flaky` allows 3 attempts"
)]
async fn a_hand_written_retry_fails_the_assertion() {
    let _test = isolate();
    let dependency = Attempts::new();
    retries_within_budget("flaky", 1, &dependency, || {
        fetch_retrying_by_hand(dependency.clone())
    })
    .await;
}

// --- critical_never_shed

/// `bulkhead pool`: 4 slots (policies/kit.policy).
#[velocity_policy::critical(bulkhead = "pool", deadline = "1s")]
async fn save() -> Result<(), AppError> {
    Ok(())
}

/// Deferred work behind the same bulkhead, shed from half its load.
#[velocity_policy::deferred(bulkhead = "pool", shed_at = 0.5, deadline = "1s")]
#[velocity_policy::idempotent]
async fn analytics() -> Result<(), AppError> {
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn critical_work_is_never_shed_under_the_load_that_sheds_deferred_work() {
    let _test = isolate();
    let report = critical_never_shed("pool", 5, save, || async { analytics() }).await;
    assert_eq!(report.load, 0.75);
    assert_eq!(report.optional_shed, 5);
    assert_eq!((report.critical_shed, report.critical_refused_full), (0, 0));
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "at load 0.75 on bulkhead `pool`, 5 of 5 critical calls were shed")]
async fn deferred_work_passed_as_critical_fails_the_assertion() {
    let _test = isolate();
    critical_never_shed(
        "pool",
        5,
        || async { analytics() },
        || async { analytics() },
    )
    .await;
}
