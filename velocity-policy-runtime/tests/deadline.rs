//! The deadline's invariants (its module docs state them), one test each, on tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use tokio::time::{Instant, advance};
use velocity_policy_runtime::{Deadline, DeadlineExceeded, RefusalKind, RefusalReason};

const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn a_child_never_outlives_its_parent() {
    let parent = Deadline::after(300 * MS);
    advance(100 * MS).await;
    for ask in [MS, 199 * MS, 200 * MS, 201 * MS, Duration::from_secs(3600)] {
        let child = parent.child(ask);
        assert!(child.instant() <= parent.instant(), "asked {ask:?}");
        assert_eq!(child.budget(), ask.min(200 * MS), "asked {ask:?}");
        // A grandchild is bound by the parent too.
        assert!(child.child(Duration::from_secs(10)).instant() <= parent.instant());
    }
}

proptest! {
    #[test]
    fn a_child_never_outlives_its_parent_for_any_budgets(
        parent_ms in 0u64..100_000,
        elapsed_ms in 0u64..200_000,
        ask_ms in 0u64..1_000_000,
        reserve_ms in 0u64..100_000,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        rt.block_on(async {
            let parent = Deadline::after(Duration::from_millis(parent_ms));
            advance(Duration::from_millis(elapsed_ms)).await;
            let child = parent.child_reserving(Duration::from_millis(ask_ms), Duration::from_millis(reserve_ms));
            prop_assert!(child.instant() <= parent.instant());
            prop_assert!(child.budget() <= Duration::from_millis(ask_ms));
            Ok(())
        })?;
    }
}

#[tokio::test(start_paused = true)]
async fn the_reserve_is_held_back() {
    let request = Deadline::after(Duration::from_secs(1));
    let lookup = request.child_reserving(Duration::from_secs(5), 200 * MS);
    assert_eq!(lookup.budget(), 800 * MS);
    // When the lookup uses all of its budget, the reserve is still there for the response.
    let result = lookup.run(tokio::time::sleep(Duration::from_secs(5))).await;
    assert_eq!(result, Err(DeadlineExceeded::new(800 * MS)));
    assert_eq!(request.remaining(), 200 * MS);
    // A reserve larger than what is left gives an already expired child.
    assert!(
        request
            .child_reserving(Duration::from_secs(1), 300 * MS)
            .is_expired()
    );
}

#[tokio::test(start_paused = true)]
async fn an_operation_below_its_minimum_budget_never_starts() {
    let deadline = Deadline::after(150 * MS);
    let started = Arc::new(AtomicBool::new(false));
    let work = {
        let started = started.clone();
        async move {
            started.store(true, Ordering::SeqCst);
        }
    };
    let refusal = match deadline.require(200 * MS, "charge_card") {
        Ok(()) => {
            work.await;
            panic!("an operation with 150ms left and a 200ms minimum must not start");
        }
        Err(refusal) => refusal,
    };
    assert!(!started.load(Ordering::SeqCst));
    assert_eq!(refusal.kind(), RefusalKind::InsufficientBudget);
    assert_eq!(refusal.name(), "charge_card");
    assert_eq!(
        refusal.reason(),
        &RefusalReason::InsufficientBudget {
            remaining: 150 * MS,
            min_budget: 200 * MS
        }
    );
    assert_eq!(
        refusal.to_string(),
        "operation `charge_card` refused the call: 150ms left of the deadline, below the minimum useful budget of 200ms"
    );
    // At or above the minimum it may start; an expired deadline starts nothing.
    assert!(deadline.require(150 * MS, "charge_card").is_ok());
    advance(150 * MS).await;
    assert!(deadline.require(Duration::ZERO, "charge_card").is_err());
}

#[tokio::test(start_paused = true)]
async fn run_stops_waiting_at_the_deadline_and_returns_deadline_exceeded() {
    let start = Instant::now();
    let deadline = Deadline::after(250 * MS);
    let result = deadline
        .run(tokio::time::sleep(Duration::from_secs(10)))
        .await;
    assert_eq!(result, Err(DeadlineExceeded::new(250 * MS)));
    assert_eq!(start.elapsed(), 250 * MS);
}

