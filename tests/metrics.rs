//! A scripted fault through real `#[resilient]` and `#[critical]` functions, recorded by
//! `metrics-util`'s `DebuggingRecorder`: the documented metrics appear with the documented
//! names, labels and values, and the counts equal the registry's snapshot.
#![cfg(feature = "metrics")]
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::float_cmp,
    reason = "a test: a failed unwrap is a failed test, and the values compared are exact"
)]

use std::time::Duration;

use metrics_util::MetricKind;
use metrics_util::debugging::DebuggingRecorder;
use velocity_policy::{DeadlineExceeded, Registry, ResilienceError};
use velocity_policy_testkit::recorder::{Recorded, with_recorder};

#[derive(Debug)]
enum AppError {
    Refused(#[expect(dead_code, reason = "matched, not read")] ResilienceError),
    TimedOut,
    Down,
}

impl From<ResilienceError> for AppError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for AppError {
    fn from(_: DeadlineExceeded) -> Self {
        Self::TimedOut
    }
}

impl velocity_policy::Transient for AppError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::Down)
    }
}

#[velocity_policy::resilient(
    breaker(failures = 2, within = "30s", cooldown = "10s"),
    bulkhead(max_concurrent = 4),
    deadline = "1s"
)]
async fn metered_lookup(fail: bool) -> Result<u32, AppError> {
    tokio::time::sleep(Duration::from_millis(100)).await;
    if fail { Err(AppError::Down) } else { Ok(7) }
}

/// An inline mechanism is named after its function, made unique by the module path.
const BREAKER: &str = "metrics::metered_lookup";
const RETRY: &str = "metrics::metered_sync";

#[test]
fn a_breaker_fault_is_recorded_as_documented_and_agrees_with_the_snapshot() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let op = [("operation", "metered_lookup")];
    with_recorder(&recorder, async {
        // Two failures of 100 ms each open the breaker; three calls are then refused at once.
        for _ in 0..2 {
            assert!(matches!(metered_lookup(true).await, Err(AppError::Down)));
        }
        for _ in 0..3 {
            assert!(matches!(
                metered_lookup(false).await,
                Err(AppError::Refused(_))
            ));
        }
        let breaker = Registry::global()
            .snapshot()
            .breakers
            .into_iter()
            .find(|b| &*b.name == BREAKER)
            .unwrap();
        let seen = Recorded::take(&snapshotter);
        let name = [("name", BREAKER)];
        assert_eq!(seen.counter("policy_breaker_openings_total", &name), 1);
        assert_eq!(breaker.openings, 1);
        let refusals = seen.counter(
            "policy_refusals_total",
            &[
                ("mechanism", "breaker"),
                ("name", BREAKER),
                ("kind", "breaker_open"),
                ("reason", "failures"),
            ],
        );
        assert_eq!(refusals, 3);
        assert_eq!(breaker.refusals, refusals);
        assert_eq!(seen.gauge("policy_breaker_state", &name), 2.0, "open");
        // Every other reason is registered, at zero.
        assert_eq!(
            seen.counter(
                "policy_refusals_total",
                &[
                    ("mechanism", "breaker"),
                    ("name", BREAKER),
                    ("kind", "breaker_open"),
                    ("reason", "retry_after"),
                ],
            ),
            0
        );
        // Durations in seconds, by outcome: the failures took their 100 ms, the refusals none.
        let failed = seen.histogram(
            "policy_call_duration_seconds",
            &[("operation", "metered_lookup"), ("outcome", "failed")],
        );
        assert_eq!(failed, [0.1, 0.1]);
        let refused = seen.histogram(
            "policy_call_duration_seconds",
            &[
                ("operation", "metered_lookup"),
                ("outcome", "refused"),
                ("refused_by", "breaker_open"),
            ],
        );
        assert_eq!(refused, [0.0, 0.0, 0.0]);
        assert!(
            seen.histogram(
                "policy_call_duration_seconds",
                &[("operation", "metered_lookup"), ("outcome", "ok")],
            )
            .is_empty()
        );
        assert_eq!(seen.histogram("policy_call_attempts", &op), [1.0; 5]);
        // The bulkhead's slots were all given back.
        assert_eq!(
            seen.gauge("policy_bulkhead_in_flight", &name),
            0.0,
            "{seen:#?}"
        );

        // After the cooldown the breaker is on probation: a failure reopens it at once...
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(matches!(metered_lookup(true).await, Err(AppError::Down)));
        let seen = Recorded::take(&snapshotter);
        assert_eq!(seen.gauge("policy_breaker_state", &name), 2.0, "open again");
        assert_eq!(seen.counter("policy_breaker_openings_total", &name), 1);
        // ... and after the next cooldown a success closes it.
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(metered_lookup(false).await.unwrap(), 7);
        let seen = Recorded::take(&snapshotter);
        assert_eq!(seen.gauge("policy_breaker_state", &name), 0.0, "closed");
        assert_eq!(
            seen.histogram(
                "policy_call_duration_seconds",
                &[("operation", "metered_lookup"), ("outcome", "ok")],
            ),
            [0.1]
        );
    });
}

