//! The background pool: bounded, admitted through the shedding decision, shed first, with the
//! failure handling of deferred work; on tokio's paused clock.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use velocity_policy_runtime::WorkClass;
use velocity_policy_runtime::background::{self, PoolAlreadySet};
use velocity_policy_runtime::defer::{ContainerPlatform, ImmediatePlatform};
use velocity_policy_runtime::shedding::{ShedReason, Thresholds, decide};
use velocity_policy_runtime::{BackgroundPool, Bulkhead, RefusalKind, RefusalReason, Registry};

const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn at_most_max_concurrent_run_and_queued_work_starts_in_order() {
    let platform = ImmediatePlatform::new();
    let pool = BackgroundPool::builder("embeddings")
        .max_concurrent(2)
        .max_queued(3)
        .platform(platform.clone())
        .build();
    let t0 = Instant::now();
    let starts = Arc::new(Mutex::new(Vec::new()));
    for i in 0..5u32 {
        let starts = starts.clone();
        pool.submit(format!("embed-{i}"), async move {
            starts.lock().unwrap().push((i, t0.elapsed()));
            tokio::time::sleep(100 * MS).await;
        })
        .unwrap();
    }
    tokio::task::yield_now().await;
    assert_eq!((pool.running(), pool.queued()), (2, 3));
    assert_eq!(pool.load(), 1.0);

    platform.settled().await;
    let starts = starts.lock().unwrap().clone();
    assert_eq!(
        starts,
        vec![
            (0, Duration::ZERO),
            (1, Duration::ZERO),
            (2, 100 * MS),
            (3, 100 * MS),
            (4, 200 * MS)
        ]
    );
    let snap = pool.snapshot();
    assert_eq!((snap.running, snap.queued, snap.finished), (0, 0, 5));
}

#[tokio::test(start_paused = true)]
async fn a_full_pool_sheds_with_its_reason_logged_and_never_waits() {
    let (logs, _guard) = common::capture();
    let platform = ImmediatePlatform::new();
    let pool = BackgroundPool::builder("media")
        .max_concurrent(1)
        .max_queued(1)
        .platform(platform.clone())
        .build();
    pool.submit("transcode-1", tokio::time::sleep(Duration::from_secs(1)))
        .unwrap();
    pool.submit("transcode-2", tokio::time::sleep(Duration::from_secs(1)))
        .unwrap();

    let start = Instant::now();
    let refusal = pool.submit("transcode-3", async {}).unwrap_err();
    assert_eq!(start.elapsed(), Duration::ZERO, "refused at once");
    assert_eq!(refusal.kind(), RefusalKind::Shed);
    assert_eq!(
        refusal.reason(),
        &RefusalReason::Shed(ShedReason::Load {
            class: WorkClass::Background,
            load: 1.0,
            threshold: 1.0
        })
    );
    assert_eq!(
        refusal.to_string(),
        "shedding for `media` refused the call: background work shed at load 1.00 (threshold 1.00)"
    );
    let lines = logs.lines_with(&[
        "kind=\"shed\"",
        "name=\"media\"",
        "class=\"background\"",
        "reason=\"load\"",
        "of its own capacity",
    ]);
    assert_eq!(lines.len(), 1, "{}", logs.text());
    assert_eq!(pool.snapshot().shed_load, 1);

    // Room again once work ends.
    platform.settled().await;
    assert!(pool.submit("transcode-3", async {}).is_ok());
}

#[tokio::test(start_paused = true)]
async fn shed_at_keeps_headroom_below_full() {
    let pool = BackgroundPool::builder("projections")
        .max_concurrent(2)
        .max_queued(2)
        .shed_at(0.5)
        .platform(ImmediatePlatform::new())
        .build();
    pool.submit("p1", tokio::time::sleep(Duration::from_secs(1)))
        .unwrap();
    pool.submit("p2", tokio::time::sleep(Duration::from_secs(1)))
        .unwrap();
    let refusal = pool.submit("p3", async {}).unwrap_err();
    assert!(
        refusal
            .to_string()
            .ends_with("at load 0.50 (threshold 0.50)")
    );
}

#[tokio::test(start_paused = true)]
async fn background_work_is_shed_first_when_critical_work_gets_busy() {
    let (logs, _guard) = common::capture();
    let database = Bulkhead::builder("database").max_concurrent(4).build();
    let pool = BackgroundPool::builder("enrichment")
        .max_concurrent(4)
        .max_queued(16)
        .yield_to(&database)
        .platform(ImmediatePlatform::new())
        .build();
    assert!(pool.submit("enrich-0", async {}).is_ok());

    // One critical call holds a quarter of the database's compartment.
    let _critical = database.try_acquire().unwrap();
    let t = Thresholds::default();
    let plenty = Duration::from_secs(1);
    assert!(decide(WorkClass::Critical, database.load(), plenty, MS, &t).is_admit());
    assert!(decide(WorkClass::Deferred, database.load(), plenty, MS, &t).is_admit());
    let refusal = pool.submit("enrich-1", async {}).unwrap_err();
    assert_eq!(refusal.kind(), RefusalKind::Shed);
    assert_eq!(
        refusal.reason(),
        &RefusalReason::Shed(ShedReason::Load {
            class: WorkClass::Background,
            load: 0.25,
            threshold: 0.25
        })
    );
    assert_eq!(pool.snapshot().shed_pressure, 1);
    let lines = logs.lines_with(&[
        "kind=\"shed\"",
        "name=\"enrichment\"",
        "of `database`, which it yields to",
    ]);
    assert_eq!(lines.len(), 1, "{}", logs.text());
}

