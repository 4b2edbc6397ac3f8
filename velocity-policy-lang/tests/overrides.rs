//! Overrides merged into a compiled policy: numbers replaced, structure kept, every unsafe
//! combination refused by the one validator at the override's own location.

use std::time::Duration;

use velocity_policy_lang::overrides::{Origin, PolicyFile, overridden, overridden_from};

const COMPILED: &str = "\
retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 500ms }
breaker search { open_after = 5 failures within 30s; cooldown = 20s }
shedding { deferred at load 0.5; background at load 0.25 }
operation search: critical, idempotent { retry = transient; breaker = search; deadline = 2s }
operation reindex: deferred, idempotent { deadline = 10s }
";

fn merge(text: &str) -> velocity_policy_lang::overrides::Overridden {
    overridden(
        &[PolicyFile::new("search.policy", COMPILED)],
        &[PolicyFile::new("production/search.policy", text)],
    )
}

fn codes(text: &str) -> Vec<String> {
    merge(text)
        .check()
        .errors
        .iter()
        .map(|error| error.code())
        .collect()
}

#[test]
fn numbers_are_replaced_and_structure_kept() {
    let merged = merge(
        "operation search { deadline = 800ms }\n\
         breaker search { cooldown = 5s }\n\
         shedding { deferred at load 0.75 }",
    );
    assert!(!merged.check().has_errors());
    let spec = merged.set.spec();
    let search = spec.operations.get("search").unwrap();
    assert_eq!(
        search.deadline.as_ref().unwrap().value,
        Duration::from_millis(800)
    );
    assert_eq!(search.retry.as_ref().unwrap().value, "transient");
    let breaker = spec.breakers.get("search").unwrap();
    assert_eq!(breaker.config.cooldown, Duration::from_secs(5));
    let shedding = spec.shedding.as_ref().unwrap();
    assert!((shedding.deferred.value - 0.75).abs() < 1e-9);
    assert!((shedding.background.value - 0.25).abs() < 1e-9);
    let keys: Vec<&str> = merged.applied.iter().map(|a| a.key.as_str()).collect();
    assert_eq!(keys, ["deadline", "cooldown", "deferred"]);
    assert_eq!(merged.applied[0].value, "800ms");
}

#[test]
fn unsafe_combinations_are_the_validators_errors_at_the_override() {
    assert_eq!(
        codes("operation search { deadline = 300ms }"),
        ["policy::attempt-timeout-exceeds-deadline"]
    );
    assert_eq!(
        codes("operation search { min_budget = 3s }"),
        ["policy::min-budget-exceeds-deadline"]
    );
    assert_eq!(
        codes("operation search { shed_at = 0.5 }"),
        ["policy::shed-critical"]
    );
    assert_eq!(
        codes("retry transient { attempts = 0 }"),
        ["policy::zero-attempts"]
    );
    let merged = merge("\n\noperation search { deadline = 300ms }");
    let report = merged.check();
    let rendered = merged.set.render(&report.errors[0]);
    assert!(
        rendered.contains("production/search.policy:3:31"),
        "{rendered}"
    );
}

#[test]
fn unknown_names_and_structure_are_refused() {
    assert_eq!(
        codes("operation serch { deadline = 1s }"),
        ["policy::unknown-name"]
    );
    let merged = merge("operation serch { deadline = 1s }");
    let report = merged.check();
    assert!(report.errors[0].to_string().contains("serch"));
    assert!(
        merged
            .set
            .render(&report.errors[0])
            .contains("did you mean `search`?")
    );
    assert_eq!(
        codes("operation search { retry = other }"),
        ["policy::not-overridable"]
    );
    assert_eq!(
        codes("operation reindex: critical { deadline = 5s }"),
        ["policy::not-overridable"]
    );
    assert_eq!(
        codes("breaker search { shared }"),
        ["policy::not-overridable"]
    );
    assert_eq!(
        codes("locality { db = blocking env X }"),
        ["policy::not-overridable"]
    );
}

#[test]
fn no_override_is_the_compiled_policy() {
    let merged = overridden(&[PolicyFile::new("search.policy", COMPILED)], &[]);
    assert!(!merged.check().has_errors());
    assert!(merged.applied.is_empty());
    assert_eq!(
        merged
            .set
            .spec()
            .operations
            .get("search")
            .unwrap()
            .deadline
            .as_ref()
            .unwrap()
            .value,
        Duration::from_secs(2)
    );
}

/// What `text` as an override of `compiled` is refused with: each error's code and message.
fn refusals(compiled: &str, text: &str) -> Vec<(String, String)> {
    overridden(
        &[PolicyFile::new("search.policy", compiled)],
        &[PolicyFile::new("production/search.policy", text)],
    )
    .check()
    .errors
    .iter()
    .map(|error| (error.code(), error.to_string()))
    .collect()
}

const OUTSIDE: &str = "policy::override-outside-envelope";

