//! Through the attributes: an expiry under a budget the caller shortened is the caller's, never
//! the dependency's failure. The breaker `profiles` is in `tests/policies/service.policy`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::sleep;
use velocity_policy::{CallError, Deadline, Registry};

static CALLS: AtomicU32 = AtomicU32::new(0);

/// The profile store answers in 130 ms; the lookup's own deadline is 150 ms.
#[velocity_policy::resilient(breaker = "profiles", deadline = "150ms")]
async fn lookup_profile() -> Result<u32, CallError<()>> {
    CALLS.fetch_add(1, Ordering::SeqCst);
    sleep(Duration::from_millis(130)).await;
    Ok(7)
}

fn profiles_state() -> String {
    let snapshot = Registry::global().snapshot();
    let breaker = snapshot
        .breakers
        .iter()
        .find(|b| &*b.name == "profiles")
        .map(|b| format!("{:?} {} {}", b.state, b.failures, b.caller_expiries));
    breaker.unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn short_deadlines_from_callers_never_open_an_attribute_functions_breaker() {
    // Five requests whose callers sent 110 ms: each lookup expires, the caller's expiry.
    for _ in 0..5 {
        let outcome = Deadline::from_caller(Duration::from_millis(110))
            .scope(lookup_profile())
            .await;
        assert!(
            matches!(outcome, Err(CallError::DeadlineExceeded(e)) if e.is_callers()),
            "{outcome:?}"
        );
    }
    assert_eq!(profiles_state(), "Closed 0 5");
    // An ordinary request is served, by the store.
    let calls = CALLS.load(Ordering::SeqCst);
    assert_eq!(lookup_profile().await, Ok(7));
    assert_eq!(CALLS.load(Ordering::SeqCst), calls + 1);

    // The service's own short budget is another matter: two expiries open it.
    for _ in 0..2 {
        let outcome = Deadline::after(Duration::from_millis(110))
            .scope(lookup_profile())
            .await;
        assert!(matches!(outcome, Err(CallError::DeadlineExceeded(e)) if !e.is_callers()));
    }
    assert_eq!(profiles_state(), "Open 2 5");
    assert!(matches!(lookup_profile().await, Err(CallError::Refused(_))));
}
