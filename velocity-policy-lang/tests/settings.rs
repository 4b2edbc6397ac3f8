//! Every row of a mechanism's settings table (`BreakerConfig::SETTINGS`, ...) is a key of its
//! stanza, with nothing else to write: its example is read and kept with its location, a second
//! one is a duplicate, a typo of it is suggested, an override may set it when the row says
//! so, and a value outside its range is refused with the row's code, in a file and in an
//! override alike.
#![expect(
    clippy::expect_used,
    reason = "test helper: a failure should stop the test"
)]

use velocity_policy_lang::overrides::{PolicyFile, overridable, overridden};
use velocity_policy_lang::units::{format_duration, format_ratio};
use velocity_policy_lang::{
    BreakerConfig, BulkheadConfig, HedgeConfig, Loc, MechanismSpec, Number, PolicySet, RetryConfig,
    Setting, Spec,
};

fn set_of(text: &str) -> PolicySet {
    let mut set = PolicySet::new();
    set.add_source("settings.policy", text.as_bytes());
    set
}

/// Checks every row of `table` in `stanza`, whose `KEY` is replaced by the setting; `keyword`
/// names the stanza, `find` its item in the spec.
fn every_row<S: MechanismSpec>(
    keyword: &str,
    stanza: &str,
    table: &[Setting<S::Config>],
    find: impl Fn(&Spec) -> Option<&S>,
) {
    let overridable = overridable();
    let live = overridable
        .iter()
        .find(|(known, _)| *known == keyword)
        .map(|(_, keys)| keys.clone())
        .unwrap_or_default();
    for setting in table {
        let written = format!("{} = {}", setting.key, setting.example);
        let set = set_of(&stanza.replace("KEY", &written));
        let report = set.check();
        assert!(!report.has_errors(), "{written}: {:?}", report.errors);
        let item = find(set.spec()).expect("the stanza is lowered");
        let value = item.setting(setting.key).expect("written, so kept");
        assert!(matches!(value.loc, Loc::Source { .. }), "{written}");
        assert_eq!(setting.get(item.config()), Some(value.value), "{written}");

        let twice = set_of(&stanza.replace("KEY", &format!("{written}; {written}")));
        let codes: Vec<String> = twice.check().errors.iter().map(|e| e.code()).collect();
        assert_eq!(codes, ["policy::duplicate-setting"], "{written} twice");

        let typo = &setting.key[..setting.key.len() - 1];
        let misspelled = set_of(&stanza.replace("KEY", &format!("{typo} = {}", setting.example)));
        let report = misspelled.check();
        let unknown = report
            .errors
            .iter()
            .find(|e| e.code() == "policy::unknown-setting")
            .expect("an unknown key");
        let help = unknown.help().unwrap_or_default();
        assert!(
            help.contains(&format!("`{}`", setting.key)),
            "{typo}: {help}"
        );

        assert_eq!(
            live.contains(&setting.key),
            setting.overridable,
            "{keyword} {}",
            setting.key
        );
    }
}

#[test]
fn every_row_of_every_table_is_a_key_of_its_stanza() {
    every_row(
        "breaker",
        "breaker b { open_after = 5 failures within 30s; cooldown = 20s; KEY }",
        BreakerConfig::SETTINGS,
        |spec| spec.breakers.get("b"),
    );
    every_row(
        "bulkhead",
        "bulkhead k { max_concurrent = 4; KEY }",
        BulkheadConfig::SETTINGS,
        |spec| spec.bulkheads.get("k"),
    );
    every_row(
        "retry",
        "retry r { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); KEY }",
        RetryConfig::SETTINGS,
        |spec| spec.retries.get("r"),
    );
    every_row(
        "hedge",
        "hedge h { after = p95; KEY }",
        HedgeConfig::SETTINGS,
        |spec| spec.hedges.get("h"),
    );
}

#[test]
fn a_setting_not_written_keeps_its_default_and_no_location() {
    let set = set_of(
        "breaker b { open_after = 5 failures within 30s; cooldown = 20s }\n\
         hedge h { after = p95 }",
    );
    let breaker = set.spec().breakers.get("b").expect("lowered");
    assert_eq!(breaker.config, BreakerConfig::DEFAULT);
    assert!(breaker.setting("probation").is_none());
    let hedge = set.spec().hedges.get("h").expect("lowered");
    assert_eq!(hedge.config.max, HedgeConfig::DEFAULT.max);
    // Located at the stanza, for a diagnostic about the default.
    assert_eq!(hedge.max().loc, hedge.loc);
}

#[test]
fn a_hedges_min_delay_is_read_from_its_stanza() {
    let set = set_of("hedge tail { after = p95; min_delay = 20ms }");
    assert!(!set.check().has_errors());
    let hedge = set.spec().hedges.get("tail").expect("lowered");
    assert_eq!(hedge.config.min_delay, std::time::Duration::from_millis(20));
    assert!(hedge.setting("min_delay").is_some());
    let negative = set_of("hedge tail { after = p95; min_delay = -5ms }");
    let codes: Vec<String> = negative.check().errors.iter().map(|e| e.code()).collect();
    assert_eq!(codes, ["policy::duration-not-positive"]);
}

/// A value as the language writes it.
fn text(value: Number) -> String {
    match value {
        Number::Duration(d) => format_duration(d),
        Number::Count(n) => n.to_string(),
        Number::Share(share) => format_ratio(share),
    }
}

