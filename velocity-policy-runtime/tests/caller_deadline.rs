//! Whose fault an expiry is: a caller may shorten its own wait, never make the service count
//! the dependency as failing. An expiry under a budget the caller shortened (an incoming
//! header, or a parent deadline that was) is the caller's: no breaker counts it, no retry
//! repeats it, no shared store hears of it, no hedge percentile learns from it.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::{advance, sleep};
use velocity_policy_runtime::breaker::{BreakerState, BreakerStore};
use velocity_policy_runtime::hedge::{Hedge, hedge_within};
use velocity_policy_runtime::retry::Attempt;
use velocity_policy_runtime::{
    Breaker, CallError, Deadline, DeadlineExceeded, Idempotent, RefusalKind, RefusalReason,
    ResilienceError, RetryPolicy, retry_within_by,
};

const MS: Duration = Duration::from_millis(1);

/// A store that counts what the breaker tells it.
#[derive(Debug, Default)]
struct Counting {
    failures: AtomicU64,
    openings: AtomicU64,
}

impl BreakerStore for Counting {
    fn failure_recorded(&self, _: &Breaker) {
        self.failures.fetch_add(1, Ordering::SeqCst);
    }

    fn opened(
        &self,
        _: &Breaker,
        _: tokio::time::Instant,
        _: &velocity_policy_runtime::breaker::OpenCause,
    ) {
        self.openings.fetch_add(1, Ordering::SeqCst);
    }
}

fn sessions(store: Arc<Counting>) -> Breaker {
    Breaker::builder("sessions")
        .open_after_failures(3, Duration::from_secs(5))
        .cooldown(Duration::from_secs(2))
        .store(store)
        .build()
}

/// The session store answers in 130 ms; the lookup's own deadline is 150 ms.
async fn lookup(breaker: &Breaker) -> Result<&'static str, CallError<&'static str>> {
    breaker.check().map_err(CallError::Refused)?;
    let deadline = Deadline::child_of_current(150 * MS);
    let ran = deadline
        .run(async {
            sleep(130 * MS).await;
            Ok("session")
        })
        .await;
    breaker.observe(ran)
}

#[tokio::test(start_paused = true)]
async fn a_child_is_the_callers_only_when_the_callers_budget_decided_it() {
    let own = Deadline::after(110 * MS);
    assert!(!own.is_callers());
    assert!(
        !own.child(150 * MS).is_callers(),
        "the service's own budget bounded it"
    );

    let sent = Deadline::from_caller(110 * MS);
    assert!(sent.is_callers());
    let lookup = sent.child(150 * MS);
    assert!(lookup.is_callers(), "the caller's 110 ms decided it");
    assert!(
        lookup.child(Duration::from_secs(1)).is_callers(),
        "and its children"
    );
    assert!(
        !sent.child(50 * MS).is_callers(),
        "its own 50 ms bounded it: it had all its configuration gives it"
    );
    assert!(
        !sent.child(110 * MS).is_callers(),
        "granted exactly what it asked for"
    );
    // A reserve held back from the caller's budget is still the caller's budget deciding.
    assert!(sent.child_reserving(100 * MS, 20 * MS).is_callers());

    // Later, the parent has less left than the child's own maximum.
    advance(80 * MS).await;
    assert!(sent.child(50 * MS).is_callers());
    // In scope, as the attribute macros take it.
    let in_scope = sent
        .scope(async { Deadline::child_of_current(150 * MS) })
        .await;
    assert!(in_scope.is_callers());

    // The expiry says whose it was.
    let expired = lookup.run(std::future::pending::<()>()).await.unwrap_err();
    assert!(expired.is_callers());
    assert_eq!(
        expired.to_string(),
        "stopped waiting after the caller's 110ms budget ran out; the work may have run"
    );
    let own_expiry = Deadline::after(MS)
        .run(std::future::pending::<()>())
        .await
        .unwrap_err();
    assert!(!own_expiry.is_callers());
}

