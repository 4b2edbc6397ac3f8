//! Every cargo feature of every library crate is documented where a user reads it.
//!
//! The crate docs' "Feature flags" table is `document_features!()`'s rendering of the `## `
//! comments above each feature in `Cargo.toml`, checked in as `src/features.md` (a unit test in
//! each crate keeps it equal): a feature without one is missing from the table, so this test
//! refuses it. On docs.rs (`--cfg docsrs`) `doc_cfg` then badges each feature-gated item
//! with the feature it needs; the test checks that each crate with features turns it on.

use std::path::Path;

/// The library crates, by folder from the workspace root (the facade is `.`).
const CRATES: &[&str] = &[
    ".",
    "velocity-policy-runtime",
    "velocity-policy-delivery",
    "velocity-policy-model",
    "velocity-policy-testkit",
];

/// The features of a `Cargo.toml`'s `[features]` table without a `## ` comment right above them.
fn undocumented_features(manifest: &str) -> (Vec<String>, usize) {
    let mut in_features = false;
    let mut documented = false;
    let mut missing = Vec::new();
    let mut count = 0;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_features = line == "[features]";
            continue;
        }
        if !in_features || line.is_empty() {
            continue;
        }
        if line.starts_with("## ") {
            documented = true;
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        // A continuation of a feature's list (`"dep:a",` on its own line) names no feature.
        let Some((name, _)) = line.split_once('=') else {
            continue;
        };
        let name = name.trim();
        if name.starts_with('"') || name.contains(',') {
            continue;
        }
        if name != "default" {
            count += 1;
            if !documented {
                missing.push(name.to_owned());
            }
        }
        documented = false;
    }
    (missing, count)
}

#[test]
fn every_feature_has_a_doc_comment_and_every_crate_with_features_shows_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    for krate in CRATES {
        let dir = root.join(krate);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
        let (missing, count) = undocumented_features(&manifest);
        for name in missing {
            problems.push(format!(
                "{krate}/Cargo.toml: feature `{name}` has no `## ` comment above it"
            ));
        }
        if count == 0 {
            continue;
        }
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).expect("src/lib.rs");
        if !lib.contains("#![doc = include_str!(\"features.md\")]") {
            problems.push(format!(
                "{krate}/src/lib.rs: no features table (`src/features.md`) in the crate docs"
            ));
        }
        if !lib.contains("fn the_features_table_is_what_cargo_toml_says()") {
            problems.push(format!(
                "{krate}/src/lib.rs: no test that keeps `src/features.md` what `document_features!()` renders"
            ));
        }
        if !lib.contains("#![cfg_attr(docsrs, feature(doc_cfg))]") {
            problems.push(format!(
                "{krate}/src/lib.rs: `doc_cfg` is not turned on under `docsrs`"
            ));
        }
        if !manifest.contains("rustdoc-args = [\"--cfg\", \"docsrs\"]") {
            problems.push(format!(
                "{krate}/Cargo.toml: docs.rs metadata does not pass `--cfg docsrs`"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The names of a `Cargo.toml`'s features, in order (`default` left out).
fn feature_names(manifest: &str) -> Vec<String> {
    let mut in_features = false;
    let mut names = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_features = line == "[features]";
            continue;
        }
        if !in_features || line.starts_with('#') {
            continue;
        }
        if let Some((name, _)) = line.split_once('=') {
            let name = name.trim();
            if !name.starts_with('"') && !name.contains(',') && name != "default" {
                names.push(name.to_owned());
            }
        }
    }
    names
}

/// Issue 42: a few features, each turning on whole modules, the same names in the facade and
/// the runtime. The mechanisms' seven, then the integrations (each one module for one crate the
/// application already chose). A new feature is a decision: add it here, with its reason
/// beside it in Cargo.toml.
#[test]
fn the_facade_and_the_runtime_have_the_chosen_features() {
    let mechanisms = [
        "tower",
        "http",
        "redis",
        "metrics",
        "overrides",
        "dashboard",
        "chaos",
    ];
    let integrations = ["tonic", "reqwest", "rayon", "stale", "serde"];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |path: &str| std::fs::read_to_string(root.join(path)).expect("Cargo.toml");
    let facade = feature_names(&read("Cargo.toml"));
    let runtime = feature_names(&read("velocity-policy-runtime/Cargo.toml"));
    let mut want: Vec<&str> = mechanisms.iter().chain(&integrations).copied().collect();
    want.push("delivery");
    assert_eq!(facade, want, "the facade's features");
    want.pop();
    // `test-registry`: tests only (velocity-policy-testkit's `isolation`), not a user's feature.
    want.push("test-registry");
    assert_eq!(runtime, want, "the runtime's features");
}

#[test]
fn the_check_sees_an_undocumented_feature() {
    let manifest = "[features]\ndefault = []\n## Documented.\nyes = [\"dep:a\",\n  \"dep:b\"]\nno = []\n\n[dependencies]\nx = \"1\"\n";
    assert_eq!(undocumented_features(manifest), (vec!["no".to_owned()], 2));
}
