//! The Redis store on a Redis Cluster started by the test (`velocity_policy_testkit::RedisCluster`:
//! `redis-server --cluster-enabled yes` on free loopback ports, joined by `redis-cli --cluster
//! create`): the same breakers and limiter as on one server, with every key of a breaker in one
//! slot, openings on sharded pub/sub, and a primary killed while callers keep calling.
//!
//! These pin behaviour (an opening arrives, no caller sees an error, exact counts), not speed:
//! how fast an opening reaches a fleet is measured by `examples/fleet.rs` (BENCHMARKS.md).
#![cfg(feature = "redis")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use velocity_policy_runtime::limiter::FailMode;
use velocity_policy_runtime::redis_store::RedisStore;
use velocity_policy_runtime::{Breaker, RefusalKind, Sharing};
use velocity_policy_testkit::RedisCluster;

const SHARED: Sharing = Sharing::Openings { quorum: 1 };

/// A store on `cluster`; stores of one test given the same `label` share state. Calls may take
/// 2 s before they count as timed out (a loaded machine runs several test binaries at once).
async fn store(cluster: &RedisCluster, label: &str) -> Arc<RedisStore> {
    Arc::new(
        RedisStore::builder()
            .prefix(cluster.key_prefix(label))
            .timeout(Duration::from_secs(2))
            .resync_every(Duration::from_millis(500))
            .connect_cluster(cluster.urls())
            .await
            .unwrap(),
    )
}

fn breaker(store: &Arc<RedisStore>, name: &str, sharing: Sharing) -> Breaker {
    Breaker::builder(name)
        .open_after_failures(3, Duration::from_secs(30))
        .cooldown(Duration::from_secs(20))
        .max_retry_after(Duration::from_secs(60))
        .sharing(sharing)
        .store(store.clone())
        .build()
}

