//! The fake dependency as an async function, on tokio's paused clock: every behaviour, the
//! counts, and switching while calls wait.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests: an unexpected outcome fails the test"
)]

use std::time::Duration;

use tokio::time::Instant;
use velocity_policy::Transient;
use velocity_policy_testkit::fake::{Behaviour, Counts, FakeDependency, FakeError, Phase};

const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn a_healthy_dependency_answers_after_its_usual_latency_or_its_own() {
    let dep = FakeDependency::new("search").with_latency(20 * MS);
    let start = Instant::now();
    let reply = dep.call().await.unwrap();
    assert_eq!(start.elapsed(), 20 * MS);
    assert_eq!((reply.call, reply.latency), (1, 20 * MS));

    dep.set(Behaviour::healthy_after(3 * MS));
    let start = Instant::now();
    assert_eq!(dep.call_with(|| "answer").await, Ok("answer"));
    assert_eq!(start.elapsed(), 3 * MS);
    assert_eq!(
        dep.counts(),
        Counts {
            calls: 2,
            ok: 2,
            max_in_flight: 1,
            ..Counts::default()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_dependency_takes_its_delay_fixed_or_within_its_range() {
    let dep = FakeDependency::new("search").with(Behaviour::slow(800 * MS));
    let start = Instant::now();
    dep.call().await.unwrap();
    assert_eq!(start.elapsed(), 800 * MS);

    dep.set(Behaviour::slow_between(100 * MS, 300 * MS));
    let mut seen = Vec::new();
    for _ in 0..50 {
        let start = Instant::now();
        dep.call().await.unwrap();
        let took = start.elapsed();
        assert!((100 * MS..=300 * MS).contains(&took), "{took:?}");
        seen.push(took);
    }
    seen.sort();
    seen.dedup();
    assert!(
        seen.len() > 10,
        "the delays spread over the range: {seen:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_down_dependency_fails_at_once_with_a_transient_error() {
    let dep = FakeDependency::new("search")
        .with_latency(50 * MS)
        .with(Behaviour::down());
    let start = Instant::now();
    let error = dep.call().await.unwrap_err();
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(
        error,
        FakeError::Down {
            dependency: "search".into()
        }
    );
    assert_eq!(error.status(), 503);
    assert_eq!(error.retry_after(), None);
    assert!(error.is_transient());
    assert_eq!(
        error.to_string(),
        "search is down (503 Service Unavailable)"
    );
    assert_eq!(dep.counts().failed, 1);
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_dependency_carries_its_retry_after_and_is_not_retried() {
    let dep =
        FakeDependency::new("search").with(Behaviour::rate_limited(Duration::from_millis(1500)));
    let error = dep.call().await.unwrap_err();
    assert_eq!(error.retry_after(), Some(1500 * MS));
    assert_eq!(error.status(), 429);
    assert!(!error.is_transient(), "a 429 said when to come back");
    assert_eq!(dep.counts().rate_limited, 1);
}

#[tokio::test(start_paused = true)]
async fn a_flaky_dependency_fails_its_share_the_same_way_every_run() {
    let run = |seed| async move {
        let dep = FakeDependency::new("search").with(Behaviour::flaky(0.3, seed));
        let mut failed = Vec::new();
        for n in 0..2000 {
            if dep.call().await.is_err() {
                failed.push(n);
            }
        }
        assert_eq!(dep.counts().failed, failed.len() as u64);
        failed
    };
    let first = run(7).await;
    let share = first.len() as f64 / 2000.0;
    assert!((0.27..=0.33).contains(&share), "{share}");
    assert_eq!(run(7).await, first, "the same seed fails the same calls");
    assert_ne!(run(8).await, first, "another seed fails others");

    for (rate, expect) in [(0.0, 0), (1.0, 100)] {
        let dep = FakeDependency::new("search").with(Behaviour::flaky(rate, 1));
        for _ in 0..100 {
            let _ = dep.call().await;
        }
        assert_eq!(dep.counts().failed, expect);
    }
}

#[tokio::test(start_paused = true)]
async fn a_script_advances_by_calls_then_by_time() {
    let dep = FakeDependency::new("search").with(Behaviour::script([
        Phase::calls(3, Behaviour::healthy()),
        Phase::lasting(Duration::from_secs(5), Behaviour::down()),
        Phase::calls(2, Behaviour::rate_limited(Duration::from_secs(1))),
        Phase::forever(Behaviour::healthy_after(7 * MS)),
    ]));
    for _ in 0..3 {
        dep.call().await.unwrap();
    }
    // Down from the fourth call, for 5 s of tokio's clock.
    assert!(matches!(dep.call().await, Err(FakeError::Down { .. })));
    tokio::time::advance(Duration::from_millis(4999)).await;
    assert!(matches!(dep.call().await, Err(FakeError::Down { .. })));
    tokio::time::advance(MS).await;
    for _ in 0..2 {
        assert!(matches!(
            dep.call().await,
            Err(FakeError::RateLimited { .. })
        ));
    }
    let start = Instant::now();
    dep.call().await.unwrap();
    assert_eq!(start.elapsed(), 7 * MS);
    let counts = dep.counts();
    assert_eq!(
        (counts.calls, counts.ok, counts.failed, counts.rate_limited),
        (8, 4, 2, 2)
    );
}

#[tokio::test(start_paused = true)]
async fn timed_phases_end_on_their_own_clock_whether_or_not_calls_came() {
    let dep = FakeDependency::new("search").with(Behaviour::script([
        Phase::lasting(Duration::from_secs(1), Behaviour::down()),
        Phase::lasting(Duration::from_secs(1), Behaviour::healthy()),
        Phase::forever(Behaviour::down()),
    ]));
    assert!(dep.call().await.is_err());
    // No call in the healthy second: the script is past it all the same.
    tokio::time::advance(Duration::from_millis(2100)).await;
    assert!(dep.call().await.is_err());
    dep.set(Behaviour::healthy());
    assert!(dep.call().await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn it_counts_concurrency_in_flight_and_calls_given_up_on() {
    let dep = FakeDependency::new("search").with(Behaviour::slow(100 * MS));
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let dep = dep.clone();
            tokio::spawn(async move { dep.call().await })
        })
        .collect();
    tokio::task::yield_now().await;
    tokio::time::advance(10 * MS).await;
    let counts = dep.counts();
    assert_eq!((counts.in_flight, counts.max_in_flight), (5, 5));
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(dep.counts().in_flight, 0);
    assert_eq!(dep.take_max_in_flight(), 5);
    assert_eq!(
        dep.take_max_in_flight(),
        0,
        "started over from none in flight"
    );

    // A caller that stops waiting: counted as cancelled, not as an answer.
    let gave_up = tokio::time::timeout(30 * MS, dep.call()).await;
    assert!(gave_up.is_err());
    let counts = dep.counts();
    assert_eq!((counts.calls, counts.ok, counts.cancelled), (6, 5, 1));
    assert_eq!(counts.in_flight, 0);

    dep.reset();
    assert_eq!(dep.counts(), Counts::default());
    assert_eq!(dep.call().await.unwrap().call, 1, "numbers start again");
}

#[tokio::test(start_paused = true)]
async fn a_switch_applies_to_the_next_call_and_not_to_one_waiting() {
    let dep = FakeDependency::new("search").with(Behaviour::slow(Duration::from_secs(1)));
    let waiting = tokio::spawn({
        let dep = dep.clone();
        async move { dep.call().await }
    });
    tokio::task::yield_now().await;
    dep.set(Behaviour::down());
    assert!(dep.call().await.is_err());
    assert!(
        waiting.await.unwrap().is_ok(),
        "kept the behaviour it started with"
    );
    assert_eq!(dep.behaviour(), Behaviour::down());
}
