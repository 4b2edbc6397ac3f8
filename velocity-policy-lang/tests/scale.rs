//! Rules over large policies find what they found on small ones: the lookups that replaced
//! scans (of every name per reference, of every earlier hop per hop) report the same
//! diagnostics, and the "did you mean" stays within its budget.
use std::fmt::Write as _;

use velocity_policy_lang::{Kind, PolicySet};

fn check(text: &str) -> velocity_policy_lang::Report {
    let mut set = PolicySet::new();
    set.add_source("scale.policy", text.as_bytes());
    set.check()
}

#[test]
fn every_unknown_name_is_reported_and_suggestions_stay_within_the_budget() {
    let mut text = String::from("request { deadline = 10s }\n");
    for i in 0..3_000 {
        writeln!(
            text,
            "breaker b{i} {{ open_after = 5 failures within 30s; cooldown = 20s }}\n\
             operation known{i}: critical {{ breaker = b{i} }}\n\
             operation typo{i}: critical {{ breaker = b{i}x }}"
        )
        .unwrap();
    }
    let report = check(&text);
    assert_eq!(report.errors.len(), 3_000);
    let helps: Vec<String> = report
        .errors
        .iter()
        .map(|error| match &error.kind {
            Kind::UnknownName { name, help, .. } => {
                assert!(name.ends_with('x'), "{name}");
                help.clone()
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(helps[0], "did you mean `b0`?");
    let suggested = helps
        .iter()
        .filter(|h| h.starts_with("did you mean"))
        .count();
    // 3,000 × 3,000 comparisons would be needed; the budget allows about a hundred thousand.
    assert!((10..3_000).contains(&suggested), "{suggested} suggested");
    assert_eq!(
        helps.last().unwrap(),
        "define it with `breaker b2999x { ... }`, or name an existing breaker"
    );
}

#[test]
fn an_unknown_name_repeated_is_compared_once() {
    let mut text = String::new();
    for i in 0..2_000 {
        writeln!(
            text,
            "breaker b{i} {{ open_after = 5 failures within 30s; cooldown = 20s }}"
        )
        .unwrap();
    }
    for i in 0..2_000 {
        writeln!(text, "operation o{i}: critical {{ breaker = b7x }}").unwrap();
    }
    let report = check(&text);
    assert_eq!(report.errors.len(), 2_000);
    assert!(report.errors.iter().all(|error| {
        error
            .help()
            .is_some_and(|help| help == "did you mean `b7`?")
    }));
}

#[test]
fn each_repeated_variable_names_the_first_hop() {
    let mut text = String::from("locality {\n");
    for i in 0..2_000 {
        writeln!(text, "    hop{i} = blocking env VAR{}", i % 500).unwrap();
    }
    text.push_str("}\n");
    let report = check(&text);
    assert_eq!(report.errors.len(), 1_500);
    for error in &report.errors {
        let Kind::DuplicateVariable {
            variable,
            first,
            second,
        } = &error.kind
        else {
            panic!("{error:?}")
        };
        let n: usize = variable.trim_start_matches("VAR").parse().unwrap();
        assert_eq!(first, &format!("hop{n}"));
        assert_ne!(second, first);
    }
}
