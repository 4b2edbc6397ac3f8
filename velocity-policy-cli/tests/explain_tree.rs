//! `policy explain` over a crate: the trees of operations its code runs, both worst cases, the
//! findings, the JSON, and the overrides of an environment in force.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failure should stop the test"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn policy(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_policy"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/demo")
}

/// A crate folder under the temp dir with `policies/shop.policy` and `src/lib.rs`.
fn shop(name: &str, policy_text: &str, source: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("policy-explain-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"shop\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("policies/shop.policy"), policy_text).unwrap();
    std::fs::write(dir.join("src/lib.rs"), source).unwrap();
    dir
}

#[test]
fn the_demos_policies_show_the_saves_tree_and_both_worst_cases() {
    // As the issue tried it: the policies folder, not the crate's.
    let output = policy(&[
        "explain",
        demo().join("policies").to_str().unwrap(),
        "save_document",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    for line in [
        "tree save_document: critical, within the request's 5s",
        "  ├─ authenticate: deadline 100ms, bound 100ms [static]",
        "  ├─ lookup_session: deadline 150ms, bound 150ms [static]",
        "  ├─ authorize: deadline 100ms, bound 100ms [static]",
        "  ├─ validate: deadline 100ms, bound 100ms [static]",
        "  ├─ write_document: deadline 1s, bound 1s [static]",
        "  ├─ record_analytics: deferred, after the response: outside this bound (a tree of its own)",
        "  worst case with deadline propagation:    2s (`save_document`'s own)",
        "  worst case if each timeout stood alone:  3.45s (2s + 100ms + 150ms + 100ms + 100ms + 1s)",
        "  what propagation saves:                  1.45s",
        "    save_document > write_document: 1s with propagation (`write_document`), 3s alone (2s + 1s), 2s saved",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    // The findings are warnings on standard error, in the diagnostics' style.
    let err = text(&output.stderr);
    assert_eq!(
        err.matches("policy::explain::no-min-budget").count(),
        3,
        "{err}"
    );
    assert!(err.contains("demo.policy:44:11"), "{err}");
}

#[test]
fn an_attributes_values_replace_the_files_in_the_tree() {
    // `push_to_index` is an attribute's own operation: 4s, three attempts of the file's
    // `search` retry (1s each, backoffs of 50ms and 100ms).
    let output = policy(&["explain", demo().to_str().unwrap(), "index_document"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    assert!(
        out.contains("  └─ push_to_index: deadline 4s, 3 attempts, bound 3.15s [static]"),
        "{out}"
    );
    assert!(
        out.contains("  worst case if each timeout stood alone:  8.15s (5s + (3 × 1s + 150ms))"),
        "{out}"
    );
}

#[test]
fn the_json_carries_each_entry_points_tree_and_its_findings() {
    let output = policy(&["explain", "--format", "json", demo().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let save = json
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation"] == "save_document")
        .unwrap();
    let tree = &save["tree"];
    assert_eq!(tree["bound_ms"], 2000.0);
    assert_eq!(tree["alone_ms"], 3450.0);
    assert_eq!(tree["difference_ms"], 1450.0);
    assert_eq!(tree["request_ms"], 5000.0);
    assert_eq!(tree["root"]["children"][1]["operation"], "lookup_session");
    assert_eq!(tree["root"]["children"][1]["seen"], "static");
    assert_eq!(tree["paths"].as_array().unwrap().len(), 5);
    let lookup = json
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation"] == "lookup_session")
        .unwrap();
    assert_eq!(
        lookup["findings"][0]["code"],
        "policy::explain::no-min-budget"
    );
    assert_eq!(lookup["findings"][0]["line"], 44);
    assert!(lookup.get("tree").is_none());
}

#[test]
fn calls_are_read_from_the_sources_by_name_and_path_and_their_sites_located() {
    let dir = shop(
        "calls",
        "request { deadline = 5s; min_budget = 20ms }
operation checkout: critical { deadline = 2s; min_budget = 50ms }
operation charge: critical { deadline = 3s; min_budget = 10ms }
",
        r#"
use velocity_policy::critical;

#[critical]
pub async fn checkout() -> Result<(), E> {
    payments::charge().await?;
    Ok(())
}

mod payments {
    #[velocity_policy::critical(min_budget = "10ms")]
    pub async fn charge() -> Result<(), super::E> { Ok(()) }
}

// Not ours: not an operation, and its calls are nobody's.
#[tokio::test]
async fn helper() { checkout().await.unwrap(); }
"#,
    );
    let output = policy(&["explain", dir.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    assert!(
        out.contains("  └─ charge: deadline 3s, bound 2s [static]"),
        "{out}"
    );
    // `charge` asks for 3s under a parent of 2s: never fits, said with the file's place.
    let err = text(&output.stderr);
    assert!(err.contains("policy::explain::child-never-fits"), "{err}");
    assert!(
        err.contains("`charge`'s deadline of 3s never fits in `checkout`"),
        "{err}"
    );
    assert!(err.contains("shop.policy:3:41"), "{err}");
    // The call's place in the code, read from the sources.
    assert!(err.contains("src/lib.rs:6:15"), "{err}");
    assert!(err.contains("called here"), "{err}");
}

#[test]
fn an_environments_overrides_are_in_force_and_an_unsafe_one_is_refused() {
    let dir = shop(
        "env",
        "request { deadline = 5s; min_budget = 20ms }
operation checkout: critical { deadline = 2s; min_budget = 50ms }
operation charge: critical { deadline = 1s; min_budget = 10ms }
",
        "#[velocity_policy::critical(deadline = \"1500ms\")]\nasync fn checkout() { charge().await }\n#[velocity_policy::critical]\nasync fn charge() {}\n",
    );
    std::fs::create_dir_all(dir.join("policies/production")).unwrap();
    std::fs::write(
        dir.join("policies/production/shop.policy"),
        "operation checkout { deadline = 800ms }\n",
    )
    .unwrap();
    // Compiled: the attribute's 1.5s over the file's 2s.
    let compiled = policy(&["explain", dir.to_str().unwrap(), "checkout"]);
    assert!(
        text(&compiled.stdout)
            .contains("worst case if each timeout stood alone:  2.5s (1.5s + 1s)"),
        "{}",
        text(&compiled.stdout)
    );
    // In production the override retunes the operation, as the runtime does: 800ms.
    let production = policy(&[
        "explain",
        "--env",
        "production",
        dir.to_str().unwrap(),
        "checkout",
    ]);
    assert_eq!(
        production.status.code(),
        Some(0),
        "{}",
        text(&production.stderr)
    );
    let out = text(&production.stdout);
    assert!(
        out.contains("operation checkout deadline: 800ms (compiled: 2s)"),
        "{out}"
    );
    assert!(
        out.contains("worst case with deadline propagation:    800ms (`checkout`'s own)"),
        "{out}"
    );
    assert!(
        out.contains("worst case if each timeout stood alone:  1.8s (800ms + 1s)"),
        "{out}"
    );
    // An override the runtime would refuse is refused here, with the same diagnostic.
    std::fs::write(
        dir.join("policies/production/shop.policy"),
        "operation checkout { deadline = 10ms }\n",
    )
    .unwrap();
    let refused = policy(&["explain", "--env", "production", dir.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("policy::min-budget-exceeds-deadline"),
        "{}",
        text(&refused.stderr)
    );
    // An environment with no folder is a usage error that says where it looked.
    let missing = policy(&["explain", "--env", "staging", dir.to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing.stderr).contains("no overrides for environment `staging`"),
        "{}",
        text(&missing.stderr)
    );
}

#[test]
fn a_source_that_does_not_parse_is_skipped_and_said() {
    let dir = shop(
        "broken",
        "operation checkout: critical { deadline = 2s }\n",
        "fn broken( {\n",
    );
    let output = policy(&["explain", dir.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("does not parse as Rust"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn the_help_says_how_to_read_the_output() {
    let output = policy(&["explain", "--help"]);
    let out = text(&output.stdout);
    assert!(
        out.contains("worst case if each timeout stood alone"),
        "{out}"
    );
    assert!(out.contains("[static]"), "{out}");
    assert!(out.contains("--env"), "{out}");
}

/// The deadlines guide's section on reading a tree (`src/guide/deadlines.rs` of the facade, its
/// `//!` docs) quotes the demo's save as `policy explain` prints it: a change to the tree, its
/// numbers or its wording shows up here until the guide follows.
#[test]
fn the_readmes_save_tree_is_what_explain_prints() {
    let guide = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../src/guide/deadlines.rs"),
    )
    .unwrap();
    let readme: String = guide
        .lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .map(|doc| format!("{}\n", doc.strip_prefix(' ').unwrap_or(doc)))
        .collect();
    let quoted: Vec<&str> = readme
        .split("```text\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .filter(|block| block.starts_with("tree save_document:"))
        .collect();
    assert_eq!(
        quoted.len(),
        1,
        "the deadlines guide quotes the save's tree once"
    );
    let output = policy(&[
        "explain",
        demo().join("policies").to_str().unwrap(),
        "save_document",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    assert!(
        out.contains(quoted[0]),
        "the deadlines guide's tree is not what `policy explain` prints:\n{}\nprinted:\n{out}",
        quoted[0]
    );
}
