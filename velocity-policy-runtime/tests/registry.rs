//! One name, one configuration: a second, different configuration of a named mechanism is
//! refused loudly, naming both declarations and the fix; the first stays in use.

mod common;

use std::time::Duration;

use velocity_policy_runtime::__macro_support::Handle;
use velocity_policy_runtime::bulkhead::BulkheadConfig;
use velocity_policy_runtime::registry::Conflict;
use velocity_policy_runtime::{Breaker, BreakerConfig, Bulkhead, OpenAfter, Registry};

#[test]
fn two_crates_that_configure_one_breaker_differently_are_refused_loudly() {
    // As two crates' expansions declare it: `breaker search` in each crate's policy files.
    const SEARCH: BreakerConfig = BreakerConfig::new(
        OpenAfter::failures(5, Duration::from_secs(30)),
        Duration::from_secs(20),
    );
    static SHOP: Handle<Breaker> =
        Handle::breaker("registry-test-search", "shop::search::push", SEARCH);
    static SHOP_AGAIN: Handle<Breaker> =
        Handle::breaker("registry-test-search", "shop::search::suggest", SEARCH);
    static BILLING: Handle<Breaker> = Handle::breaker(
        "registry-test-search",
        "billing::lookup::find",
        BreakerConfig::new(
            OpenAfter::failures(1, Duration::from_secs(10)),
            Duration::from_secs(5),
        ),
    );

    let shop: &Breaker = &SHOP;
    let again: &Breaker = &SHOP_AGAIN;
    let conflicts = |name: &str| -> Vec<Conflict> {
        Registry::global()
            .snapshot()
            .conflicts
            .into_iter()
            .filter(|c| &*c.name == name)
            .collect()
    };
    // The same settings from a second function: the same breaker, no conflict.
    assert!(conflicts("registry-test-search").is_empty());
    let billing: &Breaker = &BILLING;

    let [conflict] = conflicts("registry-test-search")
        .try_into()
        .unwrap_or_else(|c: Vec<_>| panic!("one conflict, not {c:?}"));
    assert_eq!(conflict.kind, "breaker");
    assert_eq!(&*conflict.first.origin, "shop::search::push");
    assert_eq!(&*conflict.second.origin, "billing::lookup::find");
    assert_ne!(conflict.first.settings, conflict.second.settings);
    let message = conflict.to_string();
    for part in [
        "breaker `registry-test-search` is configured twice, differently",
        "`shop::search::push` declares",
        "`billing::lookup::find` declares",
        "window: 30s",
        "window: 10s",
        "the first is in use and the second is refused",
        "give one of them a name of its own, or declare the same settings in both",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }

    // One name, one state: the refused configuration was not applied anywhere.
    for _ in 0..4 {
        billing.check().unwrap();
        billing.record_failure();
    }
    assert!(
        billing.check().is_ok(),
        "4 failures: billing's 1-failure threshold was not applied"
    );
    billing.record_failure();
    assert!(
        shop.check().is_err(),
        "the fifth failure opens the shared breaker"
    );
    assert!(again.check().is_err());
}

#[test]
fn declarations_agree_or_conflict_per_kind_and_name() {
    let (log, _guard) = common::capture();
    let registry = Registry::new();
    registry
        .declare("bulkhead", "db", "a::f", "4 slots")
        .unwrap();
    // Another kind of the same name is another mechanism.
    registry
        .declare("breaker", "db", "a::g", "3 failures")
        .unwrap();
    registry
        .declare("bulkhead", "db", "b::h", "4 slots")
        .unwrap();
    let refused = registry
        .declare("bulkhead", "db", "c::k", "8 slots")
        .unwrap_err();
    assert_eq!(&*refused.first.origin, "a::f");
    assert_eq!(&*refused.second.settings, "8 slots");
    // Declared again: still refused, listed once.
    assert_eq!(
        registry.declare("bulkhead", "db", "c::k", "8 slots"),
        Err(refused.clone())
    );
    assert_eq!(registry.snapshot().conflicts, [refused]);
    let logged = log.lines_with(&[
        "ERROR",
        "kind=\"conflict\"",
        "bulkhead `db` is configured twice",
    ]);
    assert_eq!(
        logged.len(),
        2,
        "each refusal is an error event:\n{}",
        log.text()
    );
    assert!(
        logged[0].contains("`a::f` declares 4 slots, `c::k` declares 8 slots"),
        "{}",
        logged[0]
    );
}

#[test]
fn a_bulkhead_declared_twice_alike_is_one_bulkhead() {
    static A: Handle<Bulkhead> =
        Handle::bulkhead("registry-test-db", "a::f", BulkheadConfig::new(2));
    static B: Handle<Bulkhead> = Handle::bulkhead(
        "registry-test-db",
        "b::g",
        BulkheadConfig::new(2).with_max_queued(0),
    );
    let (a, b): (&Bulkhead, &Bulkhead) = (&A, &B);
    let _slot = a.try_acquire().unwrap();
    let _other = b.try_acquire().unwrap();
    assert!(a.try_acquire().is_err(), "two slots in all: one bulkhead");
    assert!(
        Registry::global()
            .snapshot()
            .conflicts
            .iter()
            .all(|c| &*c.name != "registry-test-db")
    );
}
