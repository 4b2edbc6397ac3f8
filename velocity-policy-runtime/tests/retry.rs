//! Bounded retry's invariants (its module docs state them), one test each, on tokio's paused clock.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;
use velocity_policy_runtime::retry::{Pushback, Transient, full_jitter};
use velocity_policy_runtime::{
    Breaker, CallError, Deadline, Idempotent, RefusalKind, RetryAllowance, RetryPolicy,
    retry_within, retry_within_by,
};

const MS: Duration = Duration::from_millis(1);

#[derive(Debug, PartialEq)]
enum DepError {
    Unavailable,
    BadRequest,
}

impl Transient for DepError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable)
    }
}

fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder("transient")
        .attempts(attempts)
        .backoff(50 * MS, Duration::from_secs(1))
        .attempt_timeout(200 * MS)
        .build()
}

#[tokio::test(start_paused = true)]
async fn retries_never_extend_the_deadline() {
    // Every attempt hangs; the attempt timeout would allow 10 × 200ms = 2s without the
    // shared deadline.
    let policy = policy(10);
    let start = Instant::now();
    let deadline = Deadline::after(500 * MS);
    let calls = AtomicU32::new(0);
    let result: Result<(), CallError<DepError>> = retry_within(
        &deadline,
        &policy,
        Idempotent::claim(|_| {
            calls.fetch_add(1, Ordering::SeqCst);
            std::future::pending()
        }),
    )
    .await;
    assert!(start.elapsed() <= 500 * MS, "took {:?}", start.elapsed());
    assert!(matches!(result, Err(CallError::DeadlineExceeded(_))));
    assert!(
        calls.load(Ordering::SeqCst) >= 2,
        "the attempt timeout is retryable"
    );
}

#[tokio::test(start_paused = true)]
async fn no_backoff_sleep_ends_past_the_deadline() {
    let policy = RetryPolicy::builder("slow-backoff")
        .attempts(5)
        .backoff(Duration::from_secs(10), Duration::from_secs(10))
        .build();
    // Force a large draw: with base = cap = 10s the pause is in [0, 10s); a 1ms deadline can
    // only be respected by not sleeping at all.
    let start = Instant::now();
    let deadline = Deadline::after(MS);
    let result: Result<(), CallError<DepError>> = retry_within(
        &deadline,
        &policy,
        Idempotent::claim(|_| async { Err(CallError::Failed(DepError::Unavailable)) }),
    )
    .await;
    assert!(start.elapsed() < MS);
    assert_eq!(result, Err(CallError::Failed(DepError::Unavailable)));
}

proptest! {
    #[test]
    fn jitter_stays_inside_its_bounds(base_ms in 1u64..1_000, cap_ms in 1u64..10_000, n in 0u32..70) {
        let base = Duration::from_millis(base_ms);
        let cap = Duration::from_millis(cap_ms);
        let upper = base.saturating_mul(2u32.saturating_pow(n.min(31))).min(cap);
        let pause = full_jitter(base, cap, n);
        prop_assert!(pause < upper, "{pause:?} not below {upper:?}");
    }
}

#[test]
fn jitter_is_not_constant_and_spreads_over_its_range() {
    let base = Duration::from_millis(100);
    let cap = Duration::from_secs(10);
    let draws: Vec<Duration> = (0..1_000).map(|_| full_jitter(base, cap, 3)).collect();
    let distinct: std::collections::BTreeSet<_> = draws.iter().collect();
    assert!(
        distinct.len() > 900,
        "only {} distinct pauses",
        distinct.len()
    );
    // Full jitter, not the cap ± a bit: draws fill the lower and the upper half of [0, 800ms).
    let low = draws
        .iter()
        .filter(|d| **d < Duration::from_millis(400))
        .count();
    assert!((350..650).contains(&low), "{low} of 1000 below the middle");
}

#[tokio::test(start_paused = true)]
async fn refusals_are_never_retried() {
    let breaker = Breaker::builder("search").build();
    breaker.trip(Duration::from_secs(30), "maintenance");
    let calls = AtomicU32::new(0);
    let result: Result<(), CallError<DepError>> = retry_within(
        &Deadline::after(Duration::from_secs(5)),
        &policy(5),
        Idempotent::claim(|_| {
            calls.fetch_add(1, Ordering::SeqCst);
            let breaker = &breaker;
            async move {
                breaker.check()?;
                Ok(())
            }
        }),
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        result.unwrap_err().refusal().map(|r| r.kind()),
        Some(RefusalKind::BreakerOpen)
    );
}

