//! An annotated function adds no allocation per call: measured with a counting allocator.

use policy::{DeadlineExceeded, ResilienceError};

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

impl policy::Transient for AppError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::TimedOut)
    }
}

#[policy::resilient(
    breaker(failures = 5, within = "30s", cooldown = "20s"),
    bulkhead(max_concurrent = 8),
    retry(attempts = 3, base = "10ms", cap = "100ms", attempt_timeout = "1s"),
    deadline = "2s"
)]
#[policy::idempotent]
async fn lookup(id: u64) -> Result<u64, AppError> {
    Ok(id + 1)
}

#[policy::critical(deadline = "1s", min_budget = "10ms")]
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
