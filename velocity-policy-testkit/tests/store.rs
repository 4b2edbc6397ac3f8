//! The in-memory shared breaker store: instances see each other's openings by the Redis
//! store's rules, and an unreachable store degrades every instance to deciding alone.

use std::sync::Arc;
use std::time::Duration;

use velocity_policy_runtime::breaker::{BreakerState, BreakerStore};
use velocity_policy_runtime::{Breaker, OpenCause, Registry, Sharing};
use velocity_policy_testkit::store::{SharedMemory, SharedMemoryStore};

fn breaker(store: &Arc<SharedMemoryStore>, sharing: Sharing) -> Breaker {
    Breaker::builder("payments")
        .open_after_failures(3, Duration::from_secs(30))
        .cooldown(Duration::from_secs(20))
        .sharing(sharing)
        .store(store.clone())
        .build()
}

#[tokio::test(start_paused = true)]
async fn a_trip_on_instance_a_reaches_instance_b_and_ends_on_time() {
    let redis = SharedMemory::new();
    let (a, b) = (redis.instance("a"), redis.instance("b"));
    let (on_a, on_b) = (
        breaker(&a, Sharing::TripsOnly),
        breaker(&b, Sharing::TripsOnly),
    );

    on_a.trip(Duration::from_secs(5), "429 Too Many Requests");

    assert_eq!(on_b.state(), BreakerState::Open);
    let cause = on_b.snapshot().last_cause.expect("a cause");
    match cause {
        OpenCause::Shared { detail } => {
            assert!(detail.starts_with("instance a: "), "{detail}");
            assert!(detail.contains("429 Too Many Requests"), "{detail}");
        }
        other => panic!("expected a shared opening, got {other:?}"),
    }
    assert_eq!(b.status().received, 1);
    assert_eq!(b.status().kind, "in_memory");
    assert_eq!(b.status().instance.as_deref(), Some("b"));
    // The shared opening lasts what the trip asked for, on the paused clock.
    tokio::time::advance(Duration::from_millis(5_001)).await;
    assert!(on_b.check().is_ok());
}

#[tokio::test(start_paused = true)]
async fn failures_from_a_quorum_of_instances_open_every_instance() {
    let redis = SharedMemory::new();
    let (a, b, c) = (
        redis.instance("a"),
        redis.instance("b"),
        redis.instance("c"),
    );
    let sharing = Sharing::Openings { quorum: 2 };
    let (on_a, on_b, on_c) = (
        breaker(&a, sharing),
        breaker(&b, sharing),
        breaker(&c, sharing),
    );

    // Two failures on a: counted in the fleet's window, a single instance opens nothing.
    on_a.record_failure();
    on_a.record_failure();
    assert_eq!(redis.failures("payments"), 2);
    assert_eq!(on_c.state(), BreakerState::Closed);
    // A third, from b: three failures from two instances reach the threshold and the quorum.
    on_b.record_failure();

    assert_eq!(on_a.state(), BreakerState::Open);
    assert_eq!(on_b.state(), BreakerState::Open);
    assert_eq!(on_c.state(), BreakerState::Open);
    assert_eq!(redis.failures("payments"), 0);
    let open_for = redis
        .open_until("payments")
        .expect("stored")
        .duration_since(tokio::time::Instant::now());
    assert_eq!(open_for, Duration::from_secs(20), "the cooldown");
}