/// Every row of `table` whose range refuses something, written in `stanza` (whose `KEY` is
/// replaced by the setting) with a value outside: refused with the row's code, at the value;
/// and, when the row is overridable, the same value in an override of the stanza `header`
/// names (the compiled stanza writing the row's example) is refused with the same code.
fn every_range(header: &str, stanza: &str, table: &[Setting<impl Sized>]) -> usize {
    let mut checked = 0;
    for setting in table {
        let (Some(outside), Some(code)) = (setting.range.outside(), setting.range.code()) else {
            continue;
        };
        checked += 1;
        let written = format!("{} = {}", setting.key, text(outside));
        let source = stanza.replace("KEY", &written);
        let set = set_of(&source);
        let report = set.check();
        let codes: Vec<String> = report.errors.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [code], "{written}");
        let at = source.find(&written).expect("written") + setting.key.len() + 3;
        let rendered = set.render(&report.errors[0]);
        assert!(
            rendered.contains(&format!("settings.policy:1:{}", at + 1)),
            "{written} is located at its value:\n{rendered}"
        );
        assert_eq!(
            report.errors[0].help().map(|h| h.contains('{')),
            Some(false)
        );

        if setting.overridable {
            let example = format!("{} = {}", setting.key, setting.example);
            let compiled = [PolicyFile::new(
                "compiled.policy",
                stanza.replace("KEY", &example),
            )];
            let production = [PolicyFile::new(
                "production.policy",
                format!("{header} {{ {written} }}"),
            )];
            let merged = overridden(&compiled, &production);
            let codes: Vec<String> = merged.check().errors.iter().map(|e| e.code()).collect();
            assert_eq!(codes, [code], "{written} as an override");
        }
    }
    checked
}

#[test]
fn every_range_of_every_table_is_refused_with_its_code() {
    let checked = every_range(
        "breaker b",
        "breaker b { open_after = 5 failures within 30s; cooldown = 20s; KEY }",
        BreakerConfig::SETTINGS,
    ) + every_range(
        "bulkhead k",
        "bulkhead k { max_concurrent = 4; KEY }",
        BulkheadConfig::SETTINGS,
    ) + every_range(
        "retry r",
        "retry r { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); KEY }",
        RetryConfig::SETTINGS,
    ) + every_range(
        "hedge h",
        "hedge h { after = p95; KEY }",
        HedgeConfig::SETTINGS,
    );
    // `max_retry_after`, `attempt_timeout` and a hedge's `max` today.
    assert!(checked >= 3, "{checked} ranges checked");
}

/// Every overridable row of `table` (the compiled `stanza` writing its example, an override of
/// the stanza `header` names doubling it): refused as outside the envelope when the row says
/// an override may only lower it, accepted otherwise; half of it is accepted either way.
fn every_envelope<S: MechanismSpec>(
    header: &str,
    stanza: &str,
    table: &[Setting<S::Config>],
    find: impl Fn(&Spec) -> Option<&S>,
) -> usize {
    let mut checked = 0;
    for setting in table.iter().filter(|setting| setting.overridable) {
        let example = format!("{} = {}", setting.key, setting.example);
        let compiled = [PolicyFile::new(
            "compiled.policy",
            stanza.replace("KEY", &example),
        )];
        let set = set_of(&stanza.replace("KEY", &example));
        let item = find(set.spec()).expect("the stanza is lowered");
        let value = item.setting(setting.key).expect("written").value;
        let scaled = |factor: u32| match value {
            Number::Duration(d) => format_duration(d * factor / 2),
            Number::Count(n) => (n * factor / 2).to_string(),
            Number::Share(share) => format_ratio(share * f64::from(factor) / 2.0),
        };
        for (factor, refused) in [(4, setting.override_at_most_compiled), (1, false)] {
            let written = format!("{} = {}", setting.key, scaled(factor));
            let production = [PolicyFile::new(
                "production.policy",
                format!("{header} {{ {written} }}"),
            )];
            let codes: Vec<String> = overridden(&compiled, &production)
                .check()
                .errors
                .iter()
                .map(|e| e.code())
                .collect();
            let expected: &[&str] = if refused {
                &["policy::override-outside-envelope"]
            } else {
                &[]
            };
            assert_eq!(codes, expected, "{written} over {example}");
        }
        checked += 1;
    }
    checked
}

#[test]
fn every_overridable_row_says_its_envelope() {
    let checked = every_envelope(
        "breaker b",
        "breaker b { open_after = 5 failures within 30s; cooldown = 20s; KEY }",
        BreakerConfig::SETTINGS,
        |spec| spec.breakers.get("b"),
    ) + every_envelope(
        "bulkhead k",
        "bulkhead k { max_concurrent = 4; KEY }",
        BulkheadConfig::SETTINGS,
        |spec| spec.bulkheads.get("k"),
    ) + every_envelope(
        "retry r",
        "retry r { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); KEY }",
        RetryConfig::SETTINGS,
        |spec| spec.retries.get("r"),
    ) + every_envelope(
        "hedge h",
        "hedge h { after = p95; KEY }",
        HedgeConfig::SETTINGS,
        |spec| spec.hedges.get("h"),
    );
    // `max_retry_after`, `probation` and `attempt_timeout` today.
    assert!(checked >= 3, "{checked} rows checked");
}
