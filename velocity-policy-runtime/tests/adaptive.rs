//! The adaptive bulkhead on tokio's paused clock, against a dependency of known capacity
//! (`velocity_policy_testkit::capacity`): the limit grows while latency stays at its unloaded level,
//! shrinks when calls start waiting inside the dependency, and never leaves its bounds.

use std::time::Duration;

use tokio::time::Instant;
use velocity_policy_runtime::Bulkhead;
use velocity_policy_runtime::bulkhead::AdaptiveLimit;
use velocity_policy_testkit::capacity::{Capacity, Load};

const SERVICE: Duration = Duration::from_millis(20);

/// `clients` callers through the bulkhead, more than the dependency serves.
fn load(bulkhead: &Bulkhead, dependency: &Capacity, clients: usize) -> Load {
    let bulkhead = bulkhead.clone();
    dependency.saturate(clients, move || bulkhead.try_acquire_owned().ok())
}

/// The slot count every 10 ms for `run`.
async fn watch(bulkhead: &Bulkhead, run: Duration) -> Vec<u32> {
    let end = Instant::now() + run;
    let mut seen = Vec::new();
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
        seen.push(bulkhead.max_concurrent());
    }
    seen
}

fn adaptive(min: u32, max: u32) -> Bulkhead {
    Bulkhead::builder("api")
        .adaptive(AdaptiveLimit::new(min, max))
        .build()
}

#[tokio::test(start_paused = true)]
async fn the_limit_grows_while_latency_stays_at_its_unloaded_level() {
    let bulkhead = adaptive(4, 64);
    let dependency = Capacity::new(48, SERVICE);
    let _stop = load(&bulkhead, &dependency, 100);
    assert_eq!(bulkhead.max_concurrent(), 4, "it starts at min");

    let seen = watch(&bulkhead, Duration::from_secs(3)).await;
    assert!(
        seen.windows(2).take(50).all(|w| w[1] >= w[0]),
        "no latency rose while it grew toward the capacity: {seen:?}"
    );
    let last = *seen.last().unwrap();
    assert!(
        (48..=51).contains(&last),
        "it settles just above the dependency's 48 calls, found {last}"
    );
    let snapshot = bulkhead.snapshot().adaptive.unwrap();
    let noload = snapshot.latency_noload_ms.unwrap();
    assert!((20.0..21.0).contains(&noload), "rtt_noload {noload} ms");
    assert!(snapshot.windows > 20);
}

#[tokio::test(start_paused = true)]
async fn the_limit_shrinks_when_latency_rises_and_grows_back_when_it_falls() {
    let bulkhead = adaptive(2, 64);
    let dependency = Capacity::new(32, SERVICE);
    let _stop = load(&bulkhead, &dependency, 100);
    let before = watch(&bulkhead, Duration::from_secs(3)).await;
    assert!((32..=35).contains(before.last().unwrap()), "{before:?}");

    // The dependency now serves 8 calls at once: 32 admitted calls take four times as long.
    dependency.set_slots(8);
    let after = watch(&bulkhead, Duration::from_secs(8)).await;
    // The claim of BENCHMARKS.md's scenario: within 25% of the new capacity within 5 s, and
    // staying there.
    let converged = after
        .iter()
        .rposition(|slots| !(6..=10).contains(slots))
        .map_or(0, |last_outside| last_outside + 1);
    assert!(
        converged * 10 <= 5_000,
        "within 25% of 8 from {} ms on: {after:?}",
        converged * 10
    );
    let snapshot = bulkhead.snapshot().adaptive.unwrap();
    assert!(
        snapshot.latency_recent_ms.unwrap() < 20.0 * 1.3,
        "at the new limit the latency is back near its unloaded level: {snapshot:?}"
    );

    dependency.set_slots(32);
    let again = watch(&bulkhead, Duration::from_secs(3)).await;
    assert!((32..=35).contains(again.last().unwrap()), "{again:?}");
}

#[tokio::test(start_paused = true)]
async fn the_limit_never_leaves_its_bounds() {
    let bulkhead = adaptive(4, 16);
    let dependency = Capacity::new(64, SERVICE);
    let _stop = load(&bulkhead, &dependency, 100);
    let high = watch(&bulkhead, Duration::from_secs(2)).await;
    assert_eq!(
        *high.iter().max().unwrap(),
        16,
        "grows to max and no further"
    );
    assert_eq!(*high.last().unwrap(), 16);

    // One call at a time: the latency would ask for a single slot, but min is 4.
    dependency.set_slots(1);
    let low = watch(&bulkhead, Duration::from_secs(5)).await;
    assert_eq!(
        *low.iter().min().unwrap(),
        4,
        "shrinks to min and no further"
    );
    assert_eq!(*low.last().unwrap(), 4);
    assert!(bulkhead.running() <= 16);
}

#[tokio::test(start_paused = true)]
async fn light_load_says_nothing_about_capacity_so_the_limit_holds() {
    let bulkhead = adaptive(4, 64);
    let dependency = Capacity::new(64, SERVICE);
    // Two callers use two of the four slots: the callers, not the dependency, limit the load.
    let _stop = load(&bulkhead, &dependency, 2);
    let seen = watch(&bulkhead, Duration::from_secs(2)).await;
    assert!(seen.iter().all(|&slots| slots == 4), "{seen:?}");
    assert!(bulkhead.snapshot().adaptive.unwrap().windows > 0);
}

#[tokio::test(start_paused = true)]
async fn a_fixed_bulkhead_measures_nothing() {
    let bulkhead = Bulkhead::builder("fixed").max_concurrent(8).build();
    let dependency = Capacity::new(2, SERVICE);
    let _stop = load(&bulkhead, &dependency, 16);
    let seen = watch(&bulkhead, Duration::from_secs(1)).await;
    assert!(seen.iter().all(|&slots| slots == 8));
    assert_eq!(bulkhead.snapshot().adaptive, None);
    assert_eq!(bulkhead.adaptive(), None);
}

#[tokio::test(start_paused = true)]
async fn a_limit_resized_by_hand_goes_on_adapting_from_there() {
    let bulkhead = adaptive(2, 64);
    let dependency = Capacity::new(16, SERVICE);
    let _stop = load(&bulkhead, &dependency, 64);
    watch(&bulkhead, Duration::from_secs(2)).await;
    bulkhead.set_max_concurrent(40);
    let seen = watch(&bulkhead, Duration::from_secs(2)).await;
    assert!((16..=19).contains(seen.last().unwrap()), "{seen:?}");
}