#[velocity_policy::resilient(retry(attempts = 3, base = "10ms", cap = "10ms"), deadline = "1s")]
#[velocity_policy::idempotent]
async fn metered_sync() -> Result<(), AppError> {
    Err(AppError::Down)
}

#[velocity_policy::critical(deadline = "50ms")]
async fn metered_slow() -> Result<(), AppError> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(())
}

#[test]
fn retries_are_attempts_and_an_expiry_is_its_own_outcome() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, async {
        assert!(matches!(metered_sync().await, Err(AppError::Down)));
        assert!(matches!(metered_slow().await, Err(AppError::TimedOut)));
        let seen = Recorded::take(&snapshotter);
        // Three attempts, two retries, then every attempt was used.
        assert_eq!(
            seen.histogram("policy_call_attempts", &[("operation", "metered_sync")]),
            [3.0]
        );
        let retry = [("name", RETRY)];
        assert_eq!(seen.counter("policy_retries_total", &retry), 2);
        assert_eq!(
            seen.counter(
                "policy_retry_stopped_total",
                &[("name", RETRY), ("reason", "exhausted")]
            ),
            1
        );
        // The default allowance: a floor of 10 per second over 10 s, two of them used.
        assert_eq!(seen.gauge("policy_retry_budget_balance", &retry), 98.0);
        let slow = seen.histogram(
            "policy_call_duration_seconds",
            &[("operation", "metered_slow"), ("outcome", "expired")],
        );
        assert_eq!(slow, [0.05]);
    });
}

#[velocity_policy::critical(deadline = "1s", min_budget = "500ms")]
async fn metered_inner() -> Result<(), AppError> {
    Ok(())
}

#[velocity_policy::critical(deadline = "300ms")]
async fn metered_outer() -> Result<(), AppError> {
    // 300 ms left, below the inner operation's 500 ms minimum: refused, and ignored here.
    assert!(matches!(metered_inner().await, Err(AppError::Refused(_))));
    Err(AppError::Down)
}

#[test]
fn an_inner_call_nobody_listens_to_does_not_change_the_outer_calls_outcome() {
    // The inner operation's first call happens before any recorder: it stays silent.
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(async {
            assert!(matches!(metered_inner().await, Ok(())));
        });
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, async {
        assert!(matches!(metered_outer().await, Err(AppError::Down)));
        let seen = Recorded::take(&snapshotter);
        // The outer call failed with its own error; the inner refusal was the inner call's.
        assert_eq!(
            seen.histogram(
                "policy_call_duration_seconds",
                &[("operation", "metered_outer"), ("outcome", "failed")],
            ),
            [0.0]
        );
        assert!(
            seen.histogram(
                "policy_call_duration_seconds",
                &[
                    ("operation", "metered_outer"),
                    ("outcome", "refused"),
                    ("refused_by", "insufficient_budget"),
                ],
            )
            .is_empty()
        );
        assert!(
            seen.get(
                MetricKind::Histogram,
                "policy_call_duration_seconds",
                &[("operation", "metered_inner"), ("outcome", "ok")],
            )
            .is_none(),
            "the inner operation registered without a recorder"
        );
    });
}

/// A `.policy` operation as a tower layer is measured as an attribute's call is: its
/// duration by outcome (the breaker's refusals told apart from the service's failures) and
/// its attempts.
#[cfg(feature = "tower")]
#[test]
fn an_operation_layer_call_is_measured_like_an_attribute_call() {
    use tower::{Layer, Service, ServiceExt};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, async {
        let failing = tower::service_fn(|fail: bool| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if fail {
                Err::<u32, _>(velocity_policy::layer::BoxError::from("down"))
            } else {
                Ok(7)
            }
        });
        let mut service = velocity_policy::operation_layer!("metered_layer").layer(failing);
        for fail in [false, true, true, true] {
            let _ = service.ready().await.unwrap().call(fail).await;
        }
        let seen = Recorded::take(&snapshotter);
        let duration = |outcome: &str| {
            seen.histogram(
                "policy_call_duration_seconds",
                &[("operation", "metered_layer"), ("outcome", outcome)],
            )
        };
        assert_eq!(duration("ok"), [0.02]);
        // Two failures open the breaker; the third call is refused without running.
        assert_eq!(duration("failed"), [0.02, 0.02]);
        let refused = seen.histogram(
            "policy_call_duration_seconds",
            &[
                ("operation", "metered_layer"),
                ("outcome", "refused"),
                ("refused_by", "breaker_open"),
            ],
        );
        assert_eq!(refused, [0.0]);
        assert_eq!(
            seen.histogram("policy_call_attempts", &[("operation", "metered_layer")]),
            [1.0; 4]
        );
        let snapshot = Registry::global().snapshot();
        let breaker = snapshot
            .breakers
            .iter()
            .find(|b| &*b.name == "metered_layer")
            .unwrap();
        assert_eq!(
            (breaker.openings, breaker.refusals, breaker.failures),
            (1, 1, 2)
        );
    });
}
