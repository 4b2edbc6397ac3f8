//! The deferred tail without a server: failure handling attached before the hand-over, the
//! request's queue, and the container platform's drain, on tokio's paused clock.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use velocity_policy_runtime::Registry;
use velocity_policy_runtime::defer::{
    self, AfterResponse, ContainerPlatform, ImmediatePlatform, PlatformAlreadySet, RequestId,
};

const MS: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct IndexError(&'static str);

impl std::fmt::Display for IndexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "search index unavailable: {}", self.0)
    }
}

#[tokio::test(start_paused = true)]
async fn work_deferred_in_a_request_waits_for_its_release() {
    let platform = ImmediatePlatform::new();
    let after = AfterResponse::with_platform(RequestId::new("req-1"), platform.clone());
    let ran = Arc::new(AtomicU64::new(0));

    let r = ran.clone();
    let response = after
        .scope(async move {
            assert_eq!(RequestId::current(), Some(RequestId::new("req-1")));
            defer::defer("count", async move {
                r.fetch_add(1, Ordering::SeqCst);
            });
            tokio::time::sleep(100 * MS).await;
            "saved"
        })
        .await;
    assert_eq!(response, "saved");
    platform.settled().await;
    assert_eq!(platform.handed_over(), 0, "nothing before the release");
    assert_eq!(ran.load(Ordering::SeqCst), 0);

    after.release();
    platform.settled().await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);

    // After the release, the response is finished: work goes to the platform at once.
    let r = ran.clone();
    after.defer("late", async move {
        r.fetch_add(1, Ordering::SeqCst);
    });
    platform.settled().await;
    assert_eq!(platform.handed_over(), 2);
    assert_eq!(ran.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn released_work_runs_in_the_order_it_was_deferred() {
    let platform = ImmediatePlatform::new();
    let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
    let order = Arc::new(Mutex::new(Vec::new()));
    for i in 0..5 {
        let order = order.clone();
        after.defer(format!("step-{i}"), async move {
            order.lock().unwrap().push(i);
        });
    }
    after.release();
    after.release(); // idempotent
    platform.settled().await;
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
}

#[tokio::test(start_paused = true)]
async fn a_queue_nobody_released_releases_itself_when_dropped() {
    let platform = ImmediatePlatform::new();
    let ran = Arc::new(AtomicU64::new(0));
    {
        let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
        let r = ran.clone();
        after.defer("not_lost", async move {
            r.fetch_add(1, Ordering::SeqCst);
        });
    }
    platform.settled().await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn failures_and_panics_are_logged_with_the_name_and_request_and_never_rethrown() {
    let (logs, _guard) = common::capture();
    let platform = ImmediatePlatform::new();
    let after = AfterResponse::with_platform(RequestId::new("req-42"), platform.clone());
    after.defer("index_document", async {
        tokio::time::sleep(10 * MS).await;
        Err::<(), _>(IndexError("shard 3"))
    });
    after.defer("notify_followers", async {
        let followers: Vec<u64> = Vec::new();
        let _ = followers[0];
    });
    after.defer("count_save", async { Ok::<u32, IndexError>(1) });
    let before = Registry::new().snapshot().deferred;
    after.release();
    platform.settled().await;

    let failed = logs.lines_with(&[
        "WARN",
        "task{name=\"index_document\" class=\"deferred\" request=req-42}",
        "kind=\"task_failed\"",
        "deferred task `index_document` failed: search index unavailable: shard 3",
    ]);
    assert_eq!(failed.len(), 1, "{}", logs.text());
    let panicked = logs.lines_with(&[
        "ERROR",
        "task{name=\"notify_followers\" class=\"deferred\" request=req-42}",
        "kind=\"task_panicked\"",
        "index out of bounds",
    ]);
    assert_eq!(panicked.len(), 1, "{}", logs.text());
    assert!(logs.lines_with(&["count_save", "WARN"]).is_empty());

    // Counted for the dashboard (other tests of this binary count too: compare deltas).
    let after_stats = Registry::new().snapshot().deferred;
    assert!(after_stats.finished >= before.finished + 3);
    assert!(after_stats.failed > before.failed);
    assert!(after_stats.panicked > before.panicked);
}

#[tokio::test(start_paused = true)]
async fn a_drain_waits_for_100_tasks_in_flight() {
    let platform = ContainerPlatform::new();
    let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
    for i in 0..100u64 {
        // 10 ms to 1 s of work each.
        after.defer(
            format!("task-{i}"),
            tokio::time::sleep(Duration::from_millis(10 + i * 10)),
        );
    }
    after.release();
    tokio::task::yield_now().await;
    assert_eq!(platform.in_flight(), 100);

    let start = Instant::now();
    let report = platform.shutdown(Duration::from_secs(5)).await;
    assert_eq!((report.finished, report.abandoned), (100, 0));
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(1),
        "done when the last one was"
    );
    assert_eq!(platform.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn two_drains_at_once_both_wait_for_the_deadline() {
    let platform = ContainerPlatform::new();
    let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
    after.defer("quick", tokio::time::sleep(Duration::from_millis(10)));
    after.defer("slow", tokio::time::sleep(Duration::from_secs(60)));
    after.release();
    tokio::task::yield_now().await;

    let start = Instant::now();
    let drain = |platform: ContainerPlatform| async move {
        let report = platform.shutdown(Duration::from_secs(1)).await;
        (report.finished, report.abandoned, start.elapsed())
    };
    let (a, b) = tokio::join!(drain(platform.clone()), drain(platform.clone()));
    // Each report counts what ended while it waited, and neither returns before the drain
    // deadline abandoned the slow task.
    assert_eq!(a, (1, 1, Duration::from_secs(1)));
    assert_eq!(b, (1, 1, Duration::from_secs(1)));
    assert_eq!(platform.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_drain_deadline_too_short_counts_the_abandoned_exactly_and_logs_each() {
    let (logs, _guard) = common::capture();
    let platform = ContainerPlatform::new();
    let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
    for i in 0..100u64 {
        // 37 finish within 370 ms, 63 would take 10 s or more.
        let work = if i < 37 { (i + 1) * 10 } else { 10_000 + i };
        after.defer(
            format!("drain-{i}"),
            tokio::time::sleep(Duration::from_millis(work)),
        );
    }
    after.release();

    let start = Instant::now();
    let report = platform.shutdown(Duration::from_secs(1)).await;
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!((report.finished, report.abandoned), (37, 63));
    for i in 37..100 {
        let name = format!("deferred task `drain-{i}` abandoned: the drain deadline passed");
        assert_eq!(logs.lines_with(&[&name]).len(), 1, "{}", logs.text());
    }
    assert_eq!(
        logs.lines_with(&["kind=\"task_abandoned\""]).len(),
        63,
        "{}",
        logs.text()
    );

    // After the drain, work handed over is abandoned at once, and says so.
    after.defer("too_late", async {});
    assert_eq!(
        logs.lines_with(&["`too_late` abandoned: handed over after the platform was shut down"])
            .len(),
        1,
        "{}",
        logs.text()
    );
}

#[tokio::test(start_paused = true)]
async fn work_handed_over_during_the_drain_is_waited_for_too() {
    let platform = ContainerPlatform::new();
    let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
    let inner_platform = platform.clone();
    after.defer("fan_out", async move {
        tokio::time::sleep(100 * MS).await;
        let next = AfterResponse::with_platform(RequestId::next(), inner_platform);
        next.defer("fanned", tokio::time::sleep(200 * MS));
        next.release();
    });
    after.release();
    let report = platform.shutdown(Duration::from_secs(1)).await;
    assert_eq!((report.finished, report.abandoned), (2, 0));
}

#[tokio::test(start_paused = true)]
async fn defer_outside_a_request_goes_to_the_process_platform_at_once() {
    // The only test of this binary that touches the process-level platform.
    let platform = ImmediatePlatform::new();
    defer::set_platform(platform.clone()).unwrap();
    assert_eq!(
        defer::set_platform(ContainerPlatform::new()),
        Err(PlatformAlreadySet)
    );
    let (logs, _guard) = common::capture();
    let ran = Arc::new(AtomicU64::new(0));
    for _ in 0..2 {
        let r = ran.clone();
        defer::defer("outside", async move {
            r.fetch_add(1, Ordering::SeqCst);
        });
    }
    assert_eq!(platform.handed_over(), 2, "handed over at once");
    platform.settled().await;
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    // Said once, with the fix: without the layer, work deferred in a handler runs at once.
    let warned = logs.lines_with(&[
        "WARN",
        "kind=\"no_after_response\"",
        "deferred task `outside` started at once",
        ".layer(velocity_policy::AfterResponseLayer::new())",
    ]);
    assert_eq!(warned.len(), 1, "{}", logs.text());
    // Nothing to drain on a platform that keeps nothing itself.
    assert_eq!(
        defer::shutdown(Duration::from_secs(1)).await,
        Default::default()
    );
}

#[test]
fn work_handed_over_outside_a_runtime_is_abandoned_and_logged() {
    let (logs, _guard) = common::capture();
    let platform = ContainerPlatform::new();
    let after = AfterResponse::with_platform(RequestId::next(), platform);
    after.defer("no_runtime", async {});
    after.release();
    assert_eq!(
        logs.lines_with(&["`no_runtime` abandoned: handed over outside a tokio runtime"])
            .len(),
        1,
        "{}",
        logs.text()
    );
}

#[cfg(feature = "serde")]
#[test]
fn the_snapshot_serializes_deferred_work_for_dashboards() {
    let json = serde_json::to_value(Registry::new().snapshot()).unwrap();
    for field in [
        "queued",
        "running",
        "finished",
        "failed",
        "panicked",
        "abandoned",
    ] {
        assert!(json["deferred"][field].is_u64(), "{field}: {json}");
    }
    assert!(json["background"].is_array());
}

/// Issue 39: a drain deadline of `Duration::MAX` ("wait for everything") saturates instead of
/// overflowing `Instant + Duration`: the drain waits for the work and returns.
#[tokio::test(start_paused = true)]
async fn a_drain_deadline_of_duration_max_waits_for_the_work_and_returns() {
    let platform = ContainerPlatform::new();
    let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
    after.defer("slow", tokio::time::sleep(Duration::from_secs(3600)));
    after.release();
    tokio::task::yield_now().await;
    let start = Instant::now();
    let report = platform.shutdown(Duration::MAX).await;
    assert_eq!((report.finished, report.abandoned), (1, 0));
    assert_eq!(start.elapsed(), Duration::from_secs(3600));
}