#[tokio::test(start_paused = true)]
async fn failures_and_panics_in_background_work_are_logged_and_contained() {
    let (logs, _guard) = common::capture();
    let platform = ImmediatePlatform::new();
    let pool = BackgroundPool::builder("thumbnails")
        .max_concurrent(1)
        .max_queued(4)
        .platform(platform.clone())
        .build();
    pool.submit("resize", async { Err::<(), _>("codec missing") })
        .unwrap();
    pool.submit("crop", async {
        let sizes: Vec<u32> = Vec::new();
        let _ = sizes[1];
    })
    .unwrap();
    let ran = Arc::new(AtomicU64::new(0));
    let r = ran.clone();
    pool.submit("after_the_panic", async move {
        r.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    platform.settled().await;

    assert_eq!(ran.load(Ordering::SeqCst), 1, "the slot was given back");
    assert_eq!(
        logs.lines_with(&[
            "task{name=\"resize\" class=\"background\"",
            "kind=\"task_failed\"",
            "background task `resize` failed: codec missing"
        ])
        .len(),
        1,
        "{}",
        logs.text()
    );
    assert_eq!(
        logs.lines_with(&[
            "task{name=\"crop\" class=\"background\"",
            "kind=\"task_panicked\""
        ])
        .len(),
        1,
        "{}",
        logs.text()
    );
    let snap = pool.snapshot();
    assert_eq!(
        (snap.finished, snap.failed, snap.panicked, snap.running),
        (3, 1, 1, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_drain_counts_queued_and_running_background_work_exactly() {
    let (logs, _guard) = common::capture();
    let platform = ContainerPlatform::new();
    let pool = BackgroundPool::builder("reindex")
        .max_concurrent(2)
        .max_queued(6)
        .platform(platform.clone())
        .build();
    // Two at a time, 300 ms each: by the 1 s deadline 6 have finished, 2 are running.
    for i in 0..8 {
        // Lazily: a `Sleep` made now would be due 300 ms from now, not from its start.
        pool.submit(format!("reindex-{i}"), async {
            tokio::time::sleep(300 * MS).await;
        })
        .unwrap();
    }
    let report = platform.shutdown(Duration::from_secs(1)).await;
    assert_eq!((report.finished, report.abandoned), (6, 2));
    assert_eq!(
        logs.lines_with(&["kind=\"task_abandoned\"", "class=\"background\""])
            .len(),
        2
    );
    let snap = pool.snapshot();
    assert_eq!(
        (snap.running, snap.queued, snap.finished, snap.abandoned),
        (0, 0, 6, 2)
    );
    assert_eq!(pool.load(), 0.0, "abandoned work gave its admission back");

    // Queued work is abandoned too, not lost: 1 slot, 4 waiting, nothing finishes in time.
    let platform = ContainerPlatform::new();
    let pool = BackgroundPool::builder("reindex-queued")
        .max_concurrent(1)
        .max_queued(4)
        .platform(platform.clone())
        .build();
    for i in 0..5 {
        pool.submit(
            format!("q-{i}"),
            tokio::time::sleep(Duration::from_secs(60)),
        )
        .unwrap();
    }
    let report = platform.shutdown(100 * MS).await;
    assert_eq!((report.finished, report.abandoned), (0, 5));
}

#[tokio::test(start_paused = true)]
async fn background_submits_to_the_process_pool_and_it_shows_in_the_snapshot() {
    // The only test of this binary that touches the process-level pool.
    let platform = ImmediatePlatform::new();
    let pool = BackgroundPool::builder("process-background")
        .max_concurrent(1)
        .max_queued(0)
        .platform(platform.clone())
        .build();
    background::set_pool(pool.clone()).unwrap();
    assert_eq!(background::set_pool(pool.clone()), Err(PoolAlreadySet));

    velocity_policy_runtime::background("slow", tokio::time::sleep(Duration::from_secs(1)))
        .unwrap();
    assert!(velocity_policy_runtime::background("shed", async {}).is_err());
    let snapshot = Registry::new().snapshot();
    let mine = snapshot
        .background
        .iter()
        .find(|p| &*p.name == "process-background")
        .unwrap();
    assert_eq!((mine.shed_load, mine.max_concurrent), (1, 1));
    platform.settled().await;
}
