//! The attribute macros at run time: each mechanism they expand to does its job.
//!
//! The policies these functions name are in `tests/policies/service.policy`.
#![allow(
    clippy::panic,
    reason = "test helpers: an unexpected outcome fails the test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use velocity_policy::{Deadline, DeadlineExceeded, RefusalKind, ResilienceError};

#[derive(Debug)]
enum AppError {
    Refused(ResilienceError),
    TimedOut(
        #[expect(
            dead_code,
            reason = "carried for the caller; the tests match on the variant"
        )]
        DeadlineExceeded,
    ),
    Search,
}

impl From<ResilienceError> for AppError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for AppError {
    fn from(e: DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl velocity_policy::Transient for AppError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::Search | Self::TimedOut(_))
    }
}

fn refusal_kind<T: std::fmt::Debug>(result: Result<T, AppError>) -> RefusalKind {
    match result {
        Err(AppError::Refused(refusal)) => refusal.kind(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

static SEARCH_CALLS: AtomicU32 = AtomicU32::new(0);

#[velocity_policy::resilient(breaker = "search")]
async fn query_search(fail: bool) -> Result<u32, AppError> {
    SEARCH_CALLS.fetch_add(1, Ordering::SeqCst);
    if fail { Err(AppError::Search) } else { Ok(7) }
}

#[tokio::test(start_paused = true)]
async fn a_breaker_named_in_the_policy_file_opens_after_its_threshold() {
    for _ in 0..3 {
        assert!(matches!(query_search(true).await, Err(AppError::Search)));
    }
    let calls = SEARCH_CALLS.load(Ordering::SeqCst);
    assert_eq!(
        refusal_kind(query_search(false).await),
        RefusalKind::BreakerOpen
    );
    assert_eq!(
        SEARCH_CALLS.load(Ordering::SeqCst),
        calls,
        "refused without running the body"
    );
}

#[velocity_policy::resilient(retry = "transient", deadline = "500ms")]
#[velocity_policy::idempotent]
async fn hangs(calls: Arc<AtomicU32>) -> Result<(), AppError> {
    calls.fetch_add(1, Ordering::SeqCst);
    std::future::pending().await
}

#[tokio::test(start_paused = true)]
async fn a_retry_stays_inside_the_deadline() {
    let calls = Arc::new(AtomicU32::new(0));
    let start = Instant::now();
    let result = hangs(calls.clone()).await;
    assert!(matches!(result, Err(AppError::TimedOut(_))), "{result:?}");
    assert!(
        start.elapsed() <= Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
    // 300 ms attempt timeouts: a second attempt started inside the 500 ms, a third could not.
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[velocity_policy::resilient(retry(attempts = 4, base = "1ms", cap = "2ms"), deadline = "1s")]
#[velocity_policy::idempotent]
async fn flaky(calls: Arc<AtomicU32>, succeed_on: u32) -> Result<u32, AppError> {
    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
    if n >= succeed_on {
        Ok(n)
    } else {
        Err(AppError::Search)
    }
}

#[tokio::test(start_paused = true)]
async fn an_inline_retry_repeats_transient_failures_with_fresh_arguments() {
    let calls = Arc::new(AtomicU32::new(0));
    assert_eq!(flaky(calls.clone(), 3).await.unwrap(), 3);
    let calls = Arc::new(AtomicU32::new(0));
    assert!(matches!(
        flaky(calls.clone(), 10).await,
        Err(AppError::Search)
    ));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[velocity_policy::resilient(retry = "scarce", deadline = "1s")]
#[velocity_policy::idempotent]
async fn fails_once_alone(calls: Arc<AtomicU32>) -> Result<(), AppError> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(AppError::Search)
}

#[tokio::test(start_paused = true)]
async fn a_retry_allowance_from_the_file_bounds_the_retries() {
    let calls = Arc::new(AtomicU32::new(0));
    assert!(matches!(
        fails_once_alone(calls.clone()).await,
        Err(AppError::Search)
    ));
    // 1% of one call allows no retry: three attempts are configured, one ran.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[velocity_policy::deferred]
#[velocity_policy::idempotent]
async fn index_document(ran: Arc<AtomicBool>) {
    ran.store(true, Ordering::SeqCst);
}

#[tokio::test]
async fn calling_a_deferred_function_returns_before_its_body_runs() {
    let ran = Arc::new(AtomicBool::new(false));
    let () = index_document(ran.clone());
    assert!(!ran.load(Ordering::SeqCst), "scheduled, not run");
    for _ in 0..100 {
        if ran.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the deferred body never ran");
}

#[velocity_policy::background]
#[velocity_policy::idempotent]
async fn embed(done: tokio::sync::oneshot::Sender<u32>) -> Result<(), AppError> {
    let _ = done.send(42);
    Ok(())
}

#[tokio::test]
async fn calling_a_background_function_hands_it_to_the_pool() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    embed(tx);
    assert_eq!(rx.await.unwrap(), 42);
}

#[velocity_policy::critical(deadline = "10s")]
async fn inner_operation() -> Result<Duration, AppError> {
    Ok(Deadline::current()
        .map(|d| d.remaining())
        .unwrap_or(Duration::MAX))
}

#[velocity_policy::critical(deadline = "300ms")]
async fn outer_request() -> Result<Duration, AppError> {
    tokio::time::sleep(Duration::from_millis(100)).await;
    inner_operation().await
}

#[tokio::test(start_paused = true)]
async fn nested_calls_share_one_deadline() {
    let left = outer_request().await.unwrap();
    // The inner function asked for 10 s; it got what the outer 300 ms had left.
    assert_eq!(left, Duration::from_millis(200));
}

#[velocity_policy::operation("charge_card")]
async fn charge(amount: u64) -> Result<u64, AppError> {
    Ok(amount)
}

#[tokio::test(start_paused = true)]
async fn an_operation_from_the_file_refuses_below_its_minimum_budget() {
    assert_eq!(charge(5).await.unwrap(), 5);
    let tight = Deadline::after(Duration::from_millis(150));
    let result = tight.scope(charge(5)).await;
    assert_eq!(refusal_kind(result), RefusalKind::InsufficientBudget);
}

#[velocity_policy::resilient(bulkhead = "search", deadline = "1s")]
async fn slow_search(release: Arc<tokio::sync::Notify>) -> Result<(), AppError> {
    release.notified().await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_bulkhead_refuses_past_its_slots() {
    let release = Arc::new(tokio::sync::Notify::new());
    let a = tokio::spawn(slow_search(release.clone()));
    let b = tokio::spawn(slow_search(release.clone()));
    tokio::task::yield_now().await;
    assert_eq!(
        refusal_kind(slow_search(release.clone()).await),
        RefusalKind::BulkheadFull
    );
    release.notify_waiters();
    a.await.unwrap().unwrap();
    b.await.unwrap().unwrap();
}

struct Documents {
    calls: AtomicU32,
    store: Vec<&'static str>,
}

impl Documents {
    /// Doc comments and other attributes are kept.
    #[velocity_policy::critical(deadline = "1s")]
    #[inline]
    pub async fn get(&self, index: usize) -> Result<&'static str, AppError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.store.get(index).copied().ok_or(AppError::Search)
    }

    #[velocity_policy::resilient(retry = "transient", deadline = "1s")]
    #[velocity_policy::idempotent]
    async fn get_retried(&self, index: usize) -> Result<&'static str, AppError> {
        self.get(index).await
    }

    #[velocity_policy::critical(deadline = "1s")]
    async fn push(&mut self, doc: &'static str) -> Result<usize, AppError> {
        self.store.push(doc);
        Ok(self.store.len())
    }
}

#[tokio::test(start_paused = true)]
async fn methods_taking_self_by_reference_work() {
    let mut docs = Documents {
        calls: AtomicU32::new(0),
        store: vec!["a"],
    };
    assert_eq!(docs.push("b").await.unwrap(), 2);
    assert_eq!(docs.get(1).await.unwrap(), "b");
    assert!(matches!(docs.get_retried(9).await, Err(AppError::Search)));
    // Three attempts of a transient failure.
    assert_eq!(docs.calls.load(Ordering::SeqCst), 1 + 3);
}

#[velocity_policy::critical(deadline = "1s")]
async fn describe<T: std::fmt::Debug + Send>(
    value: T,
    label: impl AsRef<str>,
) -> Result<String, AppError> {
    Ok(format!("{}: {value:?}", label.as_ref()))
}

#[tokio::test(start_paused = true)]
async fn generic_functions_and_impl_trait_arguments_work() {
    assert_eq!(describe(3u8, "n").await.unwrap(), "n: 3");
}

/// Deferred work that awaits a retried `#[resilient]` call (as the demo's `index_document`
/// does): the retried call's future must be `Send + 'static` there. Its auto traits are
/// decided on the attempt's own future, so this compiles; it also runs.
#[velocity_policy::deferred]
#[velocity_policy::idempotent]
async fn reindex_after(calls: Arc<AtomicU32>, done: Arc<AtomicBool>) {
    if matches!(flaky(calls, 2).await, Ok(2)) {
        done.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn deferred_work_can_await_a_retried_call() {
    let (calls, done) = (
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let () = reindex_after(calls.clone(), done.clone());
    for _ in 0..200 {
        if done.load(Ordering::SeqCst) {
            assert_eq!(
                calls.load(Ordering::SeqCst),
                2,
                "one failure, then the success"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the deferred retried call never finished");
}
