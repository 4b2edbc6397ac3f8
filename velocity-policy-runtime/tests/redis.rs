//! Fleet-wide breakers and the fleet rate limiter, against a real `redis-server`.
//!
//! Each test starts its own server on a unix socket in a temporary folder of its own
//! (`velocity_policy_testkit::RedisServer`), and its stores use a key prefix no other test uses.
//! Real time is used here: the point is what crosses the network.
#![cfg(feature = "redis")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use velocity_policy_runtime::limiter::{FailMode, RateLimitConfig};
use velocity_policy_runtime::redis_store::{RedisStore, StoreError};
use velocity_policy_runtime::{Breaker, RefusalKind, Sharing};
use velocity_policy_testkit::RedisServer;

const MS: Duration = Duration::from_millis(1);

/// A store on `server`; stores of one test given the same `label` share state. Its calls
/// may take 2 s (the default is 200 ms) before they count as timed out: on a busy machine
/// running four copies of these tests, a round trip can take longer than 200 ms, and only the
/// tests that freeze the server are about timeouts (their limiters set shorter ones).
async fn store(server: &RedisServer, label: &str) -> Arc<RedisStore> {
    Arc::new(
        RedisStore::builder()
            .prefix(server.key_prefix(label))
            .timeout(Duration::from_secs(2))
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

/// The fleet's shared secret in these tests: 32 bytes or more, as the store requires.
const FLEET_SECRET: &str = "fleet-s3cret-0123456789abcdef-0123";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// How fast an opening travels is a speed target, measured in `benches/redis.rs` (BENCHMARKS.md);
// this test pins that it arrives, within a bound generous enough for a loaded CI machine.
async fn an_opening_on_one_instance_reaches_the_others() {
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
    assert!(to_b.is_some(), "B never refused");
    assert!(to_c.is_some(), "C never refused");
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
    // Long enough that the opening reaches B well before it ends, even on a loaded machine
    // (propagation speed itself is measured in benches/redis.rs).
    ba.trip(Duration::from_millis(2000), "429 Too Many Requests");
    let tripped_at = Instant::now();
    let reached = time_until_refusing(&bb, Duration::from_secs(1)).await;
    assert!(reached.is_some(), "B never refused");
    let remaining = bb.check().unwrap_err().retry_after().unwrap();
    assert!(remaining <= Duration::from_millis(2000), "{remaining:?}");
    // Still refusing shortly before Retry-After, admitting after it.
    tokio::time::sleep(Duration::from_millis(1500).saturating_sub(tripped_at.elapsed())).await;
    assert!(bb.check().is_err());
    // B's copy of the opening ends Retry-After after it arrived, so at most the delivery time
    // after A's: admitting again within a second of that.
    tokio::time::sleep(Duration::from_millis(2000).saturating_sub(tripped_at.elapsed())).await;
    let admitting = async {
        while bb.check().is_err() {
            tokio::time::sleep(MS).await;
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(1), admitting)
            .await
            .is_ok(),
        "B still refuses a second after Retry-After"
    );
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
    // B learns the opening from the script's reply on its own worker, which may land just
    // after C heard it on pub/sub.
    assert!(
        time_until_refusing(&bb, Duration::from_secs(1))
            .await
            .is_some()
    );
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
            // Subscribed before `connect` returns even on a busy machine: a late subscription
            // re-syncs, which would be counted below.
            .timeout(Duration::from_secs(2))
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
    // Generous timeouts: this test is about the rate, not about a slow machine.
    let limiter = s
        .rate_limiter("signups", 5, Duration::from_secs(60))
        .timeout(Duration::from_secs(2))
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
        .timeout(Duration::from_secs(2))
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
    // The connection and the script are set up once, before the short timeouts are tried;
    // 150 ms rather than the default 50 ms, so a busy machine does not time out the calls made
    // before the pause (two timeouts still fit well inside the bound below).
    const TIMEOUT: Duration = Duration::from_millis(150);
    let warm_up = s
        .rate_limiter("warm_up", 100, Duration::from_secs(1))
        .timeout(Duration::from_secs(2))
        .build();
    assert!(warm_up.acquire().await.is_ok());
    let open = s
        .rate_limiter("best_effort", 100, Duration::from_secs(1))
        .on_timeout(FailMode::Open)
        .timeout(TIMEOUT)
        .build();
    let closed = s
        .rate_limiter("unbounded", 100, Duration::from_secs(1))
        .on_timeout(FailMode::Closed)
        .timeout(TIMEOUT)
        .build();
    assert!(open.acquire().await.is_ok());
    server.pause();
    let started = Instant::now();
    assert!(open.acquire().await.is_ok(), "fails open on timeout");
    let refusal = closed.acquire().await.unwrap_err();
    assert_eq!(refusal.kind(), RefusalKind::RateLimited);
    assert!(refusal.to_string().contains("timed out"), "{refusal}");
    assert!(
        // The paused server never answers: without the timeout this would hang. The bound is
        // generous (two timeouts are 300 ms) so a loaded machine does not fail it.
        started.elapsed() < Duration::from_secs(2),
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
    // A long timeout, so that a killed server is always an error here and never a timeout,
    // however slowly a loaded machine notices the closed connection.
    let open = s
        .rate_limiter("best_effort", 100, Duration::from_secs(1))
        .on_error(FailMode::Open)
        .on_timeout(FailMode::Closed)
        .timeout(Duration::from_secs(10))
        .build();
    let closed = s
        .rate_limiter("unbounded", 100, Duration::from_secs(1))
        .on_error(FailMode::Closed)
        .on_timeout(FailMode::Open)
        .timeout(Duration::from_secs(10))
        .build();
    assert!(open.acquire().await.is_ok());
    server.kill();
    assert!(open.acquire().await.is_ok(), "fails open on error");
    let refusal = closed.acquire().await.unwrap_err();
    assert!(refusal.to_string().contains("failed"), "{refusal}");
    assert_eq!(open.snapshot().failed_open, 1);
    assert_eq!(closed.snapshot().failed_closed, 1);
}

// ---- What comes from Redis is input, not truth (issue 16) ----

/// The events channel of stores built with `label` on `server`.
fn channel(server: &RedisServer, label: &str) -> String {
    format!("{}:breaker:events", server.key_prefix(label))
}

/// A well-formed, unsigned opening message.
fn message(kind: &str, name: &str, remaining_ms: u64, instance: &str) -> String {
    serde_json::json!({
        "v": 1,
        "kind": kind,
        "name": name,
        "remaining_ms": remaining_ms,
        "instance": instance,
        "issued_ms": 0,
        "cause": "published by hand",
    })
    .to_string()
}

/// Waits until `done(store status)` holds, for at most `limit`.
async fn until_status(
    store: &RedisStore,
    limit: Duration,
    done: impl Fn(&velocity_policy_runtime::breaker::StoreStatus) -> bool,
) -> velocity_policy_runtime::breaker::StoreStatus {
    let start = Instant::now();
    loop {
        let status = store.snapshot();
        if done(&status) || start.elapsed() > limit {
            return status;
        }
        tokio::time::sleep(MS).await;
    }
}

#[tokio::test]
async fn a_hostile_publish_opens_a_breaker_for_no_longer_than_its_own_configuration_allows() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (logs, _guard) = common::capture();
    let s = store(&server, "hostile").await;
    let search = Breaker::builder("search")
        .cooldown(Duration::from_secs(3))
        .sharing(SHARED)
        .store(s.clone())
        .build();
    let events = channel(&server, "hostile");
    let publish = |payload: &str| server.query(&["PUBLISH", &events, payload]).unwrap();

    // The message of the report: 18446744073709551615 ms (584 million years) on a 3 s cooldown.
    publish("failures\nsearch\n18446744073709551615\nmallory\nforever");
    publish(&message("failures", "search", u64::MAX, "mallory"));
    publish(&message("trip", "search", 24 * 3600 * 1000, "mallory"));
    publish(&message("failures", "search", 3_001, "mallory"));
    publish(&message("failures", "search", 0, "mallory"));
    let status = until_status(&s, Duration::from_secs(2), |st| st.rejected >= 5).await;
    assert_eq!(status.rejected, 5, "{status:?}");
    assert_eq!(status.received, 0);
    assert!(search.check().is_ok(), "none of them opened it");
    assert_eq!(
        logs.lines_with(&["kind=\"store_message_rejected\"", "reason=\"malformed\""])
            .len(),
        1
    );
    let out_of_range = logs.lines_with(&[
        "kind=\"store_message_rejected\"",
        "reason=\"out_of_range\"",
        "breaker=\"search\"",
        "source=\"pubsub\"",
    ]);
    assert_eq!(out_of_range.len(), 3, "{out_of_range:?}");
    assert_eq!(
        logs.lines_with(&["kind=\"store_message_rejected\"", "reason=\"out_of_range\""])
            .len(),
        4,
        "and the zero opening"
    );
    assert!(
        out_of_range
            .iter()
            .any(|l| l.contains("remaining_ms=3001") && l.contains("bound_ms=3000")),
        "{out_of_range:?}"
    );

    // Within the local bound a shared opening is taken, and lasts at most the cooldown.
    publish(&message("failures", "search", 3_000, "mallory"));
    let status = until_status(&s, Duration::from_secs(2), |st| st.received >= 1).await;
    assert_eq!(status.received, 1);
    let until = search.open_until().expect("open");
    assert!(until <= tokio::time::Instant::now() + Duration::from_secs(3));

    // The same through the state hash a re-sync loads: a forged `until` a century away.
    let prefix = server.key_prefix("hostile");
    let forged = format!("{prefix}:breaker:{{payments}}");
    server
        .query(&[
            "ZADD",
            &format!("{prefix}:breakers:open"),
            "99999999999999",
            "payments",
        ])
        .unwrap();
    server
        .query(&[
            "HSET",
            &forged,
            "until",
            "99999999999999",
            "message",
            &message("trip", "payments", 99_999_999_999, "mallory"),
        ])
        .unwrap();
    let late = store(&server, "hostile").await;
    let payments = Breaker::builder("payments")
        .sharing(SHARED)
        .store(late.clone())
        .build();
    assert!(payments.check().is_ok(), "a forged state opens nothing");
    let status = late.snapshot();
    assert_eq!(status.rejected, 1, "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_shared_secret_only_fresh_messages_of_the_fleet_are_taken() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let signed = |secret: &'static str| {
        let server = &server;
        async move {
            Arc::new(
                RedisStore::builder()
                    .prefix(server.key_prefix("signed"))
                    .shared_secret(secret)
                    .clock_tolerance(Duration::from_millis(100))
                    .resync_every(Duration::from_secs(3600))
                    // Subscribed before `connect` returns, even on a busy machine.
                    .timeout(Duration::from_secs(2))
                    .connect(&server.url())
                    .await
                    .unwrap(),
            )
        }
    };
    let (a, b, c) = (
        signed(FLEET_SECRET).await,
        signed(FLEET_SECRET).await,
        signed("another-secret-of-32-bytes-or-more").await,
    );
    for printed in [
        format!("{a:?}"),
        format!("{:?}", RedisStore::builder().shared_secret(FLEET_SECRET)),
    ] {
        assert!(!printed.contains("s3cret"), "{printed}");
    }
    let (ba, bb, bc) = (
        breaker(&a, Sharing::TripsOnly),
        breaker(&b, Sharing::TripsOnly),
        breaker(&c, Sharing::TripsOnly),
    );
    ba.trip(Duration::from_secs(1), "429 Too Many Requests");
    assert!(
        time_until_refusing(&bb, Duration::from_secs(1))
            .await
            .is_some()
    );
    let status = until_status(&c, Duration::from_secs(1), |st| st.rejected >= 1).await;
    assert_eq!(status.rejected, 1, "another secret: {status:?}");
    assert!(bc.check().is_ok());

    // An unsigned message, well-formed and in range, is not the fleet's.
    let events = channel(&server, "signed");
    server
        .query(&[
            "PUBLISH",
            &events,
            &message("trip", "payments", 5_000, "mallory"),
        ])
        .unwrap();
    let status = until_status(&b, Duration::from_secs(1), |st| st.rejected >= 1).await;
    assert_eq!(status.rejected, 1, "unsigned: {status:?}");

    // A genuine message replayed once its opening and the tolerance are over opens nothing.
    let key = format!("{}:breaker:{{payments}}", server.key_prefix("signed"));
    let genuine = server.query(&["HGET", &key, "message"]).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(bb.check().is_ok(), "the trip is over");
    server.query(&["PUBLISH", &events, &genuine]).unwrap();
    let status = until_status(&b, Duration::from_secs(1), |st| st.rejected >= 2).await;
    assert_eq!(status.rejected, 2, "replayed: {status:?}");
    assert!(bb.check().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_openings_for_unknown_breakers_stays_within_the_pending_bound() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    const FLOOD: usize = 200_000;
    // Small chunks, each waited for: Redis disconnects a subscriber whose backlog grows past
    // 8 MB for a minute, and on a busy machine this one may be slow to read.
    const CHUNK: usize = 2_000;
    let s = Arc::new(
        RedisStore::builder()
            .prefix(server.key_prefix("flood"))
            .resync_every(Duration::from_secs(3600))
            // No call may time out on a busy machine: a recovery re-syncs, and a re-sync
            // replaces the pending openings, which would make the counts below inexact.
            .timeout(Duration::from_secs(10))
            .connect(&server.url())
            .await
            .unwrap(),
    );
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let events = channel(&server, "flood");
    for start in (0..FLOOD).step_by(CHUNK) {
        let mut pipe = redis::pipe();
        for i in start..start + CHUNK {
            pipe.cmd("PUBLISH")
                .arg(&events)
                // An hour: none may end (and leave the map) however slow the machine is.
                .arg(message("trip", &format!("ghost-{i}"), 3_600_000, "mallory"))
                .ignore();
        }
        let () = pipe.query(&mut conn).unwrap();
        // Let the subscriber keep up, as Redis disconnects a subscriber that falls far behind.
        let seen = start + CHUNK;
        let status = until_status(&s, Duration::from_secs(120), |st| {
            (st.pending + st.pending_dropped) as usize >= seen
        })
        .await;
        assert!(status.pending <= 1024, "{status:?}");
    }
    let status = s.snapshot();
    assert_eq!(
        (status.failed, status.subscribe_failed),
        (0, 0),
        "no re-sync replaced the pending openings: {status:?}"
    );
    assert_eq!(status.pending, 1024, "the default bound: {status:?}");
    assert_eq!(status.pending_dropped, (FLOOD - 1024) as u64, "{status:?}");
    assert_eq!(status.rejected, 0, "well-formed, just too many");
    // What was kept still serves a breaker built later; what was dropped opens nothing.
    let kept = Breaker::builder("ghost-0")
        .max_retry_after(Duration::from_secs(3600))
        .sharing(Sharing::TripsOnly)
        .store(s.clone())
        .build();
    assert!(kept.check().is_err());
    let dropped = Breaker::builder(format!("ghost-{}", FLOOD - 1))
        .sharing(Sharing::TripsOnly)
        .store(s.clone())
        .build();
    assert!(dropped.check().is_ok());
    assert_eq!(
        s.snapshot().pending,
        1023,
        "the built breaker took its opening"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_replaces_the_pending_openings_with_what_redis_holds() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    // No periodic re-sync during the count (it would replace the map halfway); the re-sync
    // comes from the reconnection after a restart below.
    let s = Arc::new(
        RedisStore::builder()
            .prefix(server.key_prefix("replaced"))
            .pending_capacity(4)
            .resync_every(Duration::from_secs(3600))
            .timeout(Duration::from_secs(10))
            .connect(&server.url())
            .await
            .unwrap(),
    );
    let events = channel(&server, "replaced");
    for i in 0..10 {
        let payload = message("trip", &format!("ghost-{i}"), 60_000, "mallory");
        server.query(&["PUBLISH", &events, &payload]).unwrap();
    }
    let status = until_status(&s, Duration::from_secs(10), |st| st.pending_dropped >= 6).await;
    assert_eq!((status.pending, status.pending_dropped), (4, 6));
    // None of them is in Redis (they were only published): the re-sync after the store
    // reconnects forgets them.
    server.restart();
    let status = until_status(&s, Duration::from_secs(10), |st| st.pending == 0).await;
    assert_eq!(status.pending, 0, "{status:?}");
}

#[tokio::test]
async fn failed_counts_failed_sends_only_and_a_full_queue_warns_once_per_outage() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let (logs, _guard) = common::capture();
    let s = Arc::new(
        RedisStore::builder()
            .prefix(server.key_prefix("counted"))
            .queue_capacity(2)
            .timeout(Duration::from_secs(2))
            .resync_every(Duration::from_secs(3600))
            .connect(&server.url())
            .await
            .unwrap(),
    );
    let b = breaker(&s, Sharing::TripsOnly);
    let before = s.snapshot();

    server.kill();
    // The subscriber fails to reconnect, again and again: none of that is a failed send.
    let status = until_status(&s, Duration::from_secs(2), |st| st.subscribe_failed >= 3).await;
    assert!(status.subscribe_failed >= 3, "{status:?}");
    assert_eq!((status.sent, status.failed), (before.sent, before.failed));

    // Two trips, each sent and each failed.
    for _ in 0..2 {
        b.trip(Duration::from_secs(1), "429");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = until_status(&s, Duration::from_secs(1), |st| {
        st.failed >= before.failed + 2
    })
    .await;
    assert_eq!(status.sent - before.sent, 2, "{status:?}");
    assert_eq!(status.failed - before.failed, 2, "{status:?}");

    // A burst past the queue: dropped, counted, warned once; another burst in the same outage
    // is counted and not warned again.
    let backlog = || logs.lines_with(&["kind=\"store_backlog\""]).len();
    for burst in 0..2 {
        for _ in 0..10 {
            b.trip(Duration::from_secs(1), "429");
        }
        let dropped = s.snapshot().dropped;
        assert_eq!(dropped, 8 * (burst + 1), "two fit the queue");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(backlog(), 1, "once in this outage");

    // Redis returns, then fails again: the next backlog is a new outage's, and warned.
    server.restart();
    let status = until_status(&s, Duration::from_secs(5), |st| st.healthy).await;
    assert!(status.healthy);
    server.kill();
    b.trip(Duration::from_secs(1), "429");
    let status = until_status(&s, Duration::from_secs(2), |st| !st.healthy).await;
    assert!(!status.healthy);
    for _ in 0..10 {
        b.trip(Duration::from_secs(1), "429");
    }
    assert_eq!(backlog(), 2, "once more, for the second outage");
}

// ---- The fleet limiter through an outage (issue 16) ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_under_load_refuses_no_call_the_local_rate_admits() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    const TASKS: u64 = 4;
    const CALLS: u64 = 500;
    let s = store(&server, "outage-load").await;
    let limiter = Arc::new(
        s.rate_limiter("pageviews", 100_000, Duration::from_secs(1))
            .probe_every(Duration::from_millis(100))
            // Only the outage fails a call (a killed server refuses at once), not a slow
            // machine.
            .timeout(Duration::from_secs(2))
            .build(),
    );
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut refused = 0u64;
                let mut slowest = Duration::ZERO;
                for _ in 0..CALLS {
                    let started = Instant::now();
                    if limiter.acquire().await.is_err() {
                        refused += 1;
                    }
                    slowest = slowest.max(started.elapsed());
                    tokio::time::sleep(MS).await;
                }
                (refused, slowest)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(250)).await;
    let before_outage = limiter.snapshot();
    server.kill();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let in_outage = limiter.snapshot();
    server.restart();
    let mut refused = 0;
    let mut slowest = Duration::ZERO;
    for task in tasks {
        let (r, s) = task.await.unwrap();
        refused += r;
        slowest = slowest.max(s);
    }
    // Calls after the run, until a probe has found redis again (the probe runs only while
    // calls come in).
    let mut after = 0;
    let back = Instant::now();
    while limiter.snapshot().degraded && back.elapsed() < Duration::from_secs(10) {
        assert!(limiter.acquire().await.is_ok());
        after += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let end = limiter.snapshot();
    eprintln!(
        "outage under load: {} calls, {refused} refused; before the outage {} admitted by redis, during it {} by the local rate, at the end {end:?}; slowest call {slowest:?}",
        TASKS * CALLS,
        before_outage.admitted,
        in_outage.local_admitted,
    );
    assert_eq!(refused, 0, "no call refused: {end:?}");
    assert_eq!(end.refused + end.local_refused + end.failed_closed, 0);
    assert_eq!(
        end.admitted + end.local_admitted,
        TASKS * CALLS + after,
        "{end:?}"
    );
    assert!(
        in_outage.degraded && in_outage.local_admitted > 0,
        "{in_outage:?}"
    );
    assert!(!end.degraded, "back on redis after it returned: {end:?}");
    // Round trips that failed: at most one per task in flight when the outage began, since
    // after the first failure no call waits on redis (probes run off the callers' path).
    let failed_round_trips = end.store_calls - end.admitted - end.refused;
    assert!(failed_round_trips <= TASKS, "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_an_outage_the_local_rate_bounds_the_instance_without_asking_redis() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let s = store(&server, "local-rate").await;
    let limiter = s
        .rate_limiter("signups", 100, Duration::from_secs(60))
        .local_rate(3, Duration::from_secs(60))
        .timeout(Duration::from_secs(2))
        .build();
    assert!(limiter.acquire().await.is_ok());
    assert_eq!(limiter.snapshot().admitted, 1);
    server.kill();
    for i in 0..3 {
        assert!(limiter.acquire().await.is_ok(), "local call {i}");
    }
    let refusal = limiter.acquire().await.unwrap_err();
    assert_eq!(refusal.kind(), RefusalKind::RateLimited);
    assert!(
        refusal
            .to_string()
            .contains("this instance's own 3 per 60s"),
        "{refusal}"
    );
    let wait = refusal.retry_after().unwrap();
    assert!(
        wait > Duration::from_secs(19) && wait <= Duration::from_secs(20),
        "{wait:?}"
    );
    let snap = limiter.snapshot();
    assert_eq!((snap.local_admitted, snap.local_refused), (3, 1));
    assert_eq!(
        snap.store_calls, 2,
        "one before the outage, one that found it"
    );
}

/// Every way in (standalone, `rediss://`, a cluster's nodes, sentinels and the primary behind
/// them): an unusable string is an error that repeats nothing of it, and an unreachable server
/// is logged and printed (`Debug`) without its address or password.
#[tokio::test]
async fn no_topology_prints_its_connection_strings() {
    const SECRET: &str = "s3cr3t-pass";
    let printed = |text: &str, what: &str| {
        assert!(
            !text.contains(SECRET),
            "{what} printed the password: {text}"
        );
        assert!(
            !text.contains("127.0.0.1"),
            "{what} printed the address: {text}"
        );
    };
    let bad = format!("redis://user:{SECRET}@[::1");
    let builder = || {
        RedisStore::builder()
            .timeout(Duration::from_millis(100))
            .primary_credentials(Some("user"), SECRET)
    };
    printed(&format!("{:?}", builder()), "the builder's Debug");
    for err in [
        builder().connect(&bad).await.unwrap_err(),
        builder().connect_cluster([bad.as_str()]).await.unwrap_err(),
        builder().connect_cluster([""; 0]).await.unwrap_err(),
        builder()
            .connect_sentinel([bad.as_str()], "primary")
            .await
            .unwrap_err(),
    ] {
        assert_eq!(err, StoreError::InvalidUrl);
        printed(&format!("{err} {err:?}"), "an error");
    }

    // Port 1 on loopback: nothing listens there.
    let dead = format!("redis://user:{SECRET}@127.0.0.1:1/");
    let (logs, _guard) = common::capture();
    let mut stores = vec![
        builder().connect(&dead).await.unwrap(),
        builder().connect_cluster([dead.as_str()]).await.unwrap(),
        builder()
            .connect_sentinel([dead.as_str()], "primary")
            .await
            .unwrap(),
    ];
    let tls = format!("rediss://user:{SECRET}@127.0.0.1:1/");
    stores.push(builder().connect(&tls).await.unwrap());
    for store in &stores {
        let breaker = breaker(&Arc::new(store.clone()), Sharing::TripsOnly);
        breaker.trip(Duration::from_secs(5), "429");
        assert!(breaker.check().is_err(), "the breaker works without Redis");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for store in &stores {
        assert!(!store.is_healthy(), "{store:?}");
        printed(&format!("{store:?}"), "a store's Debug");
    }
    assert!(!logs.lines_with(&["kind=\"store_unavailable\""]).is_empty());
    printed(&logs.text(), "the logs");
}

// ---- Rate limits that run (issue 22): the registry's limiter through a limiter store ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_limiter_with_a_limiter_store_decides_for_the_fleet_and_honours_on_error() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let s = store(&server, "registry-limits").await;
    let registry = velocity_policy_runtime::Registry::new();
    registry.set_limiter_store((*s).clone());
    // A long timeout, so that a killed server is an error here, never a timeout.
    let open = registry.rate_limiter("best_effort", 100, Duration::from_secs(1), |l| {
        l.config(
            RateLimitConfig::new(100, Duration::from_secs(1))
                .with_on_error(FailMode::Open)
                .with_on_timeout(FailMode::Closed)
                .with_timeout(Duration::from_secs(10)),
        )
    });
    let closed = registry.rate_limiter("unbounded", 2, Duration::from_secs(60), |l| {
        l.config(
            RateLimitConfig::new(2, Duration::from_secs(60))
                .with_on_error(FailMode::Closed)
                .with_on_timeout(FailMode::Open)
                .with_timeout(Duration::from_secs(10)),
        )
    });
    assert_eq!((open.scope(), closed.scope()), ("fleet", "fleet"));
    // A second instance's limiter of the same name shares the fleet's rate.
    let other = store(&server, "registry-limits").await;
    let elsewhere = velocity_policy_runtime::Registry::new();
    elsewhere.set_limiter_store((*other).clone());
    let closed_elsewhere = elsewhere.rate_limiter("unbounded", 2, Duration::from_secs(60), |l| {
        l.config(
            RateLimitConfig::new(2, Duration::from_secs(60)).with_timeout(Duration::from_secs(10)),
        )
    });
    closed.acquire().await.unwrap();
    closed_elsewhere.acquire().await.unwrap();
    let refusal = closed.acquire().await.unwrap_err();
    assert_eq!(refusal.kind(), RefusalKind::RateLimited);
    let wait = refusal.retry_after().unwrap();
    assert!(
        wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
        "the fleet's wait: {wait:?}"
    );
    assert!(open.acquire().await.is_ok());

    server.kill();
    assert!(open.acquire().await.is_ok(), "fails open on error");
    let refusal = closed.acquire().await.unwrap_err();
    assert!(refusal.to_string().contains("failed"), "{refusal}");
    assert_eq!(refusal.retry_after(), None);
    #[cfg(feature = "tower")]
    {
        use tower::{Service, ServiceBuilder, ServiceExt};
        use velocity_policy_runtime::layer::{BoxError, RateLimitLayer};
        let mut service = ServiceBuilder::new()
            .layer(RateLimitLayer::new(closed.clone()))
            .service_fn(|n: u32| async move { Ok::<_, BoxError>(n) });
        let error = service.ready().await.unwrap().call(1).await.unwrap_err();
        let refusal = error
            .downcast_ref::<velocity_policy_runtime::ResilienceError>()
            .unwrap();
        assert_eq!(refusal.kind(), RefusalKind::RateLimited);
    }
    let snapshot = registry.snapshot();
    let row = |name: &str| {
        snapshot
            .limiters
            .iter()
            .find(|row| &*row.name == name)
            .unwrap()
            .clone()
    };
    assert_eq!(row("best_effort").failed_open, 1);
    assert!(row("unbounded").failed_closed >= 1);
    assert_eq!(row("unbounded").scope, "fleet");
    assert_eq!(row("unbounded").refused, 1);
}

// ---- The store's and the limiter's events carry the stable fields (issue 20) ----

#[tokio::test]
async fn store_and_limiter_events_carry_their_mechanism_and_a_reason_code() {
    // Port 1 on loopback: nothing listens there, so every command is refused.
    let dead = "redis://127.0.0.1:1/";
    let (logs, _guard) = common::capture();
    let store = Arc::new(
        RedisStore::builder()
            .timeout(Duration::from_millis(100))
            .connect(dead)
            .await
            .unwrap(),
    );
    let b = breaker(&store, Sharing::TripsOnly);
    b.trip(Duration::from_secs(5), "429");
    let limiter = store
        .rate_limiter("metered_signups", 5, Duration::from_secs(60))
        .on_error(FailMode::Open)
        .on_timeout(FailMode::Open)
        .build();
    assert!(limiter.acquire().await.is_ok(), "fails open");
    tokio::time::sleep(Duration::from_millis(300)).await;

    let outage = logs.lines_with(&["kind=\"store_unavailable\""]);
    assert!(!outage.is_empty(), "{}", logs.text());
    assert!(
        outage[0].contains("mechanism=\"store\"") && outage[0].contains("name=\"redis\""),
        "{}",
        outage[0]
    );
    // A short code, the sentence apart in `detail`.
    assert!(
        [
            "connection_refused",
            "timeout",
            "connection_dropped",
            "io_error",
            "error"
        ]
        .iter()
        .any(|code| outage[0].contains(&format!("reason=\"{code}\""))),
        "{}",
        outage[0]
    );
    assert!(outage[0].contains("detail="), "{}", outage[0]);
    for kind in ["limiter_degraded", "limiter_failed_open"] {
        let lines = logs.lines_with(&[&format!("kind=\"{kind}\"")]);
        assert_eq!(lines.len(), 1, "{kind}: {}", logs.text());
        assert!(
            lines[0].contains("mechanism=\"rate_limiter\"")
                && lines[0].contains("name=\"metered_signups\""),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("reason=\"error\"") || lines[0].contains("reason=\"timeout\""),
            "{}",
            lines[0]
        );
    }
}

// ---- Issue 39: a writer to Redis cannot turn the protection against the service ----

#[tokio::test]
async fn a_short_or_empty_shared_secret_is_refused_with_the_fix() {
    // Refused before anything is connected: the port is never tried.
    for secret in ["", "s3cret", &"x".repeat(31)] {
        let error = RedisStore::builder()
            .shared_secret(secret)
            .connect("redis://127.0.0.1:1/")
            .await
            .unwrap_err();
        assert_eq!(
            error,
            StoreError::WeakSecret {
                bytes: secret.len()
            }
        );
        let text = error.to_string();
        assert!(
            text.contains("fewer than the 32") && text.contains("openssl rand -hex 32"),
            "{text}"
        );
        if !secret.is_empty() {
            assert!(
                !text.contains(secret),
                "the error repeats the secret: {text}"
            );
        }
    }
    // 32 bytes is enough.
    assert!(
        RedisStore::builder()
            .shared_secret("x".repeat(32))
            .timeout(Duration::from_millis(50))
            .connect("redis://127.0.0.1:1/")
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn the_store_says_at_connect_whether_it_signs_and_warns_once_when_it_does_not() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (logs, _guard) = common::capture();
    let unsigned = RedisStore::builder()
        .prefix(server.key_prefix("mode"))
        .timeout(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let signed = RedisStore::builder()
        .prefix(server.key_prefix("mode"))
        .shared_secret(FLEET_SECRET)
        .timeout(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let of = |store: &RedisStore, kind: &str| {
        logs.lines_with(&[
            &format!("kind=\"{kind}\""),
            &format!("instance=\"{}\"", store.instance()),
        ])
    };
    let said = of(&unsigned, "store_connected");
    assert_eq!(said.len(), 1, "{}", logs.text());
    assert!(
        said[0].contains("signed=false") && said[0].contains("mechanism=\"store\""),
        "{}",
        said[0]
    );
    let warned = of(&unsigned, "store_unsigned");
    assert_eq!(warned.len(), 1, "{}", logs.text());
    assert!(
        warned[0].contains("WARN") && warned[0].contains("reason=\"no_shared_secret\""),
        "{}",
        warned[0]
    );
    let said = of(&signed, "store_connected");
    assert_eq!(said.len(), 1, "{}", logs.text());
    assert!(said[0].contains("signed=true"), "{}", said[0]);
    assert!(of(&signed, "store_unsigned").is_empty(), "{}", logs.text());
    assert!(!logs.text().contains("s3cret"));
    // Working for a while warns no more.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(of(&unsigned, "store_unsigned").len(), 1);
}

#[tokio::test]
async fn a_far_future_state_cannot_hold_the_fleet_limiter_shut() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (logs, _guard) = common::capture();
    let s = store(&server, "held-shut").await;
    let limiter = s
        .rate_limiter("signups", 5, Duration::from_secs(60))
        .on_error(FailMode::Closed)
        .on_timeout(FailMode::Closed)
        .timeout(Duration::from_secs(2))
        .build();
    let key = format!("{}:ratelimit:{{signups}}", server.key_prefix("held-shut"));
    // One SET, no TTL: a theoretical arrival time three thousand years from now, then a value
    // that is no number, then a key of another type (a WRONGTYPE for a plain GET).
    let corruptions: [&[&str]; 3] = [
        &["SET", &key, "99999999999999999"],
        &["SET", &key, "not a number"],
        &["HSET", &key, "tat", "99999999999999999"],
    ];
    for (n, corrupt) in corruptions.into_iter().enumerate() {
        server.query(&["DEL", &key]).unwrap();
        server.query(corrupt).unwrap();
        assert!(
            limiter.acquire().await.is_ok(),
            "corruption {n}: decided by redis as if the key were empty"
        );
        let snapshot = limiter.snapshot();
        assert_eq!(snapshot.store_resets, n as u64 + 1, "{snapshot:?}");
        assert!(!snapshot.degraded, "redis still decides: {snapshot:?}");
        assert_eq!(snapshot.failed_closed, 0, "{snapshot:?}");
    }
    // The rate itself is kept, and no wait is longer than the period.
    for i in 1..5 {
        assert!(limiter.acquire().await.is_ok(), "call {i}");
    }
    let wait = limiter.acquire().await.unwrap_err().retry_after().unwrap();
    assert!(wait <= Duration::from_secs(60), "{wait:?}");
    let ttl: i64 = server.query(&["PTTL", &key]).unwrap().parse().unwrap();
    assert!(ttl > 0 && ttl <= 61_000, "the state expires again: {ttl}");
    let reset = logs.lines_with(&["kind=\"limiter_state_reset\"", "name=\"signups\""]);
    assert_eq!(reset.len(), 3, "{}", logs.text());
    assert!(
        reset[0].contains("WARN") && reset[0].contains("reason=\"corrupt_state\""),
        "{}",
        reset[0]
    );
    assert!(
        reset[1].contains("DEBUG"),
        "one WARN a minute: {}",
        reset[1]
    );
}

/// Bytes the server has sent to every client since it started (`INFO stats`).
fn bytes_sent(server: &RedisServer) -> u64 {
    let info = server.query(&["INFO", "stats"]).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("total_net_output_bytes:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

const HUNDRED_MB: &str = "104857600";

/// Runs `script` (which makes 100 MB values on the server) and waits until it is done: on a
/// loaded machine it may take longer than one query's read timeout.
fn make_huge(server: &RedisServer, script: &str, keys: &[&str]) {
    let count = keys.len().to_string();
    let mut args = vec!["EVAL", script, &count];
    args.extend_from_slice(keys);
    args.push(HUNDRED_MB);
    let _ = server.query(&args);
    let start = Instant::now();
    while server.query(&["PING"]).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the script never ended"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_value_in_the_breaker_state_never_crosses_the_wire() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("huge");
    let index = format!("{prefix}:breakers:open");
    let state = format!("{prefix}:breaker:{{payments}}");
    // Made on the server (`string.rep`), so the test itself sends none of it either: a 100 MB
    // name in the open-breakers index, and a 100 MB message in an open breaker's state.
    make_huge(
        &server,
        "redis.call('ZADD', KEYS[1], '99999999999999', string.rep('n', tonumber(ARGV[1])))
         redis.call('ZADD', KEYS[1], '99999999999999', 'payments')
         redis.call('HSET', KEYS[2], 'until', '99999999999999', 'message', string.rep('m', tonumber(ARGV[1])))
         return 1",
        &[&index, &state],
    );
    let before = bytes_sent(&server);
    // Connecting loads the fleet's state; the breaker built next is loaded at each re-sync.
    let s = store(&server, "huge").await;
    let payments = breaker(&s, SHARED);
    let status = until_status(&s, Duration::from_secs(10), |st| st.rejected >= 3).await;
    let sent = bytes_sent(&server) - before;
    eprintln!("two loads and more of a 200 MB state: {sent} bytes crossed the wire; {status:?}");
    assert!(status.rejected >= 3, "{status:?}");
    assert!(sent < 1024 * 1024, "{sent} bytes crossed the wire");
    assert!(payments.check().is_ok(), "nothing oversized opened it");
    // The oversized name is gone from the index; the state stays, and is never sent.
    let names: u64 = server.query(&["ZCARD", &index]).unwrap().parse().unwrap();
    assert_eq!(names, 1);
}

/// A store with the fleet's secret, re-syncing rarely: what these tests see arrives by
/// pub/sub or by the script's reply.
async fn signed_store(server: &RedisServer, label: &str) -> Arc<RedisStore> {
    Arc::new(
        RedisStore::builder()
            .prefix(server.key_prefix(label))
            .shared_secret(FLEET_SECRET)
            .timeout(Duration::from_secs(2))
            .resync_every(Duration::from_secs(3600))
            .connect(&server.url())
            .await
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_failure_records_do_not_make_a_quorum() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let quorum = Sharing::Openings { quorum: 2 };
    let (a, b, c) = (
        signed_store(&server, "forged").await,
        signed_store(&server, "forged").await,
        signed_store(&server, "forged").await,
    );
    let (ba, bb, bc) = (
        breaker(&a, quorum),
        breaker(&b, quorum),
        breaker(&c, quorum),
    );
    // A writer adds failures from instances that do not exist, scored far ahead so that no
    // window ever drops them: bare ones, and ones shaped like signed reports.
    let failures = format!(
        "{}:breaker:{{payments}}:failures",
        server.key_prefix("forged")
    );
    for member in [
        "mallory-1|1",
        "mallory-2|2",
        "mallory-3|0123456789abcdef|1767225600000|00ff",
    ] {
        server
            .query(&["ZADD", &failures, "99999999999999", member])
            .unwrap();
    }
    // One real failure: four members from four instances, a quorum by the count of members.
    ba.record_failure();
    assert_eq!(
        time_until_refusing(&bc, Duration::from_millis(500)).await,
        None,
        "forged members opened the fleet"
    );
    let status = until_status(&a, Duration::from_secs(2), |st| st.rejected >= 3).await;
    assert!(status.rejected >= 3, "{status:?}");
    assert!(
        ba.check().is_ok(),
        "one failure does not open A's own breaker"
    );
    // Genuine reports still make a quorum: two more, from two instances.
    bb.record_failure();
    ba.record_failure();
    assert!(
        time_until_refusing(&bc, Duration::from_secs(2))
            .await
            .is_some(),
        "three signed failures from two instances open the fleet"
    );
    let refusal = bc.check().unwrap_err().to_string();
    assert!(refusal.contains("from 2 or more instances"), "{refusal}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_probation_cannot_make_one_failure_open_the_fleet() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    // Unsigned: a probation far longer than the local window is not a probation.
    let (a, b) = (
        store(&server, "probation").await,
        store(&server, "probation").await,
    );
    let (ba, bb) = (breaker(&a, SHARED), breaker(&b, SHARED));
    let state = format!("{}:breaker:{{payments}}", server.key_prefix("probation"));
    server
        .query(&["HSET", &state, "until", "1", "probation", "99999999999999"])
        .unwrap();
    ba.record_failure();
    assert_eq!(
        time_until_refusing(&bb, Duration::from_millis(500)).await,
        None,
        "one failure on a forged probation opened the fleet"
    );

    // Signed: a probation within the window is one only when the opening it follows was
    // signed with the fleet's secret.
    let (c, d) = (
        signed_store(&server, "signed-probation").await,
        signed_store(&server, "signed-probation").await,
    );
    let probing = |store: &Arc<RedisStore>| {
        Breaker::builder("payments")
            .open_after_failures(3, Duration::from_secs(30))
            .cooldown(Duration::from_millis(500))
            .sharing(SHARED)
            .store(store.clone())
            .build()
    };
    let (bc, bd) = (probing(&c), probing(&d));
    let state = format!(
        "{}:breaker:{{payments}}",
        server.key_prefix("signed-probation")
    );
    server
        .query(&[
            "EVAL",
            "local t = redis.call('TIME')
             local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
             redis.call('HSET', KEYS[1], 'until', now - 1000, 'probation', now + 10000, 'message', ARGV[1])
             return 1",
            "1",
            &state,
            &message("failures", "payments", 500, "mallory"),
        ])
        .unwrap();
    bc.record_failure();
    assert_eq!(
        time_until_refusing(&bd, Duration::from_millis(500)).await,
        None,
        "one failure on an unsigned opening's probation opened the fleet"
    );
    let status = until_status(&c, Duration::from_secs(2), |st| st.rejected >= 1).await;
    assert_eq!(status.rejected, 1, "{status:?}");

    // A genuine probation still reopens the fleet on one failure: the fleet opens on three
    // signed failures, its cooldown ends, and one failing probe reopens it everywhere.
    for _ in 0..2 {
        bc.record_failure();
    }
    assert!(
        time_until_refusing(&bd, Duration::from_secs(2))
            .await
            .is_some()
    );
    let admitting = async {
        while bd.check().is_err() {
            tokio::time::sleep(MS).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(2), admitting)
        .await
        .unwrap();
    bd.record_failure();
    assert!(
        time_until_refusing(&bc, Duration::from_secs(2))
            .await
            .is_some(),
        "a probe failing in a genuine probation reopens the fleet"
    );
}

#[cfg(feature = "chaos")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_opening_is_never_shared_with_the_fleet() {
    use velocity_policy_runtime::chaos::{self, Chaos, Fault};
    use velocity_policy_runtime::{CallError, Deadline};
    let Some(server) = RedisServer::start() else {
        return;
    };
    chaos::arm();
    let (a, b) = (store(&server, "drill").await, store(&server, "drill").await);
    let (ba, bb) = (breaker(&a, SHARED), breaker(&b, SHARED));
    // An injected 429 trips A's breaker as a real one would: only A's.
    let backs_off = Chaos::builder("backs_off")
        .fault(
            Fault::TooManyRequests {
                retry_after: Duration::from_secs(5),
            },
            1.0,
        )
        .build();
    assert!(backs_off.draw(Some(&ba)).is_err());
    assert!(ba.check().is_err(), "the drill tripped A");
    // Injected failures open A on its own count, and are not reported to the fleet.
    let (fa, fb) = (
        Breaker::builder("inventory")
            .open_after_failures(3, Duration::from_secs(30))
            .cooldown(Duration::from_secs(20))
            .sharing(SHARED)
            .store(a.clone())
            .build(),
        Breaker::builder("inventory")
            .open_after_failures(3, Duration::from_secs(30))
            .cooldown(Duration::from_secs(20))
            .sharing(SHARED)
            .store(b.clone())
            .build(),
    );
    let fails = Chaos::builder("fails").fault(Fault::Error, 1.0).build();
    chaos::error_with(&fails, || "injected");
    for _ in 0..3 {
        fa.check().unwrap();
        let injection = fails.draw(Some(&fa)).unwrap();
        let ran = Deadline::after(Duration::from_secs(1))
            .run(injection.run(async { Ok::<u32, &str>(1) }))
            .await;
        assert!(matches!(
            injection.observe(&fa, ran),
            Err(CallError::Failed("injected"))
        ));
    }
    assert!(fa.check().is_err(), "A opened on the injected failures");
    assert_eq!(
        time_until_refusing(&bb, Duration::from_millis(500)).await,
        None,
        "the injected 429 reached B"
    );
    assert_eq!(
        time_until_refusing(&fb, Duration::from_millis(200)).await,
        None,
        "the injected failures reached B"
    );
    // A's re-sync pushes none of them either.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(bb.check().is_ok() && fb.check().is_ok());
    // A real trip still is shared.
    ba.trip(Duration::from_secs(5), "429 Too Many Requests");
    assert!(
        time_until_refusing(&bb, Duration::from_secs(2))
            .await
            .is_some()
    );
}