#[tokio::test(start_paused = true)]
async fn permanent_errors_are_not_retried() {
    let calls = AtomicU32::new(0);
    let result: Result<(), CallError<DepError>> = retry_within(
        &Deadline::after(Duration::from_secs(5)),
        &policy(5),
        Idempotent::claim(|_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(CallError::Failed(DepError::BadRequest)) }
        }),
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(result, Err(CallError::Failed(DepError::BadRequest)));
}

#[tokio::test(start_paused = true)]
async fn a_classifier_can_decide_instead_of_the_trait() {
    let calls = AtomicU32::new(0);
    let result: Result<(), CallError<&str>> = retry_within_by(
        &Deadline::after(Duration::from_secs(5)),
        &policy(3),
        |e: &&str| *e == "busy",
        Idempotent::claim(|_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(CallError::Failed("busy")) }
        }),
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(result, Err(CallError::Failed("busy")));
}

#[tokio::test(start_paused = true)]
async fn each_attempt_runs_under_its_own_child_deadline_in_scope() {
    let request = Deadline::after(Duration::from_secs(5));
    let seen = std::sync::Mutex::new(Vec::new());
    let _: Result<(), CallError<DepError>> = retry_within(
        &request,
        &policy(2),
        Idempotent::claim(|attempt| {
            seen.lock()
                .unwrap()
                .push((attempt.number, attempt.deadline.budget()));
            async move {
                assert_eq!(Deadline::current(), Some(attempt.deadline));
                Err(CallError::Failed(DepError::Unavailable))
            }
        }),
    )
    .await;
    assert_eq!(*seen.lock().unwrap(), vec![(1, 200 * MS), (2, 200 * MS)]);
}

#[tokio::test(start_paused = true)]
async fn an_exhausted_retry_allowance_stops_retries_across_requests() {
    // Retries may add 20% of calls, with no floor: 10 requests buy 2 retries in all.
    let allowance = Arc::new(RetryAllowance::new(Duration::from_secs(10), 0, 0.2));
    let policy = RetryPolicy::builder("allowed")
        .attempts(3)
        .backoff(MS, MS)
        .allowance(allowance.clone())
        .build();
    let calls = Arc::new(AtomicU32::new(0));
    // Ten requests in a dependency's outage.
    for _ in 0..10 {
        let calls = calls.clone();
        let result: Result<(), CallError<DepError>> = retry_within(
            &Deadline::after(Duration::from_secs(5)),
            &policy,
            Idempotent::claim(move |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Err(CallError::Failed(DepError::Unavailable)) }
            }),
        )
        .await;
        assert!(result.is_err());
    }
    // Without an allowance: 10 × 3 = 30 calls. With it: 10 first attempts + 2 retries.
    assert_eq!(calls.load(Ordering::SeqCst), 12);
    let snap = policy.snapshot();
    assert_eq!(snap.retries, 2);
    assert!(snap.stopped_by_allowance >= 8);
}

#[tokio::test(start_paused = true)]
async fn the_allowance_floor_allows_a_few_retries_at_low_traffic() {
    let allowance = RetryAllowance::new(Duration::from_secs(10), 1, 0.0);
    // 1 per second over 10 seconds: 10 retries.
    let granted = (0..20).filter(|_| allowance.try_withdraw()).count();
    assert_eq!(granted, 10);
}

#[tokio::test(start_paused = true)]
async fn a_config_builds_the_same_policy_as_its_setters_with_an_allowance_of_its_own() {
    use velocity_policy_runtime::retry::{AllowanceConfig, Backoff, RetryConfig};
    const TWO_PER_SECOND: AllowanceConfig = AllowanceConfig::new(0.0, 2);
    let by_config = RetryPolicy::builder("by-config")
        .config(
            RetryConfig::new(4)
                .with_backoff(Backoff::full_jitter(10 * MS, 80 * MS))
                .with_attempt_timeout(300 * MS)
                .with_allowance(TWO_PER_SECOND),
        )
        .build();
    let by_setters = RetryPolicy::builder("by-setters")
        .attempts(4)
        .backoff(10 * MS, 80 * MS)
        .attempt_timeout(300 * MS)
        .allowance(Arc::new(RetryAllowance::from_config(TWO_PER_SECOND)))
        .build();
    assert_eq!(by_config.numbers(), by_setters.numbers());
    assert_eq!(by_config.numbers().allowance, Some(TWO_PER_SECOND));
    // 2 per second over the default 10 s window: 20 retries, then none.
    let granted = (0..30)
        .filter(|_| by_config.allowance().try_withdraw())
        .count();
    assert_eq!(granted, 20);
    // Without one, the policy's own allowance is the default's numbers.
    let default = RetryPolicy::builder("default").build();
    assert_eq!(
        default.numbers(),
        RetryConfig::DEFAULT.with_allowance(AllowanceConfig::DEFAULT)
    );
}

