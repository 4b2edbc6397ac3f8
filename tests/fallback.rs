//! Fallbacks per operation and stale-if-error, at run time.
#![cfg(feature = "stale")]
#![allow(
    clippy::panic,
    reason = "test helpers: an unexpected outcome fails the test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use velocity_policy::fallback::{Privileges, degrade};
use velocity_policy::{CallError, DeadlineExceeded, RefusalKind, Registry, ResilienceError};

#[derive(Debug, Clone, PartialEq)]
enum AppError {
    Refused(RefusalKind),
    TimedOut,
    Store,
}

impl From<ResilienceError> for AppError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e.kind())
    }
}

impl From<DeadlineExceeded> for AppError {
    fn from(_: DeadlineExceeded) -> Self {
        Self::TimedOut
    }
}

/// What each fallback saw, as a short word.
fn seen(reason: &CallError<AppError>) -> &'static str {
    match reason {
        CallError::Refused(r) if r.kind() == RefusalKind::BreakerOpen => "breaker",
        CallError::Refused(r) if r.kind() == RefusalKind::BulkheadFull => "bulkhead",
        CallError::Refused(_) => "refused",
        CallError::DeadlineExceeded(_) => "expired",
        CallError::Failed(_) => "failed",
    }
}

fn fallback_count(operation_suffix: &str) -> (u64, u64, u64, u64) {
    let snapshot = Registry::global().snapshot();
    let f = snapshot
        .fallbacks
        .iter()
        .find(|f| f.operation.ends_with(operation_suffix))
        .unwrap_or_else(|| panic!("no fallback record for {operation_suffix}"));
    (f.refused, f.expired, f.failed, f.stale)
}

// ---- a breaker open, answered by the fallback -------------------------------------------

fn default_price(id: &u64, _fail: &bool, reason: CallError<AppError>) -> Result<String, AppError> {
    Ok(format!("default price for {id} ({})", seen(&reason)))
}

#[velocity_policy::critical(
    breaker(failures = 1, within = "10s", cooldown = "10s"),
    deadline = "1s",
    fallback = "default_price"
)]
async fn price(id: u64, fail: bool) -> Result<String, AppError> {
    if fail {
        Err(AppError::Store)
    } else {
        Ok(format!("price {id}"))
    }
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_is_answered_by_the_fallback_and_a_plain_failure_is_not() {
    // A plain failure is the function's own: not routed by default.
    assert_eq!(price(1, true).await, Err(AppError::Store));
    // The breaker opened on it: the next call never runs, the fallback answers.
    assert_eq!(
        price(1, false).await.unwrap(),
        "default price for 1 (breaker)"
    );
    assert_eq!(fallback_count("::price"), (1, 0, 0, 0));
}

// ---- a full bulkhead -------------------------------------------------------------------------

fn later(
    _: &Arc<tokio::sync::Notify>,
    reason: CallError<AppError>,
) -> Result<&'static str, AppError> {
    match seen(&reason) {
        "bulkhead" => Ok("try again later"),
        other => panic!("unexpected {other}"),
    }
}

#[velocity_policy::critical(bulkhead(max_concurrent = 1), deadline = "1s", fallback = "later")]
async fn export(release: Arc<tokio::sync::Notify>) -> Result<&'static str, AppError> {
    release.notified().await;
    Ok("exported")
}

#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_is_answered_by_the_fallback() {
    let release = Arc::new(tokio::sync::Notify::new());
    let first = tokio::spawn(export(release.clone()));
    tokio::task::yield_now().await;
    assert_eq!(export(release.clone()).await.unwrap(), "try again later");
    release.notify_waiters();
    assert_eq!(first.await.unwrap().unwrap(), "exported");
}

// ---- an expired deadline, and failures only when asked -----------------------------------

fn cached_feed(_slow: &bool, reason: CallError<AppError>) -> Result<Vec<u32>, AppError> {
    Ok(vec![u32::from(seen(&reason) == "expired"), 0])
}

