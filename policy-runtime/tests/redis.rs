//! Fleet-wide breakers and the fleet rate limiter, against a real `redis-server`.
//!
//! Each test starts its own server on a unix socket in a temporary folder of its own
//! (`policy_testkit::RedisServer`), and its stores use a key prefix no other test uses.
//! Real time is used here: the point is what crosses the network.
#![cfg(feature = "redis")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use policy_runtime::limiter::FailMode;
use policy_runtime::redis_store::{RedisStore, StoreError};
use policy_runtime::{Breaker, RefusalKind, Sharing};
use policy_testkit::RedisServer;

const MS: Duration = Duration::from_millis(1);

/// A store on `server`; stores of one test given the same `label` share state.
async fn store(server: &RedisServer, label: &str) -> Arc<RedisStore> {
    Arc::new(
        RedisStore::builder()
            .prefix(server.key_prefix(label))
            .resync_every(Duration::from_millis(200))
            .connect(&server.url())
            .await
            .unwrap(),
    )
}

fn breaker(store: &Arc<RedisStore>, sharing: Sharing) -> Breaker {
    Breaker::builder("payments")
        .open_after_failures(3, Duration::from_secs(30))
        .cooldown(Duration::from_secs(20))
        .sharing(sharing)
        .store(store.clone())
        .build()
}

/// Polls `breaker.check()` until it refuses; returns how long that took.
async fn time_until_refusing(breaker: &Breaker, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if breaker.check().is_err() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(MS).await;
    }
    None
}