#[tokio::test(start_paused = true)]
async fn run_returns_the_value_when_the_work_finishes_in_time() {
    let deadline = Deadline::after(250 * MS);
    let result = deadline
        .run(async {
            tokio::time::sleep(100 * MS).await;
            "done"
        })
        .await;
    assert_eq!(result, Ok("done"));
}

#[tokio::test(start_paused = true)]
async fn a_deadline_bounds_the_wait_not_the_work() {
    // Work handed to another task runs on after we stop waiting for it.
    let finished = Arc::new(AtomicBool::new(false));
    let handle = {
        let finished = finished.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            finished.store(true, Ordering::SeqCst);
        })
    };
    let waited = Deadline::after(100 * MS).run(handle).await;
    assert!(waited.is_err());
    assert!(!finished.load(Ordering::SeqCst));
    advance(Duration::from_secs(1)).await;
    tokio::task::yield_now().await;
    assert!(finished.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn the_current_deadline_travels_with_the_task() {
    assert_eq!(Deadline::current(), None);
    let request = Deadline::after(Duration::from_secs(2));
    request
        .scope(async move {
            assert_eq!(Deadline::current(), Some(request));
            // Nested code takes a child without being handed the deadline.
            let nested = Deadline::child_of_current(Duration::from_secs(30));
            assert_eq!(nested.instant(), request.instant());
            advance(500 * MS).await;
            let inner = Deadline::child_of_current(Duration::from_secs(1));
            inner
                .scope(async {
                    assert_eq!(
                        Deadline::current().map(|d| d.budget()),
                        Some(Duration::from_secs(1))
                    );
                })
                .await;
            assert_eq!(Deadline::current(), Some(request));
        })
        .await;
    // Outside any scope an operation gets a fresh deadline of what it asked.
    assert_eq!(
        Deadline::child_of_current(Duration::from_secs(3)).budget(),
        Duration::from_secs(3)
    );
}

#[tokio::test(start_paused = true)]
async fn every_timeout_is_bounded() {
    let d = Deadline::after(Duration::MAX);
    assert_eq!(d.budget(), Deadline::MAX_BUDGET);
    let d = Deadline::from_grpc_timeout("99999999H").unwrap();
    assert_eq!(d.budget(), Deadline::MAX_BUDGET);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_crosses_a_service_boundary_as_grpc_timeout() {
    let ours = Deadline::after(Duration::from_millis(1500));
    advance(500 * MS).await;
    let header = ours.to_grpc_timeout();
    let theirs = Deadline::from_grpc_timeout(&header).unwrap();
    assert_eq!(theirs.instant(), ours.instant());
    assert!(Deadline::from_grpc_timeout("soon").is_err());
}

#[tokio::test(start_paused = true)]
async fn an_operation_built_from_its_config_admits_and_refuses_as_configured() {
    use velocity_policy_runtime::deadline::{DeadlineConfig, OperationDeadline};
    const SEARCH: DeadlineConfig =
        DeadlineConfig::new(Duration::from_millis(800)).with_min_budget(Duration::from_millis(50));
    let search = OperationDeadline::with_config("shop::search", SEARCH);
    assert_eq!(search.config(), SEARCH);
    assert_eq!(search.compiled_config(), SEARCH);
    assert_eq!(
        search.current(),
        (Duration::from_millis(800), Duration::from_millis(50))
    );
    let admitted = Deadline::for_named(&search).unwrap();
    assert_eq!(admitted.budget(), Duration::from_millis(800));
    // A caller with less than the minimum budget left is refused before the work starts.
    let short = Deadline::after(Duration::from_millis(30));
    let refused = short
        .scope(async { Deadline::for_named(&search) })
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), RefusalKind::InsufficientBudget);
}