#[velocity_policy::critical(deadline = "100ms", fallback = "cached_feed", fallback_on_failure)]
async fn feed(slow: bool) -> Result<Vec<u32>, AppError> {
    if slow {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Err(AppError::Store)
}

#[tokio::test(start_paused = true)]
async fn an_expired_deadline_and_asked_for_failures_are_answered() {
    assert_eq!(feed(true).await.unwrap(), vec![1, 0], "the deadline passed");
    assert_eq!(
        feed(false).await.unwrap(),
        vec![0, 0],
        "failed, and failures were asked for"
    );
    assert_eq!(fallback_count("::feed"), (0, 1, 1, 0));
}

// ---- per operation, never inherited ----------------------------------------------------------------

static INNER_CALLS: AtomicU32 = AtomicU32::new(0);

#[velocity_policy::critical(bulkhead(max_concurrent = 1), deadline = "1s")]
async fn inner_lookup(hold: Arc<tokio::sync::Notify>) -> Result<u32, AppError> {
    INNER_CALLS.fetch_add(1, Ordering::SeqCst);
    hold.notified().await;
    Ok(1)
}

fn outer_fallback(_: &Arc<tokio::sync::Notify>, _: CallError<AppError>) -> Result<u32, AppError> {
    Ok(99)
}

#[velocity_policy::critical(deadline = "1s", fallback = "outer_fallback")]
async fn outer_page(hold: Arc<tokio::sync::Notify>) -> Result<u32, AppError> {
    inner_lookup(hold).await
}

#[tokio::test(start_paused = true)]
async fn a_nested_call_does_not_use_its_callers_fallback() {
    let hold = Arc::new(tokio::sync::Notify::new());
    let busy = tokio::spawn(inner_lookup(hold.clone()));
    tokio::task::yield_now().await;
    // The inner call is refused (its bulkhead is full). It has no fallback of its own, and the
    // refusal reaches the outer function as the outer's own failure: the outer fallback (for
    // the outer's refusals and expiries) does not answer it.
    assert_eq!(
        outer_page(hold.clone()).await,
        Err(AppError::Refused(RefusalKind::BulkheadFull))
    );
    hold.notify_waiters();
    busy.await.unwrap().unwrap();
    assert_eq!(fallback_count("::outer_page"), (0, 0, 0, 0));
}

// ---- stale-if-error --------------------------------------------------------------------------

static PROFILE_DOWN: AtomicBool = AtomicBool::new(false);

#[velocity_policy::critical(deadline = "1s", stale_if_error = "5m")]
async fn profile(user: u64) -> Result<String, AppError> {
    if PROFILE_DOWN.load(Ordering::SeqCst) {
        Err(AppError::Store)
    } else {
        Ok(format!("profile of {user}"))
    }
}

#[tokio::test(start_paused = true)]
async fn stale_values_are_served_within_the_window_and_refused_after_it() {
    assert_eq!(profile(7).await.unwrap(), "profile of 7");
    PROFILE_DOWN.store(true, Ordering::SeqCst);
    tokio::time::advance(Duration::from_secs(4 * 60)).await;
    assert_eq!(
        profile(7).await.unwrap(),
        "profile of 7",
        "stale, inside 5 minutes"
    );
    assert_eq!(
        profile(8).await,
        Err(AppError::Store),
        "no good result for user 8"
    );
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(profile(7).await, Err(AppError::Store), "too old to serve");
    assert_eq!(fallback_count("::profile").3, 1);
    PROFILE_DOWN.store(false, Ordering::SeqCst);
}

// ---- privileges only ever drop ---------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Session {
    Anonymous,
    User { id: u64, admin: bool },
}

impl Privileges for Session {
    fn is_within(&self, ceiling: &Self) -> bool {
        match (self, ceiling) {
            (Session::Anonymous, _) => true,
            (Session::User { id, admin }, Session::User { id: c, admin: ca }) => {
                id == c && (!admin || *ca)
            }
            (Session::User { .. }, Session::Anonymous) => false,
        }
    }
    fn least() -> Self {
        Session::Anonymous
    }
}

#[test]
fn a_fallback_that_drops_privileges_passes_the_check() {
    let claimed = Session::User {
        id: 7,
        admin: false,
    };
    assert_eq!(degrade(Session::Anonymous, &claimed), Session::Anonymous);
    assert_eq!(degrade(claimed.clone(), &claimed), claimed);
}

#[test]
fn a_widening_fallback_fails_the_debug_assertion() {
    let claimed = Session::User {
        id: 7,
        admin: false,
    };
    let widened =
        std::panic::catch_unwind(|| degrade(Session::User { id: 7, admin: true }, &claimed));
    assert!(widened.is_err(), "debug builds catch a widening fallback");
}

// ---- a fallback declared in a .policy file ----------------------------------------------------

fn no_recommendations(_: &u64, reason: CallError<AppError>) -> Result<Vec<u64>, AppError> {
    assert_eq!(seen(&reason), "expired");
    Ok(Vec::new())
}

#[velocity_policy::operation("slow_recommendations")]
async fn recommendations(user: u64) -> Result<Vec<u64>, AppError> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(vec![user])
}

#[tokio::test(start_paused = true)]
async fn a_fallback_declared_in_the_policy_file_answers() {
    assert_eq!(recommendations(3).await.unwrap(), Vec::<u64>::new());
    assert_eq!(fallback_count("::slow_recommendations").1, 1);
}
