//! `Duration::MAX` where a duration is configured means "as long as it takes", and saturates
//! instead of overflowing `Instant + Duration` (issue 39, point 14): the store's re-sync period,
//! the limiters' periods and the durable queue's worker drain, against a real `redis-server`
//! (the deferred work's drain is in tests/defer.rs). A panic in a background task does not fail
//! a test by itself, so these count the overflow panics of this binary.
#![cfg(feature = "redis")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use velocity_policy_runtime::queue::{Handler, TaskQueue};
use velocity_policy_runtime::redis_store::RedisStore;
use velocity_policy_runtime::{Breaker, Sharing};
use velocity_policy_testkit::RedisServer;

/// Panics of this test binary about a duration that overflowed, background tasks included.
static OVERFLOWS: AtomicU64 = AtomicU64::new(0);

fn count_overflows() {
    static HOOKED: std::sync::Once = std::sync::Once::new();
    HOOKED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let text = info.to_string();
            if text.contains("overflow when adding duration")
                || text.contains("longer than 584 years")
                || text.contains("cannot convert float seconds to Duration")
            {
                OVERFLOWS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_period_of_duration_max_saturates_instead_of_panicking() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    count_overflows();
    // "Never re-sync", and a clock tolerance of forever: the store connects, loads and shares.
    let prefix = server.key_prefix("never");
    let connect = || {
        let (prefix, url) = (prefix.clone(), server.url());
        async move {
            Arc::new(
                RedisStore::builder()
                    .prefix(prefix)
                    .timeout(Duration::from_secs(2))
                    .resync_every(Duration::MAX)
                    .clock_tolerance(Duration::MAX)
                    .connect(&url)
                    .await
                    .unwrap(),
            )
        }
    };
    let (a, b) = (connect().await, connect().await);
    let shared = |store: &Arc<RedisStore>| {
        Breaker::builder("payments")
            .sharing(Sharing::TripsOnly)
            .store(store.clone())
            .build()
    };
    let (ba, bb) = (shared(&a), shared(&b));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        OVERFLOWS.load(Ordering::SeqCst),
        0,
        "a background task of the store overflowed"
    );
    ba.trip(Duration::from_secs(5), "429 Too Many Requests");
    let start = Instant::now();
    while bb.check().is_ok() {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the trip never arrived"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limiter_period_of_duration_max_saturates_instead_of_panicking() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    count_overflows();
    let store = RedisStore::builder()
        .prefix(server.key_prefix("forever"))
        .timeout(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    // One call per "forever", decided by Redis, and by the local rate it falls back to.
    let limiter = store
        .rate_limiter("once", 1, Duration::MAX)
        .probe_every(Duration::MAX)
        .timeout(Duration::from_secs(2))
        .build();
    assert!(limiter.acquire().await.is_ok());
    let wait = limiter.acquire().await.unwrap_err().retry_after().unwrap();
    assert!(wait > Duration::from_secs(3600), "{wait:?}");
    let local = velocity_policy_runtime::limiter::LocalRate::new(1, Duration::MAX);
    assert!(local.check().is_ok());
    assert!(local.check().unwrap_err() > Duration::from_secs(3600));
    assert_eq!(OVERFLOWS.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_worker_drained_with_duration_max_waits_for_its_tasks_and_returns() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let store = RedisStore::builder()
        .prefix(server.key_prefix("drain-max"))
        .timeout(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let queue = TaskQueue::builder("media").build(&store);
    let (started, mut running) = tokio::sync::mpsc::unbounded_channel();
    let worker = queue
        .worker()
        .poll_every(Duration::from_millis(5))
        .handle(Handler::new("transcode", move |(_n,): (u32,)| {
            let _ = started.send(());
            async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok::<_, std::io::Error>(())
            }
        }))
        .start();
    queue.enqueue("transcode", &(1u32,)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), running.recv())
        .await
        .unwrap();
    let drained = tokio::time::timeout(Duration::from_secs(10), worker.shutdown(Duration::MAX))
        .await
        .unwrap();
    assert_eq!((drained.finished, drained.abandoned), (1, 0));
}