/// Polls `breaker.check()` until it refuses; whether it did within `limit`.
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
async fn on_a_cluster_openings_and_trips_reach_the_other_instances() {
    let Some(cluster) = RedisCluster::start(3, 0) else {
        return;
    };
    let (a, b) = (
        store(&cluster, "fleet").await,
        store(&cluster, "fleet").await,
    );
    let (pa, pb) = (
        breaker(&a, "payments", SHARED),
        breaker(&b, "payments", SHARED),
    );
    for _ in 0..3 {
        pa.check().unwrap();
        pa.record_failure();
    }
    assert!(pa.check().is_err(), "the mirror is written first");
    assert!(
        refuses_within(&pb, Duration::from_secs(5)).await,
        "B never refused"
    );
    let refusal = pb.check().unwrap_err();
    assert_eq!(refusal.kind(), RefusalKind::BreakerOpen);
    assert!(refusal.to_string().contains(a.instance()), "{refusal}");
    assert_eq!(pb.snapshot().failures, 0, "B never called the dependency");

    // Every key of the breaker is in one slot: the node serving `{payments}` holds its state.
    let prefix = cluster.key_prefix("fleet");
    let state = format!("{prefix}:breaker:{{payments}}");
    let node = cluster.primary_for("{payments}");
    assert_eq!(cluster.query(node, &["EXISTS", &state]).unwrap(), "1");
    assert_eq!(cluster.primary_for(&state), node);

    // A trip travels the same way.
    let (sa, sb) = (
        breaker(&a, "search", Sharing::TripsOnly),
        breaker(&b, "search", Sharing::TripsOnly),
    );
    sa.trip(Duration::from_secs(30), "429 Too Many Requests");
    assert!(refuses_within(&sb, Duration::from_secs(5)).await);

    // An instance started now knows both before its first admission decision.
    let late = store(&cluster, "fleet").await;
    assert!(breaker(&late, "payments", SHARED).check().is_err());
    assert!(
        breaker(&late, "search", Sharing::TripsOnly)
            .check()
            .is_err()
    );
    for s in [&a, &b, &late] {
        let status = s.snapshot();
        assert_eq!((status.rejected, status.dropped), (0, 0), "{status:?}");
    }

    // A primary dies and has no replica: the cluster is down (not every slot is served).
    // Callers see nothing of it: closed breakers admit, an opening is local, and the fleet
    // limiter decides at its local rate.
    let mut cluster = cluster;
    cluster.kill(node);
    let (oa, ob) = (breaker(&a, "orders", SHARED), breaker(&b, "orders", SHARED));
    let limiter = b
        .rate_limiter("orders", 1_000_000, Duration::from_secs(1))
        .timeout(Duration::from_secs(2))
        .build();
    // Until the other nodes have marked it failed (the 2 s node timeout) and refuse every
    // command with CLUSTERDOWN, so the limiter decides locally, and a while after.
    let (mut calls, mut errors) = (0, 0);
    let started = Instant::now();
    let mut degraded_at = None;
    while degraded_at.is_none_or(|at: Instant| at.elapsed() < Duration::from_millis(500))
        && started.elapsed() < Duration::from_secs(30)
    {
        if degraded_at.is_none() && limiter.snapshot().degraded {
            degraded_at = Some(Instant::now());
        }
        if ob.check().is_err() || limiter.acquire().await.is_err() {
            errors += 1;
        }
        ob.record_success();
        calls += 1;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(degraded_at.is_some(), "the cluster never went down");
    assert!(limiter.snapshot().local_admitted > 0);
    assert_eq!(
        errors, 0,
        "no caller saw the dead primary, in {calls} calls"
    );
    oa.trip(Duration::from_secs(30), "429 Too Many Requests");
    assert!(oa.check().is_err(), "A's own opening holds locally");
    assert!(pb.check().is_err(), "what B learned before stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_limiter_admits_its_rate_and_a_quorum_needs_two_instances() {
    let Some(cluster) = RedisCluster::start(3, 0) else {
        return;
    };
    let (a, b) = (store(&cluster, "rate").await, store(&cluster, "rate").await);
    let (la, lb) = (
        a.rate_limiter("checkout", 10, Duration::from_secs(60))
            .timeout(Duration::from_secs(2))
            .on_error(FailMode::Closed)
            .on_timeout(FailMode::Closed)
            .build(),
        b.rate_limiter("checkout", 10, Duration::from_secs(60))
            .timeout(Duration::from_secs(2))
            .on_error(FailMode::Closed)
            .on_timeout(FailMode::Closed)
            .build(),
    );
    let mut admitted = 0;
    for i in 0..20 {
        let limiter = if i % 2 == 0 { &la } else { &lb };
        if limiter.acquire().await.is_ok() {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 10, "one budget for the fleet, kept in one slot");
    assert_eq!(la.snapshot().failed_closed + lb.snapshot().failed_closed, 0);

    let quorum = Sharing::Openings { quorum: 2 };
    let (qa, qb, qc) = (
        breaker(&a, "ledger", quorum),
        breaker(&b, "ledger", quorum),
        breaker(&store(&cluster, "rate").await, "ledger", quorum),
    );
    for _ in 0..3 {
        qa.record_failure();
    }
    assert!(qa.check().is_err());
    assert!(
        !refuses_within(&qc, Duration::from_millis(300)).await,
        "one instance alone does not open the fleet"
    );
    qb.record_failure();
    assert!(
        refuses_within(&qc, Duration::from_secs(5)).await,
        "failures from two instances open it everywhere"
    );
}

/// Calls a breaker and a fleet limiter from `callers` tasks until `stop`, as a service would;
/// counts calls and errors (a refusal from either is an error: nothing here should refuse).
fn callers(
    breaker: &Breaker,
    limiter: &velocity_policy_runtime::limiter::RedisRateLimiter,
    stop: &Arc<AtomicBool>,
    calls: &Arc<AtomicU64>,
    errors: &Arc<AtomicU64>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..4)
        .map(|_| {
            let (breaker, limiter) = (breaker.clone(), limiter.clone());
            let (stop, calls, errors) = (stop.clone(), calls.clone(), errors.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let admitted = limiter.acquire().await.is_ok() && breaker.check().is_ok();
                    if admitted {
                        breaker.record_success();
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    calls.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_mid_run_costs_callers_nothing_and_sharing_resumes_after_failover() {
    let Some(mut cluster) = RedisCluster::start(3, 1) else {
        return;
    };
    let prefix = cluster.key_prefix("failover");
    // The primary that carries the fleet's openings: the events channel's slot.
    let victim = cluster.primary_for(&format!("{prefix}:breaker:events"));
    // A limiter whose key lives on the same primary, so callers' own round trips hit it.
    let limiter_name = (0..)
        .map(|i| format!("api-{i}"))
        .find(|name| cluster.primary_for(&format!("{prefix}:ratelimit:{{{name}}}")) == victim)
        .unwrap();
    // No periodic re-sync: after the failover, B hears the opening on the sharded channel,
    // which the `redis` crate moved to the promoted replica.
    let quiet = || async {
        Arc::new(
            RedisStore::builder()
                .prefix(cluster.key_prefix("failover"))
                .timeout(Duration::from_secs(2))
                .resync_every(Duration::from_secs(3600))
                .connect_cluster(cluster.urls())
                .await
                .unwrap(),
        )
    };
    let (a, b) = (quiet().await, quiet().await);
    let limiter = b
        .rate_limiter(limiter_name.as_str(), 1_000_000, Duration::from_secs(1))
        .timeout(Duration::from_secs(2))
        .probe_every(Duration::from_millis(100))
        .build();
    let (ha, hb) = (
        breaker(&a, "inventory", SHARED),
        breaker(&b, "inventory", SHARED),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (calls, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let running = callers(&hb, &limiter, &stop, &calls, &errors);

    tokio::time::sleep(Duration::from_millis(300)).await;
    let before_kill = calls.load(Ordering::Relaxed);
    cluster.kill(victim);
    // The replica takes over once the cluster notices (2 s node timeout, then an election).
    let recovered = tokio::task::spawn_blocking({
        let started = Instant::now();
        move || {
            let healthy = cluster.wait_until_healthy(Duration::from_secs(60));
            (cluster, healthy, started.elapsed())
        }
    })
    .await
    .unwrap();
    let (cluster, healthy, took) = recovered;
    assert!(healthy, "the replica took over within 60 s");
    eprintln!("the cluster failed over in {took:?}");
    let during = calls.load(Ordering::Relaxed) - before_kill;
    assert!(
        during > 0,
        "callers kept calling while the primary was down"
    );
    assert_eq!(
        errors.load(Ordering::Relaxed),
        0,
        "no caller saw the primary die or the failover"
    );

    // Sharing resumes: an opening after the failover reaches the other instance, through the
    // channel now served by the promoted replica.
    ha.trip(Duration::from_secs(30), "503 Service Unavailable");
    assert!(
        refuses_within(&hb, Duration::from_secs(20)).await,
        "sharing resumed after the failover"
    );
    stop.store(true, Ordering::Relaxed);
    for task in running {
        task.await.unwrap();
    }
    let limits = limiter.snapshot();
    assert_eq!(
        limits.refused + limits.local_refused + limits.failed_closed,
        0,
        "{limits:?}"
    );
    drop(cluster);
}
