//! The Redis store on a primary that Redis Sentinel manages, started by the test
//! (`velocity_policy_testkit::RedisSentinel`: a primary, its replica and three sentinels on free loopback
//! ports): openings shared as on one server, and a failover (the primary killed, the replica
//! promoted) survived with the promise of an outage: callers never see it, sharing resumes.
#![cfg(feature = "redis")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use velocity_policy_runtime::redis_store::RedisStore;
use velocity_policy_runtime::{Breaker, Sharing};
use velocity_policy_testkit::RedisSentinel;

async fn store(setup: &RedisSentinel, label: &str) -> Arc<RedisStore> {
    Arc::new(
        RedisStore::builder()
            .prefix(setup.key_prefix(label))
            .timeout(Duration::from_secs(2))
            // No periodic re-sync: after the failover, the opening travels on the channel of
            // the new primary, which the subscriber found by asking the sentinels.
            .resync_every(Duration::from_secs(3600))
            .connect_sentinel(setup.sentinel_urls(), RedisSentinel::SERVICE)
            .await
            .unwrap(),
    )
}

fn breaker(store: &Arc<RedisStore>, name: &str) -> Breaker {
    Breaker::builder(name)
        .open_after_failures(3, Duration::from_secs(30))
        .cooldown(Duration::from_secs(20))
        .sharing(Sharing::Openings { quorum: 1 })
        .store(store.clone())
        .build()
}

async fn refuses_within(breaker: &Breaker, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if breaker.check().is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_is_invisible_to_callers_and_sharing_resumes_on_the_new_primary() {
    let Some(mut setup) = RedisSentinel::start() else {
        return;
    };
    let (a, b) = (store(&setup, "fleet").await, store(&setup, "fleet").await);
    let (pa, pb) = (breaker(&a, "payments"), breaker(&b, "payments"));
    for _ in 0..3 {
        pa.record_failure();
    }
    assert!(
        refuses_within(&pb, Duration::from_secs(5)).await,
        "shared through the primary the sentinels named"
    );

    let (ia, ib) = (breaker(&a, "inventory"), breaker(&b, "inventory"));
    let limiter = b
        .rate_limiter("api", 1_000_000, Duration::from_secs(1))
        .timeout(Duration::from_secs(2))
        .probe_every(Duration::from_millis(100))
        .build();
    let stop = Arc::new(AtomicBool::new(false));
    let (calls, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let running: Vec<_> = (0..4)
        .map(|_| {
            let (breaker, limiter) = (ib.clone(), limiter.clone());
            let (stop, calls, errors) = (stop.clone(), calls.clone(), errors.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if limiter.acquire().await.is_ok() && breaker.check().is_ok() {
                        breaker.record_success();
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    calls.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let old_primary = setup.primary_port();
    setup.kill_primary();
    let before = calls.load(Ordering::Relaxed);
    let (setup, promoted) = tokio::task::spawn_blocking(move || {
        let promoted = setup.wait_for_failover(Duration::from_secs(60));
        (setup, promoted)
    })
    .await
    .unwrap();
    assert!(promoted, "the sentinels promoted the replica within 60 s");
    assert_ne!(setup.primary_port(), old_primary);
    assert!(
        calls.load(Ordering::Relaxed) > before,
        "callers kept calling"
    );
    assert_eq!(
        errors.load(Ordering::Relaxed),
        0,
        "no caller saw the failover"
    );

    // Sharing resumes on the new primary.
    ia.trip(Duration::from_secs(30), "503 Service Unavailable");
    assert!(
        refuses_within(&ib, Duration::from_secs(20)).await,
        "sharing resumed after the failover"
    );
    stop.store(true, Ordering::Relaxed);
    for task in running {
        task.await.unwrap();
    }
    let limits = limiter.snapshot();
    assert_eq!(limits.refused + limits.local_refused, 0, "{limits:?}");
    assert!(
        setup.command_calls().get("evalsha").copied().unwrap_or(0) > 0,
        "the new primary took the fleet's writes"
    );
}
