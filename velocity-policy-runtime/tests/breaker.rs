//! The circuit breaker's invariants (its module docs state them), one test each, on tokio's paused clock.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::advance;
use velocity_policy_runtime::breaker::{BreakerState, OpenCause};
use velocity_policy_runtime::{Breaker, RefusalKind, RefusalReason};

const S: Duration = Duration::from_secs(1);

fn payments(count: u32) -> Breaker {
    Breaker::builder("payments")
        .open_after_failures(count, 30 * S)
        .cooldown(20 * S)
        .build()
}

#[tokio::test(start_paused = true)]
async fn opens_at_the_threshold_and_refuses_naming_the_cause() {
    let b = payments(3);
    b.record_failure();
    b.record_failure();
    assert!(
        b.check().is_ok(),
        "two failures are below a threshold of three"
    );
    b.record_failure();
    let refusal = b.check().unwrap_err();
    assert_eq!(refusal.kind(), RefusalKind::BreakerOpen);
    assert_eq!(refusal.name(), "payments");
    assert_eq!(
        refusal.reason(),
        &RefusalReason::BreakerOpen {
            remaining: 20 * S,
            cause: OpenCause::Failures {
                count: 3,
                window: 30 * S
            }
        }
    );
    assert_eq!(
        refusal.to_string(),
        "breaker `payments` refused the call: open for another 20s after 3 failures within 30s"
    );
    assert_eq!(refusal.retry_after(), Some(20 * S));
}

#[tokio::test(start_paused = true)]
async fn a_count_window_is_exact_failures_31_s_apart_do_not_add_up_in_30_s() {
    // Buckets of a tenth of the window would still count the first failure 31 s later.
    let b = payments(2);
    b.record_failure();
    advance(31 * S).await;
    b.record_failure();
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.snapshot().window_failures, 1);
    // The edge itself: 30 s is not inside a 30 s window; 29.999 s is.
    advance(30 * S).await;
    b.record_failure();
    assert_eq!(b.state(), BreakerState::Closed);
    advance(29_999 * Duration::from_millis(1)).await;
    b.record_failure();
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn the_window_forgets_old_failures() {
    let b = payments(3);
    // A slow drip: two failures, then a long quiet spell, then two more.
    b.record_failure();
    b.record_failure();
    advance(34 * S).await;
    b.record_failure();
    b.record_failure();
    assert!(
        b.check().is_ok(),
        "failures 34s apart never fall in one 30s window"
    );
    assert_eq!(b.snapshot().window_failures, 2);
    // Inside the window they add up.
    advance(10 * S).await;
    b.record_failure();
    assert!(b.check().is_err());
}

#[tokio::test(start_paused = true)]
async fn trip_opens_for_exactly_retry_after() {
    let b = payments(5);
    b.trip(7 * S, "429 Too Many Requests");
    let refusal = b.check().unwrap_err();
    assert_eq!(refusal.retry_after(), Some(7 * S));
    assert!(refusal.to_string().contains("429 Too Many Requests"));
    advance(7 * S - Duration::from_millis(1)).await;
    assert!(b.check().is_err(), "still open 1ms before Retry-After");
    advance(Duration::from_millis(1)).await;
    assert!(b.check().is_ok(), "closed exactly at Retry-After");
}

