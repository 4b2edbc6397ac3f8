//! The testing guide's first example (the facade's `velocity_policy::guide::testing`), as a user writes
//! it: a slow dependency, the latency bound and the breaker opening, asserted in under 20 lines.

use std::time::Duration;

use velocity_policy_testkit::assert::{breaker_opens_after, no_call_outlives};

#[derive(Debug)]
enum Error {
    Refused,
    TimedOut,
}

impl From<velocity_policy::ResilienceError> for Error {
    fn from(_: velocity_policy::ResilienceError) -> Self {
        Self::Refused
    }
}

impl From<velocity_policy::DeadlineExceeded> for Error {
    fn from(_: velocity_policy::DeadlineExceeded) -> Self {
        Self::TimedOut
    }
}

// --- from here, the guide's example

/// The function under test; its dependency hangs for 5 s.
#[velocity_policy::resilient(
    breaker(failures = 3, within = "30s", cooldown = "10s"),
    deadline = "200ms"
)]
async fn quote_price() -> Result<u32, Error> {
    tokio::time::sleep(Duration::from_secs(5)).await; // the slow dependency
    Ok(42)
}

#[tokio::test(start_paused = true)]
async fn a_slow_dependency_is_bounded_and_opens_its_breaker() {
    let _test = velocity_policy_testkit::isolation::isolate(); // a registry of its own
    let latency = no_call_outlives(Duration::from_secs(1), 2, quote_price).await;
    assert_eq!(latency.max, Duration::from_millis(200)); // the function's deadline, not 5 s
    velocity_policy_testkit::isolation::reset(); // forget those two timeouts
    let breaker = breaker_opens_after("quote_price", 3, Duration::from_secs(30), quote_price).await;
    assert_eq!(breaker.open_for, Some(Duration::from_secs(10)));
}
