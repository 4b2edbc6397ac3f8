//! Drills are armed only by an explicit switch at run time (issue 39): off by default even in a
//! build with the `chaos` feature, whatever a drill's declaration or switch says. Its own test
//! binary, with one test, since arming is the whole process's.
#![cfg(feature = "chaos")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::time::Duration;

use velocity_policy_runtime::chaos::{self, Chaos, Fault};
use velocity_policy_runtime::{Breaker, Registry};

#[tokio::test(start_paused = true)]
async fn a_drill_injects_nothing_until_the_process_arms_drills() {
    assert!(!chaos::is_armed(), "armed by default");
    // Built on, as a stanza without `enabled` declares it; and one switched on at run time.
    let built = Chaos::builder("built_drill")
        .fault(Fault::Refuse, 1.0)
        .build();
    let switched = Registry::global().chaos("switched_drill");
    switched.set(
        Fault::TooManyRequests {
            retry_after: Duration::from_secs(5),
        },
        1.0,
    );
    switched.enable();
    assert!(built.is_on() && switched.is_on());
    let breaker = Breaker::builder("search").build();
    for drill in [&built, &switched] {
        assert!(
            drill.draw(Some(&breaker)).is_ok(),
            "{} injected",
            drill.name()
        );
        assert!(!drill.snapshot().active);
    }
    assert!(breaker.check().is_ok(), "no injected 429 tripped it");

    chaos::arm();
    assert!(built.draw(None).is_err(), "armed: the refusal is injected");
    assert!(built.snapshot().active);
    assert!(switched.draw(Some(&breaker)).is_err());
    assert!(
        breaker.check().is_err(),
        "armed: the injected 429 tripped it"
    );

    chaos::disarm();
    assert!(built.draw(None).is_ok());
    assert_eq!(built.snapshot().faults[0].injected, 1);
}
