//! Inside an isolated test, an annotated function's handles, once resolved in the test's
//! registry, allocate nothing per call either (feature `test-registry`, on in this binary
//! through `velocity-policy-testkit`); outside one the same binary takes the static's path.

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

#[velocity_policy::resilient(
    breaker(failures = 5, within = "30s", cooldown = "20s"),
    bulkhead(max_concurrent = 8),
    deadline = "2s"
)]
async fn lookup_price(id: u64) -> Result<u64, AppError> {
    Ok(id + 1)
}

#[test]
fn an_isolated_tests_calls_allocate_nothing_once_resolved() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    for isolated in [false, true] {
        let test = isolated.then(velocity_policy_testkit::isolation::isolate);
        rt.block_on(async {
            for i in 0..1_000 {
                lookup_price(i).await.unwrap();
            }
        });
        let calls = allocation_counter::measure(|| {
            rt.block_on(async {
                for i in 0..1_000u64 {
                    assert_eq!(lookup_price(i).await.unwrap(), i + 1);
                }
            });
        });
        assert_eq!(calls.count_total, 0, "isolated: {isolated}: {calls:?}");
        if let Some(test) = test {
            assert_eq!(test.registry().snapshot().breakers.len(), 1);
        }
    }
}