#[tokio::test(start_paused = true)]
async fn stopping_early_is_logged_with_its_reason() {
    let (logs, _guard) = common::capture();
    let allowance = Arc::new(RetryAllowance::new(Duration::from_secs(10), 0, 0.0));
    let policy = RetryPolicy::builder("no-allowance")
        .allowance(allowance)
        .build();
    let _: Result<(), CallError<DepError>> = retry_within(
        &Deadline::after(Duration::from_secs(5)),
        &policy,
        Idempotent::claim(|_| async { Err(CallError::Failed(DepError::Unavailable)) }),
    )
    .await;
    let lines = logs.lines_with(&["kind=\"retry_stopped\"", "name=\"no-allowance\""]);
    assert_eq!(lines.len(), 1, "{}", logs.text());
    assert!(lines[0].contains("retry allowance is exhausted"));
}

#[tokio::test(start_paused = true)]
async fn retries_never_extend_the_deadline_whatever_the_draws() {
    // Many runs with random pauses: the deadline always holds and a retry loop that ran never
    // ends as a refusal (a refusal means the work never ran).
    for _ in 0..300 {
        let policy = RetryPolicy::builder("many")
            .attempts(20)
            .backoff(5 * MS, 40 * MS)
            .attempt_timeout(30 * MS)
            .build();
        let start = Instant::now();
        let deadline = Deadline::after(250 * MS);
        let result: Result<(), CallError<DepError>> = retry_within(
            &deadline,
            &policy,
            Idempotent::claim(|_| std::future::pending()),
        )
        .await;
        assert!(start.elapsed() <= 250 * MS, "took {:?}", start.elapsed());
        assert!(
            matches!(result, Err(CallError::DeadlineExceeded(_))),
            "{result:?}"
        );
    }
}