#[tokio::test(start_paused = true)]
async fn expiries_under_a_callers_short_budget_never_open_the_breaker_nor_reach_the_store() {
    let store = Arc::new(Counting::default());
    let breaker = sessions(store.clone());
    // Three requests that sent 110 ms: each lookup expires at 110 ms.
    for _ in 0..3 {
        let request = Deadline::from_caller(110 * MS);
        let outcome = request.scope(lookup(&breaker)).await;
        match outcome {
            Err(CallError::DeadlineExceeded(expired)) => assert!(expired.is_callers()),
            other => panic!("expected the caller's expiry, got {other:?}"),
        }
    }
    assert_eq!(breaker.state(), BreakerState::Closed);
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.failures, 0);
    assert_eq!(snapshot.caller_expiries, 3);
    assert_eq!(store.failures.load(Ordering::SeqCst), 0, "never shared");
    // The next ordinary request is served.
    let request = Deadline::after(Duration::from_secs(5));
    assert_eq!(request.scope(lookup(&breaker)).await, Ok("session"));

    // The same expiries under the service's own 110 ms are the dependency's.
    for _ in 0..3 {
        let request = Deadline::after(110 * MS);
        assert!(request.scope(lookup(&breaker)).await.is_err());
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    assert_eq!(store.failures.load(Ordering::SeqCst), 2);
    assert_eq!(store.openings.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_callers_expiry_does_not_reopen_a_breaker_on_probation() {
    let store = Arc::new(Counting::default());
    let breaker = sessions(store.clone());
    for _ in 0..3 {
        breaker.record_failure();
    }
    advance(Duration::from_secs(2)).await;
    assert_eq!(breaker.state(), BreakerState::Probation);
    // A probe under a caller's 50 ms: its expiry says nothing of the store.
    let request = Deadline::from_caller(50 * MS);
    assert!(request.scope(lookup(&breaker)).await.is_err());
    assert_eq!(breaker.state(), BreakerState::Probation);
    assert!(breaker.check().is_ok());
    // A real failure on probation still reopens it.
    breaker.record_failure();
    assert_eq!(breaker.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn a_callers_expiry_is_never_retried() {
    let policy = RetryPolicy::builder("lookup")
        .attempts(3)
        .backoff(MS, 2 * MS)
        .attempt_timeout(150 * MS)
        .build();
    let calls = AtomicU32::new(0);
    let run = |deadline: Deadline| {
        let calls = &calls;
        let policy = &policy;
        async move {
            retry_within_by(
                &deadline,
                policy,
                |_: &()| true,
                Idempotent::claim(|_| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    std::future::pending::<Result<(), CallError<()>>>()
                }),
            )
            .await
        }
    };
    // The caller sent 200 ms: the first attempt has its own 150 ms and is retried; the second
    // has only the 50 ms the caller left and is not.
    let outcome = run(Deadline::from_caller(200 * MS)).await;
    assert!(
        matches!(outcome, Err(CallError::DeadlineExceeded(e)) if e.is_callers()),
        "{outcome:?}"
    );
    assert_eq!(calls.swap(0, Ordering::SeqCst), 2);
    // Under 120 ms the caller sent, the first attempt is already the caller's: never retried.
    let outcome = run(Deadline::from_caller(120 * MS)).await;
    assert!(
        matches!(outcome, Err(CallError::DeadlineExceeded(e)) if e.is_callers()),
        "{outcome:?}"
    );
    assert_eq!(calls.swap(0, Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_callers_expiry_does_not_move_a_hedges_percentile() {
    let hedge = Hedge::builder("lookup_tail")
        .percentile(90.0)
        .min_samples(5)
        .build();
    // Twenty calls that expire at the 5 ms their callers left: nothing recorded.
    for _ in 0..20 {
        let outcome: Result<(), CallError<()>> = hedge_within(
            &Deadline::from_caller(5 * MS),
            &hedge,
            Idempotent::claim(|attempt: Attempt| async move {
                attempt
                    .deadline
                    .run(std::future::pending::<Result<(), CallError<()>>>())
                    .await
                    .unwrap_or_else(|expired| Err(CallError::DeadlineExceeded(expired)))
            }),
        )
        .await;
        assert!(matches!(outcome, Err(CallError::DeadlineExceeded(e)) if e.is_callers()));
    }
    assert_eq!(
        hedge.delay(),
        None,
        "no percentile learned from the caller's expiries"
    );
}

#[tokio::test(start_paused = true)]
async fn nothing_left_says_the_deadline_had_passed() {
    let request = Deadline::after(10 * MS);
    advance(20 * MS).await;
    let refused: ResilienceError = request
        .scope(async { Deadline::for_operation("authorize", 100 * MS, Duration::ZERO) })
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), RefusalKind::InsufficientBudget);
    assert_eq!(
        refused.reason(),
        &RefusalReason::InsufficientBudget {
            remaining: Duration::ZERO,
            min_budget: Duration::ZERO
        }
    );
    assert_eq!(
        refused.to_string(),
        "operation `authorize` refused the call: the deadline it was called under had passed before it could start"
    );
}

#[test]
fn an_expiry_serializes_whose_it_was_only_when_it_was_the_callers() {
    let own = DeadlineExceeded::new(250 * MS);
    assert_eq!(
        serde_json::to_string(&own).unwrap(),
        r#"{"budget_ms":250.0}"#
    );
    assert_eq!(
        serde_json::to_string(&own.with_callers(true)).unwrap(),
        r#"{"budget_ms":250.0,"callers":true}"#
    );
}
