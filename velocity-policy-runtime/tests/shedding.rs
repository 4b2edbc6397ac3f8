//! Load shedding's invariants (its module docs state them), one test each.

mod common;

use std::time::Duration;

use proptest::prelude::*;
use velocity_policy_runtime::WorkClass;
use velocity_policy_runtime::shedding::{AdmitReason, Decision, ShedReason, Thresholds, decide};
use velocity_policy_runtime::{Deadline, RefusalKind, RefusalReason, Shedder};

const MS: Duration = Duration::from_millis(1);

proptest! {
    #[test]
    fn critical_is_never_shed_for_load(load in prop::num::f64::ANY, deferred in 0.01f64..0.99, background in 0.01f64..0.99) {
        let t = Thresholds { deferred, background };
        let d = decide(WorkClass::Critical, load, Duration::from_secs(1), MS, &t);
        prop_assert_eq!(d, Decision::Admit(AdmitReason::Critical));
    }
}

#[test]
fn shedding_returns_its_reason() {
    let t = Thresholds::default();
    assert_eq!(
        decide(WorkClass::Deferred, 0.5, Duration::from_secs(1), MS, &t),
        Decision::Shed(ShedReason::Load {
            class: WorkClass::Deferred,
            load: 0.5,
            threshold: 0.5
        })
    );
    assert_eq!(
        decide(WorkClass::Deferred, 0.49, Duration::from_secs(1), MS, &t),
        Decision::Admit(AdmitReason::BelowThreshold {
            load: 0.49,
            threshold: 0.5
        })
    );
    assert_eq!(
        decide(WorkClass::Background, 0.0, 20 * MS, 200 * MS, &t),
        Decision::Shed(ShedReason::Budget {
            remaining: 20 * MS,
            expected_cost: 200 * MS
        })
    );
}

#[test]
fn work_that_cannot_finish_in_time_is_not_started_whatever_its_class() {
    let t = Thresholds::default();
    for class in [
        WorkClass::Critical,
        WorkClass::Deferred,
        WorkClass::Background,
    ] {
        // An idle server with 20ms on the clock is still the wrong place to begin 200ms work.
        let d = decide(class, 0.0, 20 * MS, 200 * MS, &t);
        assert!(
            matches!(d, Decision::Shed(ShedReason::Budget { .. })),
            "{class}"
        );
    }
}

#[test]
fn background_work_is_shed_before_deferred_work() {
    let t = Thresholds::default();
    let at = |class, load| decide(class, load, Duration::from_secs(1), MS, &t).is_admit();
    assert!(!at(WorkClass::Background, 0.3));
    assert!(at(WorkClass::Deferred, 0.3));
    assert!(!at(WorkClass::Deferred, 0.6));
    assert!(at(WorkClass::Critical, 1.0));
}

#[test]
fn an_unknown_load_sheds_optional_work() {
    let t = Thresholds::default();
    assert!(
        !decide(
            WorkClass::Deferred,
            f64::NAN,
            Duration::from_secs(1),
            MS,
            &t
        )
        .is_admit()
    );
}

#[tokio::test(start_paused = true)]
async fn a_shedder_refuses_with_the_reason_counts_it_and_logs_it() {
    let (logs, _guard) = common::capture();
    let shedder = Shedder::new("documents");
    let deadline = Deadline::after(Duration::from_secs(1));
    let refusal = shedder
        .admit(WorkClass::Background, 0.4, &deadline, 5 * MS)
        .unwrap_err();
    assert_eq!(refusal.kind(), RefusalKind::Shed);
    assert!(matches!(
        refusal.reason(),
        RefusalReason::Shed(ShedReason::Load {
            class: WorkClass::Background,
            ..
        })
    ));
    assert_eq!(
        refusal.to_string(),
        "shedding for `documents` refused the call: background work shed at load 0.40 (threshold 0.25)"
    );
    assert!(
        shedder
            .admit(WorkClass::Critical, 1.0, &deadline, 5 * MS)
            .is_ok()
    );
    let snap = shedder.snapshot();
    assert_eq!(snap.shed_load.background, 1);
    assert_eq!(snap.shed_load.critical, 0);
    let lines = logs.lines_with(&["kind=\"shed\"", "reason=\"load\"", "class=\"background\""]);
    assert_eq!(lines.len(), 1, "{}", logs.text());
}