#[tokio::test(start_paused = true)]
async fn failures_from_one_instance_short_of_the_quorum_stay_local() {
    let redis = SharedMemory::new();
    let (a, b) = (redis.instance("a"), redis.instance("b"));
    let sharing = Sharing::Openings { quorum: 2 };
    let (on_a, on_b) = (breaker(&a, sharing), breaker(&b, sharing));
    for _ in 0..3 {
        on_a.record_failure();
    }
    // a opened on its own count; the fleet saw one instance only.
    assert_eq!(on_a.state(), BreakerState::Open);
    assert_eq!(on_b.state(), BreakerState::Closed);
    assert!(redis.open_until("payments").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_local_breaker_shares_nothing_and_hears_nothing() {
    let redis = SharedMemory::new();
    let (a, b) = (redis.instance("a"), redis.instance("b"));
    let (on_a, on_b) = (breaker(&a, Sharing::TripsOnly), breaker(&b, Sharing::Local));
    on_a.trip(Duration::from_secs(5), "429");
    assert_eq!(on_b.state(), BreakerState::Closed);
    let local = breaker(&a, Sharing::Local);
    local.trip(Duration::from_secs(5), "429");
    assert_eq!(b.status().received, 0);
}

#[tokio::test(start_paused = true)]
async fn an_opening_past_the_receivers_bound_is_rejected_and_counted() {
    let redis = SharedMemory::new();
    let (a, b) = (redis.instance("a"), redis.instance("b"));
    let on_a = breaker(&a, Sharing::TripsOnly);
    let on_b = Breaker::builder("payments")
        .sharing(Sharing::TripsOnly)
        .max_retry_after(Duration::from_secs(10))
        .store(b.clone())
        .build();
    on_a.trip(Duration::from_secs(60), "Retry-After: 60");
    assert_eq!(on_a.state(), BreakerState::Open);
    assert_eq!(on_b.state(), BreakerState::Closed);
    assert_eq!((b.status().rejected, b.status().received), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_breaker_built_after_the_opening_learns_it_when_built() {
    let redis = SharedMemory::new();
    let (a, b) = (redis.instance("a"), redis.instance("b"));
    breaker(&a, Sharing::TripsOnly).trip(Duration::from_secs(5), "429");
    tokio::time::advance(Duration::from_secs(2)).await;
    let late = breaker(&b, Sharing::TripsOnly);
    assert_eq!(late.state(), BreakerState::Open);
    let left = late.open_until().expect("open") - tokio::time::Instant::now();
    assert_eq!(
        left,
        Duration::from_secs(3),
        "what is left of it, not all of it"
    );
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_store_degrades_to_local_decisions_and_resyncs_when_back() {
    let redis = SharedMemory::new();
    let (a, b) = (redis.instance("a"), redis.instance("b"));
    let (on_a, on_b) = (
        breaker(&a, Sharing::TripsOnly),
        breaker(&b, Sharing::TripsOnly),
    );
    redis.set_reachable(false);

    on_a.trip(Duration::from_secs(30), "429 Too Many Requests");

    // The caller is not hurt: a's breaker opened locally, and b decides alone.
    assert_eq!(on_a.state(), BreakerState::Open);
    assert_eq!(on_b.state(), BreakerState::Closed);
    let status = a.status();
    assert!(!status.healthy);
    // Sent: the load when the breaker was built, then the trip, which failed.
    assert_eq!((status.sent, status.failed), (2, 1));
    // Failures still count locally: b opens on its own three.
    for _ in 0..3 {
        on_b.record_failure();
    }
    assert_eq!(on_b.state(), BreakerState::Open);

    // Back: a pushes its trip still running, b loads it.
    tokio::time::advance(Duration::from_secs(25)).await;
    on_b.record_success(); // b's own opening (20 s) is over
    assert!(on_b.check().is_ok());
    redis.set_reachable(true);
    assert!(a.status().healthy);
    assert_eq!(on_b.state(), BreakerState::Open);
    let left = on_b.open_until().expect("open") - tokio::time::Instant::now();
    assert_eq!(left, Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn one_instance_cut_off_misses_openings_until_it_is_back() {
    let redis = SharedMemory::new();
    let (a, b) = (redis.instance("a"), redis.instance("b"));
    let (on_a, on_b) = (
        breaker(&a, Sharing::TripsOnly),
        breaker(&b, Sharing::TripsOnly),
    );
    b.set_reachable(false);
    on_a.trip(Duration::from_secs(10), "429");
    assert!(a.status().healthy, "a's link is fine");
    assert_eq!(on_b.state(), BreakerState::Closed);
    b.set_reachable(true);
    assert_eq!(on_b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn a_registry_on_the_store_shows_its_status_in_the_snapshot() {
    let redis = SharedMemory::new();
    let registry = Registry::new();
    registry.set_breaker_store(redis.instance("a"));
    let other = redis.instance("b");
    let on_b = breaker(&other, Sharing::TripsOnly);
    registry
        .breaker("payments", |b| b.sharing(Sharing::TripsOnly))
        .trip(Duration::from_secs(3), "429");
    assert_eq!(on_b.state(), BreakerState::Open);
    let snapshot = registry.snapshot();
    assert_eq!(snapshot.store.kind, "in_memory");
    assert_eq!(snapshot.store.instance.as_deref(), Some("a"));
    assert_eq!(snapshot.store.sent, 2, "the load when built, then the trip");
}
