//! The snapshot's JSON: versioned, durations in milliseconds under `_ms` names, and rows named
//! by policy and operation names rather than module paths.
#![allow(clippy::unwrap_used, reason = "a test")]
// JSON is the `serde` feature's: `cargo test -p velocity-policy-runtime --features serde --test snapshot_json`.
#![cfg(feature = "serde")]

use std::time::Duration;

use velocity_policy_runtime::shedding::Thresholds;
use velocity_policy_runtime::{Registry, Snapshot, WorkClass};

#[tokio::test(start_paused = true)]
async fn the_snapshot_is_versioned_with_durations_in_milliseconds_and_operation_names() {
    let registry = Registry::new();
    let breaker = registry.breaker("search", |b| {
        b.open_after_failures(2, Duration::from_secs(30))
            .cooldown(Duration::from_millis(2_500))
    });
    breaker.record_failure();
    breaker.record_failure();
    let shedder = registry.shedder(
        "policy_demo::service::publish_activity",
        Thresholds::default(),
    );
    let deadline = velocity_policy_runtime::Deadline::after(Duration::from_millis(10));
    assert!(
        shedder
            .admit(WorkClass::Background, 1.0, &deadline, Duration::ZERO)
            .is_err()
    );
    registry.fallback("policy_demo::service::lookup_session", "guest_session");
    tokio::time::advance(Duration::from_micros(500)).await;

    let json = serde_json::to_value(registry.snapshot()).unwrap();
    assert_eq!(json["version"], Snapshot::VERSION);
    assert_eq!(Snapshot::VERSION, 1);

    let search = &json["breakers"][0];
    assert_eq!(search["name"], "search");
    assert_eq!(search["state"], "open");
    // 2.5 s less the half millisecond that passed: fractional milliseconds, not {secs, nanos}.
    assert_eq!(search["open_for_ms"].as_f64(), Some(2_499.5));
    assert!(search.get("open_for").is_none());
    assert_eq!(search["last_cause"]["cause"], "failures");
    assert_eq!(search["last_cause"]["window_ms"].as_f64(), Some(30_000.0));
    assert_eq!(search["config"]["cooldown_ms"].as_f64(), Some(2_500.0));
    assert_eq!(
        search["config"]["open_after"]["window_ms"].as_f64(),
        Some(30_000.0)
    );

    let shed = &json["shedders"][0];
    assert_eq!(shed["display_name"], "publish_activity");
    assert_eq!(shed["name"], "policy_demo::service::publish_activity");
    assert_eq!(shed["shed_load"]["background"], 1);

    let fallback = &json["fallbacks"][0];
    assert_eq!(fallback["display_name"], "lookup_session");
    assert_eq!(
        fallback["operation"],
        "policy_demo::service::lookup_session"
    );

    // No duration anywhere is serde's default `{secs, nanos}`.
    let text = json.to_string();
    assert!(!text.contains("\"nanos\""), "{text}");
}

#[test]
fn a_breakers_probation_is_in_its_config_in_milliseconds_or_null_for_one_window() {
    let registry = Registry::new();
    registry.breaker("set", |b| b.probation(Duration::from_millis(1_500)));
    registry.breaker("unset", |b| b);
    let json = serde_json::to_value(registry.snapshot()).unwrap();
    let config = |name: &str| {
        json["breakers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["name"] == name)
            .unwrap()["config"]
            .clone()
    };
    assert_eq!(config("set")["probation_ms"].as_f64(), Some(1_500.0));
    assert!(config("unset")["probation_ms"].is_null());
}

#[test]
fn a_limiters_config_is_its_rate_and_fail_modes_in_milliseconds_and_its_local_rate_or_null() {
    use velocity_policy_runtime::limiter::{FailMode, RateLimitConfig};

    let registry = Registry::new();
    registry.rate_limiter("signups", 100, Duration::from_secs(60), |l| {
        l.config(
            RateLimitConfig::new(100, Duration::from_secs(60))
                .with_on_timeout(FailMode::Closed)
                .with_local_rate(20, Duration::from_secs(60)),
        )
    });
    registry.rate_limiter("api", 10, Duration::from_secs(1), |l| l);
    let json = serde_json::to_value(registry.snapshot()).unwrap();
    let config = |name: &str| {
        json["limiters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["name"] == name)
            .unwrap()["config"]
            .clone()
    };
    let signups = config("signups");
    assert_eq!(signups["limit"], 100);
    assert_eq!(signups["per_ms"].as_f64(), Some(60_000.0));
    assert_eq!(signups["on_timeout"], "closed");
    assert_eq!(signups["on_error"], "local");
    assert_eq!(signups["local_rate"]["limit"], 20);
    assert_eq!(signups["local_rate"]["per_ms"].as_f64(), Some(60_000.0));
    assert_eq!(signups["timeout_ms"].as_f64(), Some(50.0));
    assert!(config("api")["local_rate"].is_null());
}

/// `Registry::snapshot` is one shape whatever the features: what a feature adds (the
/// dashboard's `history`, `chaos`'s drills) is served by the feature, not carried here. Run
/// with `--features serde` alone and with `--all-features`, the keys agree.
#[test]
fn the_snapshot_has_the_same_fields_whatever_the_features() {
    let json = serde_json::to_value(Registry::new().snapshot()).unwrap();
    let mut keys: Vec<&str> = json.as_object().unwrap().keys().map(|k| &**k).collect();
    let mut expected = [
        "version",
        "breakers",
        "bulkheads",
        "retries",
        "hedges",
        "shedders",
        "limiters",
        "store",
        "fallbacks",
        "isolated",
        "polls",
        "operations",
        "overrides",
        "deferred",
        "background",
        "queues",
        "conflicts",
        "calls",
    ];
    keys.sort_unstable();
    expected.sort_unstable();
    assert_eq!(keys, expected);
}