#[test]
fn an_override_moves_a_number_only_within_its_envelope() {
    // What issue 39 found passing: each is now refused, with what it may set.
    for (text, says) in [
        (
            "breaker search { cooldown = 1000h }",
            "`cooldown = 1000h` in `breaker search` is outside what an override may set, 5s to 20s",
        ),
        (
            "breaker search { cooldown = 4s }",
            "`cooldown = 4s` in `breaker search` is outside what an override may set, 5s to 20s",
        ),
        (
            "breaker search { max_retry_after = 8760h }",
            "`max_retry_after = 8760h` in `breaker search` is outside what an override may set, 75s to 5m",
        ),
        (
            "operation reindex { deadline = 1ms }",
            "outside what an override may set, 2.5s to 40s",
        ),
        (
            "retry transient { attempts = 13 }",
            "outside what an override may set, 1 to 12",
        ),
        (
            "retry transient { attempt_timeout = 100ms }",
            "outside what an override may set, 125ms to 2s",
        ),
        (
            "breaker search { open_after = 1 failures within 30s }",
            "outside what an override may set, its failures 2 to 20",
        ),
        (
            "breaker search { open_after = 50% of at least 10 calls within 30s }",
            "only the numbers of the compiled rule",
        ),
        (
            "shedding { deferred at load 0.1; background at load 0.1 }",
            "outside what an override may set, 0.125 to 2",
        ),
        (
            "operation search { min_budget = 10ms }",
            "`min_budget = 10ms` in `operation search` overrides a number the compiled policy does not set",
        ),
    ] {
        let refused = refusals(COMPILED, text);
        assert_eq!(refused.len(), 1, "{text}: {refused:?}");
        assert_eq!(refused[0].0, OUTSIDE, "{text}");
        assert!(refused[0].1.contains(says), "{text}: {}", refused[0].1);
    }
    // Inside it: applied.
    for text in [
        "breaker search { cooldown = 5s }",
        "breaker search { max_retry_after = 2m }",
        "operation reindex { deadline = 40s }",
        "retry transient { attempts = 12 }",
        "retry transient { attempts = 1 }",
        "breaker search { open_after = 2 failures within 2m }",
        "shedding { deferred at load 0.75 }",
    ] {
        assert_eq!(refusals(COMPILED, text), [], "{text}");
    }
    // The diagnostic is at the override, and its help says how to widen the envelope.
    let merged = merge("\nbreaker search { cooldown = 1000h }");
    let report = merged.check();
    let rendered = merged.set.render(&report.errors[0]);
    assert!(
        rendered.contains("production/search.policy:2:18"),
        "{rendered}"
    );
    let help = format!("{:?}", report.errors[0]);
    assert!(
        help.contains("never above it")
            && help.contains("envelope { breaker search cooldown within 10% to 400% }"),
        "{help}"
    );
    // An override the validator refuses is not also reported as outside its envelope.
    assert_eq!(
        codes("operation search { deadline = 1ms }"),
        ["policy::attempt-timeout-exceeds-deadline"]
    );
}

#[test]
fn the_crates_envelope_stanza_widens_what_an_override_may_set() {
    let compiled = format!(
        "{COMPILED}envelope {{\n    breaker search cooldown within 10% to 300%\n    operation reindex within 1% to 100%\n}}\n"
    );
    assert_eq!(refusals(&compiled, "breaker search { cooldown = 60s }"), []);
    assert_eq!(refusals(&compiled, "breaker search { cooldown = 2s }"), []);
    let refused = refusals(&compiled, "breaker search { cooldown = 61s }");
    assert!(
        refused[0].1.contains("2s to 1m") && refused[0].0 == OUTSIDE,
        "{refused:?}"
    );
    assert_eq!(
        refusals(&compiled, "operation reindex { deadline = 100ms }"),
        []
    );
    assert_eq!(
        refusals(&compiled, "operation reindex { deadline = 11s }")[0].0,
        OUTSIDE
    );
    // Not widened: the default.
    assert_eq!(
        refusals(&compiled, "breaker search { max_retry_after = 6m }")[0].0,
        OUTSIDE
    );
    // Only the crate says so: an override file cannot widen its own envelope.
    assert_eq!(
        codes("envelope { breaker search cooldown within 1% to 10000% }"),
        ["policy::not-overridable"]
    );
    // A line that is not one is the language's error.
    for line in [
        "operation search within 200% to 300%",
        "operation search deadline within 10 to 400",
        "chaos drill within 10% to 200%",
        "breaker search speed within 10% to 200%",
        "shedding deferred extra within 10% to 200%",
        "breaker search from 10% to 200%",
    ] {
        let mut set = velocity_policy_lang::PolicySet::new();
        set.add_source("x.policy", format!("envelope {{ {line} }}").as_bytes());
        let codes: Vec<String> = set.check().errors.iter().map(|e| e.code()).collect();
        assert_eq!(codes, ["policy::invalid-value"], "{line}");
    }
}

#[test]
fn the_fleets_set_may_not_touch_a_drill() {
    let compiled = format!("{COMPILED}chaos drill {{ error at 5%; enabled = false }}\n");
    let files = [PolicyFile::new("search.policy", compiled.as_str())];
    let set = [PolicyFile::new(
        "fleet.policy",
        "chaos drill { enabled = true }",
    )];
    assert!(!overridden(&files, &set).check().has_errors());
    let fleet = overridden_from(&files, &set, Origin::Fleet);
    let report = fleet.check();
    assert_eq!(report.errors.len(), 1);
    assert_eq!(report.errors[0].code(), "policy::not-overridable");
    assert!(
        fleet
            .set
            .render(&report.errors[0])
            .contains("never by the fleet's set"),
    );
    assert!(fleet.applied.is_empty());
}

#[test]
fn a_breakers_probation_is_overridden_within_its_envelope_of_one_window() {
    // Not written: the probation is one window (30s), and an override moves it from there.
    let merged = merge("breaker search { probation = 10s }");
    assert!(!merged.check().has_errors());
    let breaker = merged.set.spec().breakers.get("search").unwrap();
    assert_eq!(breaker.config.probation, Some(Duration::from_secs(10)));
    assert!(breaker.at.settings.get("probation").is_some());
    assert_eq!(merged.applied[0].key, "probation");
    assert!(
        merge("breaker search { probation = 1s }")
            .check()
            .has_errors(),
        "below a quarter of the 30s window"
    );
}