#[test]
fn deposits_from_many_threads_are_all_counted() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let allowance =
        rt.block_on(async { Arc::new(RetryAllowance::new(Duration::from_secs(60), 0, 1.0)) });
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let allowance = allowance.clone();
            std::thread::spawn(move || {
                for _ in 0..1_000 {
                    allowance.deposit();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let snapshot = rt.block_on(async { allowance.snapshot() });
    assert_eq!(snapshot.calls, 6_000);
    assert_eq!(
        snapshot.allowed, 6_000,
        "a ratio of 1 allows one retry per call"
    );
}

/// The retried call is a future written by hand (issue 19): nothing runs before its first
/// poll, an attempt that waits is polled again where it is, and a failure goes through the
/// pause to an attempt that also waits before it succeeds.
#[tokio::test(start_paused = true)]
async fn a_self_bounded_retry_starts_on_its_first_poll_and_waits_through_each_step() {
    use std::future::Future;
    use std::task::{Context, Waker};

    let calls = AtomicU32::new(0);
    let deadline = Deadline::after(Duration::from_secs(5));
    let policy = policy(3);
    let retried = velocity_policy_runtime::retry::retry_within_self_bounded(
        &deadline,
        &policy,
        |e: &DepError| e.is_transient(),
        Idempotent::claim(|attempt: velocity_policy_runtime::retry::Attempt| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move {
                // Every attempt waits once before it answers.
                tokio::task::yield_now().await;
                if attempt.number < 2 {
                    Err(CallError::Failed(DepError::Unavailable))
                } else {
                    Ok(attempt.number)
                }
            }
        }),
    );
    // Made, not polled: the operation has not been called.
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let mut retried = std::pin::pin!(retried);
    let mut cx = Context::from_waker(Waker::noop());
    // The first poll makes the first attempt and polls it: it waits.
    assert!(retried.as_mut().poll(&mut cx).is_pending());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // It fails; the pause before the second attempt waits on the (paused) clock.
    assert!(retried.as_mut().poll(&mut cx).is_pending());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let started = Instant::now();
    let result = retried.await;
    assert_eq!(result, Ok(2));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // The pause was a full-jitter draw below the first cap (50 ms), on the paused clock. Tokio's
    // timer fires on whole milliseconds, rounding a sleep up: a draw of 49.6 ms ends at 50 ms
    // (`< 50 ms` failed about one run in thirty).
    assert!(Instant::now() - started <= 50 * MS);
    assert_eq!(policy.snapshot().retries, 1);
}

/// A call whose deadline has nothing left is refused before its first attempt is made.
#[tokio::test(start_paused = true)]
async fn a_self_bounded_retry_with_no_budget_is_refused_without_running() {
    let calls = AtomicU32::new(0);
    let deadline = Deadline::after(Duration::ZERO);
    let result: Result<(), CallError<DepError>> =
        velocity_policy_runtime::retry::retry_within_self_bounded(
            &deadline,
            &policy(3),
            |e: &DepError| e.is_transient(),
            Idempotent::claim(|_| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Ok(()) }
            }),
        )
        .await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    match result {
        Err(CallError::Refused(refusal)) => {
            assert_eq!(refusal.kind(), RefusalKind::InsufficientBudget);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A dependency's failure that says when to try again (gRPC's `grpc-retry-pushback-ms`).
#[derive(Debug)]
struct PushedBack(Option<Pushback>);

impl Transient for PushedBack {
    fn is_transient(&self) -> bool {
        true
    }

    fn pushback(&self) -> Option<Pushback> {
        self.0
    }
}

/// Runs `policy` over an operation that always fails with `pushback`, under `budget`: the
/// moments each attempt started (from the call's start), and the outcome.
async fn pushed_back(
    policy: &RetryPolicy,
    budget: Duration,
    pushback: Option<Pushback>,
) -> (Vec<Duration>, Result<(), CallError<PushedBack>>) {
    let start = Instant::now();
    let starts = std::sync::Mutex::new(Vec::new());
    let result = retry_within(
        &Deadline::after(budget),
        policy,
        Idempotent::claim(|_| {
            starts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(start.elapsed());
            async move { Err(CallError::Failed(PushedBack(pushback))) }
        }),
    )
    .await;
    let starts = starts
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    (starts, result)
}

#[tokio::test(start_paused = true)]
async fn a_retry_never_starts_sooner_than_the_pushback_asked() {
    // The backoff alone would pause under 1 ms.
    let policy = RetryPolicy::builder("pushed")
        .attempts(3)
        .backoff(MS, MS)
        .build();
    let (starts, result) = pushed_back(
        &policy,
        Duration::from_secs(2),
        Some(Pushback::After(300 * MS)),
    )
    .await;
    assert!(result.is_err());
    assert_eq!(starts.len(), 3, "{starts:?}");
    for pair in starts.windows(2) {
        assert!(pair[1] - pair[0] >= 300 * MS, "{starts:?}");
    }
    assert_eq!(policy.snapshot().retries, 2);
}

#[tokio::test(start_paused = true)]
async fn a_pushback_asking_not_to_retry_stops_the_retrying() {
    let policy = policy(5);
    let (starts, result) =
        pushed_back(&policy, Duration::from_secs(2), Some(Pushback::Never)).await;
    assert!(matches!(result, Err(CallError::Failed(_))));
    assert_eq!(starts, [Duration::ZERO], "one attempt, no retry");
    let snapshot = policy.snapshot();
    assert_eq!(snapshot.stopped_by_pushback, 1);
    assert_eq!(snapshot.retries, 0);
}

#[tokio::test(start_paused = true)]
async fn a_pushback_past_the_deadline_is_not_waited_for() {
    let policy = policy(5);
    let start = Instant::now();
    let (starts, result) = pushed_back(
        &policy,
        Duration::from_secs(1),
        Some(Pushback::After(Duration::from_secs(5))),
    )
    .await;
    assert!(matches!(result, Err(CallError::Failed(_))));
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert!(
        start.elapsed() < MS,
        "returned at once: {:?}",
        start.elapsed()
    );
    assert_eq!(policy.snapshot().stopped_by_deadline, 1);
    // A pushback of any length is input: it cannot overflow the pause's arithmetic.
    let (starts, _) = pushed_back(
        &policy,
        Duration::from_secs(1),
        Some(Pushback::After(Duration::MAX)),
    )
    .await;
    assert_eq!(starts.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_classifier_closure_reads_no_pushback_and_retries_as_before() {
    let policy = RetryPolicy::builder("closure")
        .attempts(3)
        .backoff(MS, MS)
        .build();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let result: Result<(), CallError<PushedBack>> = retry_within_by(
        &Deadline::after(Duration::from_secs(2)),
        &policy,
        |_: &PushedBack| true,
        Idempotent::claim(|_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(CallError::Failed(PushedBack(Some(Pushback::Never)))) }
        }),
    )
    .await;
    assert!(result.is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(start.elapsed() < 10 * MS);
}
