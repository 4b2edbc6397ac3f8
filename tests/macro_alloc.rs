//! An annotated function adds no allocation per call: measured with a counting allocator.

use velocity_policy::{DeadlineExceeded, ResilienceError};

#[derive(Debug)]
enum AppError {
    Refused,
    TimedOut,
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

impl velocity_policy::Transient for AppError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::TimedOut)
    }
}

#[velocity_policy::resilient(
    breaker(failures = 5, within = "30s", cooldown = "20s"),
    bulkhead(max_concurrent = 8),
    retry(attempts = 3, base = "10ms", cap = "100ms", attempt_timeout = "1s"),
    deadline = "2s"
)]
#[velocity_policy::idempotent]
async fn lookup(id: u64) -> Result<u64, AppError> {
    Ok(id + 1)
}

#[velocity_policy::critical(deadline = "1s", min_budget = "10ms")]
async fn save(id: u64) -> Result<u64, AppError> {
    tokio::task::yield_now().await;
    Ok(id)
}

#[test]
fn annotated_calls_allocate_nothing_once_their_mechanisms_exist() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    // The first calls build the named mechanisms (once, lazily) and warm the runtime.
    rt.block_on(async {
        for i in 0..1_000 {
            lookup(i).await.unwrap();
            save(i).await.unwrap();
        }
    });
    let ready = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                assert_eq!(lookup(i).await.unwrap(), i + 1);
            }
        });
    });
    assert_eq!(
        ready.count_total, 0,
        "#[resilient], ready at once: {ready:?}"
    );
    let bare = allocation_counter::measure(|| {
        rt.block_on(async {
            for _ in 0..1_000u64 {
                tokio::task::yield_now().await;
            }
        });
    });
    let pending = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                assert_eq!(save(i).await.unwrap(), i);
            }
        });
    });
    // `block_on` allocates once when its future first goes pending, whatever the future.
    assert_eq!(
        pending.count_total, bare.count_total,
        "#[critical], pending once: {pending:?}"
    );
}

#[velocity_policy::critical(hedge(after = "20ms"), deadline = "1s")]
#[velocity_policy::idempotent]
async fn hedged(id: u64, slow: bool) -> Result<u64, AppError> {
    if slow {
        // The first attempt is slow, its hedge quick.
        let first = HEDGE_ATTEMPT.with(|n| n.replace(n.get() + 1) == 0);
        let ms = if first { 100 } else { 1 };
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    Ok(id)
}

thread_local! {
    static HEDGE_ATTEMPT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[test]
fn a_hedged_call_allocates_nothing_whether_or_not_its_hedge_starts() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        for i in 0..100 {
            hedged(i, false).await.unwrap();
            HEDGE_ATTEMPT.with(|n| n.set(0));
            hedged(i, true).await.unwrap();
        }
    });
    // The hedge's timer is armed and not needed: the answer comes first.
    let quick = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                assert_eq!(hedged(i, false).await.unwrap(), i);
            }
        });
    });
    assert_eq!(quick.count_total, 0, "hedged, answered at once: {quick:?}");
    let bare = allocation_counter::measure(|| {
        rt.block_on(async {
            for _ in 0..1_000u64 {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        });
    });
    // Slow: the hedge starts after 20 ms (its own copy of the arguments, its own future in
    // the call's state) and answers; the first attempt is dropped.
    let slow = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                HEDGE_ATTEMPT.with(|n| n.set(0));
                assert_eq!(hedged(i, true).await.unwrap(), i);
            }
        });
    });
    assert_eq!(
        slow.count_total, bare.count_total,
        "hedged, the hedge answering: {slow:?}"
    );
    let hedge = velocity_policy::Registry::global()
        .find_hedge(concat!(module_path!(), "::", "hedged"))
        .unwrap()
        .snapshot();
    // Half the calls hedge, more than the allowance's 20% + 10/s: it stops some of them.
    assert_eq!(
        hedge.won + hedge.stopped_by_budget,
        1_100,
        "every slow call was answered by its hedge, or its hedge was refused by the allowance: {hedge:?}"
    );
    assert!(hedge.won > 500 && hedge.stopped_by_budget > 0, "{hedge:?}");
}
