//! Every row of every mechanism's settings table (`velocity_policy_model::Setting`): it reads
//! back what it wrote, its default is within its range, and a range that refuses anything names
//! a value it refuses and a code for it. (Outside `src/setting.rs`, whose module the tables'
//! modules name: a test there naming every table closed an import circle.)

use std::time::Duration;

use velocity_policy_model::{
    BreakerConfig, BulkheadConfig, HedgeConfig, Number, Range, RetryConfig, Setting, Unit,
};

/// Every row reads back what it wrote, and its key and builder are spelled alike.
fn round_trips<C: Copy>(table: &[Setting<C>], config: C) {
    for setting in table {
        let value = match setting.unit() {
            Unit::Duration => Number::Duration(Duration::from_millis(1234)),
            Unit::Count => Number::Count(3),
            Unit::Share => Number::Share(0.25),
        };
        let mut written = config;
        assert!(setting.set(&mut written, value), "{}", setting.key);
        assert_eq!(setting.get(&written), Some(value), "{}", setting.key);
        assert_eq!(setting.builder, format!("with_{}", setting.key));
        assert!(!setting.example.is_empty());
    }
    let mut keys: Vec<_> = Setting::keys(table).collect();
    let all = keys.len();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), all, "a key twice");
}

/// Every row's default is within its range, and a range that refuses anything names a
/// value it refuses and a code for it.
fn ranges_hold<C>(table: &[Setting<C>], config: &C) {
    for setting in table {
        if let Some(value) = setting.get(config) {
            assert!(setting.range.admits(value), "{}'s default", setting.key);
        }
        match setting.range.outside() {
            Some(outside) => {
                assert_eq!(outside.unit(), setting.unit(), "{}", setting.key);
                assert!(!setting.range.admits(outside), "{}", setting.key);
                let code = setting.range.code().unwrap_or_default();
                assert!(code.starts_with("policy::"), "{}", setting.key);
            }
            None => assert_eq!(setting.range, Range::Any, "{}", setting.key),
        }
        if let Range::Within { least, most, .. } = setting.range {
            assert_eq!(least.unit(), setting.unit(), "{}", setting.key);
            assert!(setting.range.admits(least) && setting.range.admits(most));
        }
    }
}

#[test]
fn every_default_is_within_its_range() {
    ranges_hold(BreakerConfig::SETTINGS, &BreakerConfig::DEFAULT);
    ranges_hold(BulkheadConfig::SETTINGS, &BulkheadConfig::DEFAULT);
    ranges_hold(RetryConfig::SETTINGS, &RetryConfig::DEFAULT);
    ranges_hold(HedgeConfig::SETTINGS, &HedgeConfig::DEFAULT);
}

#[test]
fn a_range_admits_its_unit_only() {
    assert!(Range::Positive.admits(Number::Duration(Duration::from_millis(1))));
    assert!(!Range::Positive.admits(Number::Duration(Duration::ZERO)));
    assert!(!Range::Positive.admits(Number::Count(1)));
    let within = Range::Within {
        least: Number::Count(2),
        most: Number::Count(3),
        code: "policy::test",
        help: "",
    };
    assert!(!within.admits(Number::Count(1)));
    assert!(within.admits(Number::Count(3)));
    assert!(!within.admits(Number::Share(2.5)));
    assert_eq!(within.outside(), Some(Number::Count(4)));
    assert_eq!(Range::Any.outside(), None);
}

#[test]
fn every_row_reads_back_what_it_wrote() {
    round_trips(BreakerConfig::SETTINGS, BreakerConfig::DEFAULT);
    round_trips(BulkheadConfig::SETTINGS, BulkheadConfig::DEFAULT);
    round_trips(RetryConfig::SETTINGS, RetryConfig::DEFAULT);
    round_trips(HedgeConfig::SETTINGS, HedgeConfig::DEFAULT);
}