const SHARED: Sharing = Sharing::Openings { quorum: 1 };

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opening_on_one_instance_reaches_the_others_within_50ms() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (a, b, c) = (
        store(&server, "three").await,
        store(&server, "three").await,
        store(&server, "three").await,
    );
    let (ba, bb, bc) = (
        breaker(&a, SHARED),
        breaker(&b, SHARED),
        breaker(&c, SHARED),
    );
    for _ in 0..3 {
        ba.check().unwrap();
        ba.record_failure();
    }
    assert!(ba.check().is_err(), "the mirror is written first");
    let to_b = time_until_refusing(&bb, Duration::from_secs(2)).await;
    let to_c = time_until_refusing(&bc, Duration::from_secs(2)).await;
    eprintln!("opening reached B after {to_b:?}, C after {to_c:?}");
    assert!(to_b.is_some_and(|d| d < 50 * MS), "B: {to_b:?}");
    assert!(to_c.is_some_and(|d| d < 50 * MS), "C: {to_c:?}");
    let refusal = bb.check().unwrap_err();
    assert_eq!(refusal.kind(), RefusalKind::BreakerOpen);
    assert!(
        refusal.to_string().contains(a.instance()),
        "the refusal names the instance that opened it: {refusal}"
    );
    // B and C never recorded a call: they refused without calling the dependency.
    assert_eq!(bb.snapshot().failures, 0);
    assert_eq!(bc.snapshot().failures, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trip_on_one_instance_holds_the_others_until_retry_after() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (a, b) = (store(&server, "trip").await, store(&server, "trip").await);
    let (ba, bb) = (
        breaker(&a, Sharing::TripsOnly),
        breaker(&b, Sharing::TripsOnly),
    );
    ba.trip(Duration::from_millis(600), "429 Too Many Requests");
    let tripped_at = Instant::now();
    let reached = time_until_refusing(&bb, Duration::from_secs(1)).await;
    assert!(reached.is_some_and(|d| d < 50 * MS), "{reached:?}");
    let remaining = bb.check().unwrap_err().retry_after().unwrap();
    assert!(remaining <= Duration::from_millis(600), "{remaining:?}");
    // Still refusing shortly before Retry-After, admitting after it.
    tokio::time::sleep(Duration::from_millis(450).saturating_sub(tripped_at.elapsed())).await;
    assert!(bb.check().is_err());
    tokio::time::sleep(Duration::from_millis(700).saturating_sub(tripped_at.elapsed())).await;
    assert!(bb.check().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trips_only_sharing_keeps_failures_local() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (a, b) = (store(&server, "local").await, store(&server, "local").await);
    let (ba, bb) = (
        breaker(&a, Sharing::TripsOnly),
        breaker(&b, Sharing::TripsOnly),
    );
    for _ in 0..3 {
        ba.record_failure();
    }
    assert!(ba.check().is_err());
    assert_eq!(
        time_until_refusing(&bb, Duration::from_millis(200)).await,
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_started_while_a_breaker_is_open_refuses_on_its_first_call() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let a = store(&server, "late").await;
    let ba = breaker(&a, SHARED);
    ba.trip(Duration::from_secs(30), "503 Service Unavailable");
    // Wait until Redis holds the trip (the push is off the caller's path).
    let b = store(&server, "late").await;
    let bb = breaker(&b, SHARED);
    let _ = time_until_refusing(&bb, Duration::from_secs(1)).await;
    // A third instance, started now, knows before its first admission decision.
    let late = store(&server, "late").await;
    let first = breaker(&late, SHARED).check();
    assert_eq!(first.unwrap_err().kind(), RefusalKind::BreakerOpen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_quorum_of_two_one_instance_alone_opens_only_itself() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let quorum = Sharing::Openings { quorum: 2 };
    let (a, b, c) = (
        store(&server, "quorum").await,
        store(&server, "quorum").await,
        store(&server, "quorum").await,
    );
    let (ba, bb, bc) = (
        breaker(&a, quorum),
        breaker(&b, quorum),
        breaker(&c, quorum),
    );
    for _ in 0..3 {
        ba.record_failure();
    }
    assert!(ba.check().is_err(), "A opens its own breaker");
    assert_eq!(
        time_until_refusing(&bc, Duration::from_millis(200)).await,
        None,
        "one instance alone does not open the fleet"
    );
    assert!(bb.check().is_ok());
    // A second instance corroborates: the fleet's window now holds failures from two.
    bb.record_failure();
    let reached = time_until_refusing(&bc, Duration::from_secs(1)).await;
    assert!(
        reached.is_some(),
        "failures from two instances open it everywhere"
    );
    assert!(bb.check().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_breaker_sends_no_redis_command() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let s = Arc::new(
        RedisStore::builder()
            .prefix(server.key_prefix("quiet"))
            .resync_every(Duration::from_secs(3600))
            .connect(&server.url())
            .await
            .unwrap(),
    );
    let b = breaker(&s, SHARED);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = server.command_calls();
    for _ in 0..10_000 {
        b.check().unwrap();
        b.record_success();
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let after = server.command_calls();
    let sent: u64 = after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .map(|(name, calls)| calls - before.get(name).copied().unwrap_or(0))
        .sum();
    assert_eq!(sent, 0, "before {before:?}, after {after:?}");
}

#[tokio::test]
async fn a_redis_outage_degrades_sharing_never_callers_and_resyncs_on_return() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let (logs, _guard) = common::capture();
    let (a, b) = (
        store(&server, "outage").await,
        store(&server, "outage").await,
    );
    let (ba, bb) = (breaker(&a, SHARED), breaker(&b, SHARED));

    server.kill();
    // Calls keep their answers from the mirror; failures recorded during the outage open A's
    // breaker locally, and nothing reaches the caller but the breaker's own refusal.
    for _ in 0..50 {
        bb.check().unwrap();
        if ba.check().is_ok() {
            ba.record_failure();
        }
        tokio::time::sleep(2 * MS).await;
    }
    assert_eq!(ba.check().unwrap_err().kind(), RefusalKind::BreakerOpen);
    assert!(
        bb.check().is_ok(),
        "B cannot learn of it while Redis is down"
    );
    assert!(!a.is_healthy());
    for store in [&a, &b] {
        let instance = format!("instance=\"{}\"", store.instance());
        let outages = logs.lines_with(&["kind=\"store_unavailable\"", &instance]);
        assert_eq!(outages.len(), 1, "logged once per store, not once per call");
    }

    // Redis returns (empty: it kept nothing): A's re-sync pushes its opening, B learns it.
    server.restart();
    let reached = time_until_refusing(&bb, Duration::from_secs(5)).await;
    assert!(reached.is_some(), "state re-synced after the outage");
    assert!(!logs.lines_with(&["kind=\"store_recovered\""]).is_empty());
    assert!(
        !logs.text().contains(&server.url()),
        "no connection string in the logs"
    );
}

#[tokio::test]
async fn an_unparsable_connection_string_is_an_error_that_does_not_repeat_it() {
    let err = RedisStore::connect("redis://user:s3cr3t-pass@[::1")
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::InvalidUrl);
    assert!(!err.to_string().contains("s3cr3t"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limiter_admits_its_rate_and_refuses_beyond_it() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let s = store(&server, "rate").await;
    let limiter = s
        .rate_limiter("signups", 5, Duration::from_secs(60))
        .build();
    for i in 0..5 {
        assert!(limiter.acquire().await.is_ok(), "call {i}");
    }
    let refusal = limiter.acquire().await.unwrap_err();
    assert_eq!(refusal.kind(), RefusalKind::RateLimited);
    let wait = refusal.retry_after().unwrap();
    assert!(
        wait > Duration::from_secs(10) && wait <= Duration::from_secs(12),
        "{wait:?}"
    );
    // A second instance shares the fleet-wide rate.
    let other = store(&server, "rate").await;
    let limiter2 = other
        .rate_limiter("signups", 5, Duration::from_secs(60))
        .build();
    assert!(limiter2.acquire().await.is_err());
    assert_eq!(limiter.snapshot().refused, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limiter_fails_open_or_closed_on_timeout_as_told() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let s = store(&server, "paused").await;
    let open = s
        .rate_limiter("best_effort", 100, Duration::from_secs(1))
        .on_timeout(FailMode::Open)
        .build();
    let closed = s
        .rate_limiter("unbounded", 100, Duration::from_secs(1))
        .on_timeout(FailMode::Closed)
        .build();
    assert!(open.acquire().await.is_ok());
    server.pause();
    let started = Instant::now();
    assert!(open.acquire().await.is_ok(), "fails open on timeout");
    let refusal = closed.acquire().await.unwrap_err();
    assert_eq!(refusal.kind(), RefusalKind::RateLimited);
    assert!(refusal.to_string().contains("timed out"), "{refusal}");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "bounded by the timeout"
    );
    assert_eq!(open.snapshot().failed_open, 1);
    assert_eq!(closed.snapshot().failed_closed, 1);
    server.resume();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limiter_fails_open_or_closed_on_error_as_told() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let s = store(&server, "killed").await;
    let open = s
        .rate_limiter("best_effort", 100, Duration::from_secs(1))
        .on_error(FailMode::Open)
        .on_timeout(FailMode::Closed)
        .build();
    let closed = s
        .rate_limiter("unbounded", 100, Duration::from_secs(1))
        .on_error(FailMode::Closed)
        .on_timeout(FailMode::Open)
        .build();
    assert!(open.acquire().await.is_ok());
    server.kill();
    assert!(open.acquire().await.is_ok(), "fails open on error");
    let refusal = closed.acquire().await.unwrap_err();
    assert!(refusal.to_string().contains("failed"), "{refusal}");
    assert_eq!(open.snapshot().failed_open, 1);
    assert_eq!(closed.snapshot().failed_closed, 1);
}