#[tokio::test(start_paused = true)]
async fn trip_needs_no_counting() {
    let b = payments(100);
    b.trip(S, "503 with Retry-After: 1");
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn after_the_cooldown_one_failure_reopens() {
    let b = payments(3);
    for _ in 0..3 {
        b.record_failure();
    }
    advance(20 * S).await;
    assert!(
        b.check().is_ok(),
        "the cooldown is over: the first caller is the probe"
    );
    assert_eq!(b.state(), BreakerState::Probation);
    b.record_failure();
    let refusal = b.check().unwrap_err();
    assert!(matches!(
        refusal.reason(),
        RefusalReason::BreakerOpen {
            cause: OpenCause::ProbeFailed,
            ..
        }
    ));
    assert_eq!(b.snapshot().openings, 2);
}

#[tokio::test(start_paused = true)]
async fn a_successful_probe_closes_for_good() {
    let b = payments(3);
    for _ in 0..3 {
        b.record_failure();
    }
    advance(20 * S).await;
    b.check().unwrap();
    b.record_success();
    assert_eq!(b.state(), BreakerState::Closed);
    b.record_failure();
    assert!(
        b.check().is_ok(),
        "after a good probe it counts to the threshold again"
    );
}

#[tokio::test(start_paused = true)]
async fn failures_from_calls_admitted_before_the_opening_do_not_extend_it() {
    let b = payments(2);
    b.record_failure();
    b.record_failure();
    advance(10 * S).await;
    b.record_failure(); // a straggler
    assert_eq!(b.check().unwrap_err().retry_after(), Some(10 * S));
}

#[tokio::test(start_paused = true)]
async fn a_failure_ratio_needs_its_minimum_calls() {
    let b = Breaker::builder("search")
        .open_after_ratio(0.5, 10, 30 * S)
        .build();
    // 4 failures out of 4 calls: 100%, but below the minimum of 10 calls.
    for _ in 0..4 {
        b.record_failure();
    }
    assert!(b.check().is_ok());
    for _ in 0..5 {
        b.record_success();
    }
    // 4 of 9: still below the minimum.
    assert!(b.check().is_ok());
    b.record_failure();
    // 5 of 10: at the ratio with the minimum reached.
    let refusal = b.check().unwrap_err();
    assert!(matches!(
        refusal.reason(),
        RefusalReason::BreakerOpen {
            cause: OpenCause::FailureRatio {
                failures: 5,
                calls: 10,
                ..
            },
            ..
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn a_failure_ratio_ignores_failures_in_heavy_traffic() {
    let b = Breaker::builder("search")
        .open_after_ratio(0.5, 10, 30 * S)
        .build();
    for i in 0..1000 {
        if i % 10 == 0 {
            b.record_failure();
        } else {
            b.record_success();
        }
    }
    assert!(b.check().is_ok(), "10% failures stay below a 50% ratio");
}

#[tokio::test(start_paused = true)]
async fn every_opening_logs_one_event_with_count_and_window() {
    let (logs, _guard) = common::capture();
    let b = payments(3);
    for _ in 0..5 {
        b.record_failure();
    }
    let _ = b.check();
    let openings = logs.lines_with(&["kind=\"breaker_opened\""]);
    assert_eq!(openings.len(), 1, "{}", logs.text());
    let line = &openings[0];
    assert!(line.contains("name=\"payments\""), "{line}");
    assert!(line.contains("count=3"), "{line}");
    assert!(line.contains("window_ms=30000"), "{line}");
    // The refusal is an event too, naming its kind.
    assert_eq!(
        logs.lines_with(&["kind=\"breaker_open\"", "refused"]).len(),
        1
    );

    b.trip(4 * S, "429");
    let trips = logs.lines_with(&["kind=\"breaker_opened\"", "asked for 4s"]);
    assert_eq!(trips.len(), 1, "{}", logs.text());
}

#[tokio::test(start_paused = true)]
async fn closing_is_logged_once() {
    let (logs, _guard) = common::capture();
    let b = payments(1);
    b.record_failure();
    advance(20 * S).await;
    for _ in 0..10 {
        b.check().unwrap();
    }
    assert_eq!(logs.lines_with(&["kind=\"breaker_closed\""]).len(), 1);
}

#[test]
fn hammering_from_many_tasks_keeps_counts_exact() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    rt.block_on(async {
        // A threshold no hammering reaches: every failure must be counted exactly once.
        let b = Breaker::builder("hammered")
            .open_after_failures(1_000_000, Duration::from_secs(3600))
            .build();
        let admitted = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (b, admitted) = (b.clone(), admitted.clone());
                tokio::spawn(async move {
                    for _ in 0..2_000 {
                        if b.check().is_ok() {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                        b.record_failure();
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let snap = b.snapshot();
        assert_eq!(admitted.load(Ordering::Relaxed), 32_000);
        assert_eq!(snap.failures, 32_000);
        assert_eq!(snap.window_failures, 32_000);
        assert_eq!(snap.openings, 0);

        // Crossing a threshold from many threads opens exactly once.
        let b = Breaker::builder("raced")
            .open_after_failures(1_000, Duration::from_secs(3600))
            .cooldown(Duration::from_secs(3600))
            .build();
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let b = b.clone();
                tokio::spawn(async move {
                    for _ in 0..500 {
                        b.record_failure();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let snap = b.snapshot();
        assert_eq!(snap.openings, 1);
        assert_eq!(snap.failures, 8_000);
        assert_eq!(snap.state, BreakerState::Open);
    });
}

#[tokio::test(start_paused = true)]
async fn a_shared_opening_echoing_the_local_one_is_not_a_second_opening() {
    let b = payments(1);
    b.record_failure(); // open for 20 s
    let now = tokio::time::Instant::now();
    let echo = OpenCause::Shared {
        detail: std::sync::Arc::from("the fleet's failures reached the threshold"),
    };
    // The store answers a few milliseconds later with the same opening.
    assert!(!b.apply_shared_opening(now + 20 * S + Duration::from_millis(5), echo.clone()));
    assert_eq!(b.snapshot().openings, 1);
    // A longer opening from elsewhere (a 60 s trip) does extend it.
    assert!(b.apply_shared_opening(now + 60 * S, echo));
    assert_eq!(b.snapshot().openings, 2);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_past_the_cap_opens_for_the_cap_and_the_cause_says_what_was_asked() {
    let (logs, _guard) = common::capture();
    let default = Breaker::builder("search").build();
    default.trip(24 * 3600 * S, "429 with Retry-After: 86400");
    let cap = velocity_policy_runtime::breaker::BreakerConfig::DEFAULT_MAX_RETRY_AFTER;
    assert_eq!(cap, 300 * S);
    let now = tokio::time::Instant::now();
    assert_eq!(default.open_until(), Some(now + cap));
    match default.check().unwrap_err().reason() {
        RefusalReason::BreakerOpen {
            cause: OpenCause::Tripped { retry_after, .. },
            remaining,
        } => {
            assert_eq!(
                *retry_after,
                24 * 3600 * S,
                "the cause keeps what was asked"
            );
            assert_eq!(*remaining, cap);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        logs.lines_with(&[
            "kind=\"retry_after_capped\"",
            "asked_ms=86400000",
            "cap_ms=300000"
        ])
        .len(),
        1
    );
    advance(cap).await;
    assert!(default.check().is_ok(), "probed again after the cap");

    let short = Breaker::builder("short").max_retry_after(10 * S).build();
    short.trip(60 * S, "503");
    assert_eq!(
        short.open_until(),
        Some(tokio::time::Instant::now() + 10 * S)
    );
    short.trip(3 * S, "429");
    assert_eq!(
        short.open_until(),
        Some(tokio::time::Instant::now() + 3 * S),
        "under the cap: exactly as asked"
    );
}

#[tokio::test(start_paused = true)]
async fn a_shared_opening_never_outlasts_what_the_local_configuration_allows() {
    let b = Breaker::builder("search")
        .cooldown(3 * S)
        .max_retry_after(60 * S)
        .build();
    let now = tokio::time::Instant::now();
    let hostile = OpenCause::Shared {
        detail: Arc::from("instance x: forever"),
    };
    // A century from a store (a forged message, a clock gone wrong): cut to the longest this
    // breaker allows, the larger of its cooldown and its Retry-After cap.
    assert!(b.apply_shared_opening(now + 100 * 365 * 24 * 3600 * S, hostile));
    assert_eq!(b.open_until(), Some(now + 60 * S));
    advance(60 * S).await;
    assert!(b.check().is_ok(), "closes when the local bound ends");
}

#[tokio::test(start_paused = true)]
async fn the_probation_after_an_opening_lasts_one_window_unless_set() {
    // A long window (to catch a slow drip) and a short probation: one failure reopens only
    // while the probation lasts.
    let build = |probation: Option<Duration>| {
        let builder = Breaker::builder("probation")
            .open_after_failures(3, 600 * S)
            .cooldown(20 * S);
        match probation {
            Some(probation) => builder.probation(probation),
            None => builder,
        }
        .build()
    };
    let (by_window, set) = (build(None), build(Some(5 * S)));
    assert_eq!(set.config().probation, Some(5 * S));
    for b in [&by_window, &set] {
        for _ in 0..3 {
            b.record_failure();
        }
        assert_eq!(b.state(), BreakerState::Open);
    }
    advance(20 * S + 2 * S).await;
    assert_eq!(
        set.state(),
        BreakerState::Probation,
        "2s into a 5s probation"
    );
    advance(4 * S).await;
    assert_eq!(
        by_window.state(),
        BreakerState::Probation,
        "6s into a 600s one"
    );
    assert_eq!(
        set.state(),
        BreakerState::Closed,
        "the 5s probation is over"
    );
    by_window.record_failure();
    set.record_failure();
    assert_eq!(by_window.state(), BreakerState::Open, "one failure reopens");
    assert_eq!(
        set.state(),
        BreakerState::Closed,
        "one failure of three counted"
    );
}
