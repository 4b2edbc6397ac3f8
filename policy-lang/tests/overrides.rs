//! Overrides merged into a compiled policy: numbers replaced, structure kept, every unsafe
//! combination refused by the one validator at the override's own location.

use std::time::Duration;

use policy_lang::overrides::{PolicyFile, overridden};

const COMPILED: &str = "\
retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 500ms }
breaker search { open_after = 5 failures within 30s; cooldown = 20s }
shedding { deferred at load 0.5; background at load 0.25 }
operation search: critical, idempotent { retry = transient; breaker = search; deadline = 2s }
operation reindex: deferred, idempotent { deadline = 10s }
";

fn merge(text: &str) -> policy_lang::overrides::Overridden {
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
    assert_eq!(breaker.cooldown.value, Duration::from_secs(5));
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
        codes("operation reindex: critical { deadline = 1s }"),
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
