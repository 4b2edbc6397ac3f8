//! The bounds of deferred work: at most `max_per_request` tasks in one request's queue, at
//! most `max_concurrent` running and `max_queued` waiting, a refusal (counted and logged) past
//! them; on tokio's paused clock.
//!
//! The limits are the process's, so this binary holds one test that sets them.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use velocity_policy_runtime::WorkClass;
use velocity_policy_runtime::defer::{
    self, AfterResponse, ImmediatePlatform, Limits, LimitsAlreadySet, RequestId,
};

const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn deferred_work_is_bounded_per_request_and_in_flight_and_refusals_are_counted() {
    let (logs, _guard) = common::capture();
    defer::set_limits(
        Limits::default()
            .max_concurrent(3)
            .max_queued(2)
            .max_per_request(4),
    )
    .unwrap();
    assert_eq!(defer::set_limits(Limits::default()), Err(LimitsAlreadySet));
    assert_eq!(defer::limits().max_per_request, 4);

    let platform = ImmediatePlatform::new();
    let t0 = Instant::now();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let work = |i: u32| {
        let starts = starts.clone();
        async move {
            starts.lock().unwrap().push((i, t0.elapsed()));
            tokio::time::sleep(100 * MS).await;
        }
    };

    // One request defers six tasks: its queue holds four, the fifth and sixth are refused at
    // once, while the response is still being written.
    let first = AfterResponse::with_platform(RequestId::new("req-1"), platform.clone());
    for i in 0..6 {
        first.defer(format!("first-{i}"), work(i));
    }
    let held = defer::snapshot();
    assert_eq!((held.queued, held.refused, held.finished), (4, 2, 2));
    let refused_per_request = logs.lines_with(&[
        "kind=\"task_refused\"",
        "refused_by=\"bulkhead_full\"",
        "bulkhead `after_response` refused the call: the request's queue already holds its 4 deferred tasks",
    ]);
    assert_eq!(refused_per_request.len(), 2, "{}", logs.text());
    assert!(
        refused_per_request[0].contains("first-4"),
        "{}",
        logs.text()
    );
    assert!(
        refused_per_request[1].contains("first-5"),
        "{}",
        logs.text()
    );

    // Its response finishes: three run at once, the fourth waits for a slot.
    first.release();
    tokio::task::yield_now().await;
    let running = defer::snapshot();
    assert_eq!(
        (running.queued, running.running, running.waiting),
        (0, 3, 1)
    );

    // A second request's three tasks: one more place to wait, and two refused past the bound.
    let second = AfterResponse::with_platform(RequestId::new("req-2"), platform.clone());
    for i in 10..13 {
        second.defer(format!("second-{i}"), work(i));
    }
    second.release();
    tokio::task::yield_now().await;
    let full = defer::snapshot();
    assert_eq!((full.running, full.waiting, full.refused), (3, 2, 4));
    let refused_in_flight = logs.lines_with(&[
        "kind=\"task_refused\"",
        "request=req-2",
        "bulkhead `deferred` refused the call: all 3 slots busy and all 2 queue places taken",
    ]);
    assert_eq!(refused_in_flight.len(), 2, "{}", logs.text());

    // The admitted ones run three at a time, in the order they were handed over.
    platform.settled().await;
    assert_eq!(
        *starts.lock().unwrap(),
        vec![
            (0, Duration::ZERO),
            (1, Duration::ZERO),
            (2, Duration::ZERO),
            (3, 100 * MS),
            (10, 100 * MS),
        ]
    );

    // Every task accounted for: nine scheduled, five ran, four refused, none lost.
    let totals = defer::totals(WorkClass::Deferred);
    assert_eq!(
        (
            totals.scheduled,
            totals.finished,
            totals.refused,
            totals.succeeded()
        ),
        (9, 9, 4, 5)
    );
    assert_eq!((totals.abandoned, totals.in_flight), (0, 0));
    assert!(totals.accounted_for());
    let quiet = defer::snapshot();
    assert_eq!((quiet.running, quiet.waiting), (0, 0));
}
