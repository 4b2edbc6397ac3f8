//! `policy assets` run as a user would, on the asset audit's fixture site
//! (`velocity-policy-delivery/tests/fixtures/assets`; the audit's own tests are beside it, in
//! `velocity-policy-delivery/tests/assets.rs`).
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failure should stop the test"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../velocity-policy-delivery/tests/fixtures/assets")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("policy-assets-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn policy(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_policy"))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

#[test]
fn the_command_reports_findings_and_exits_1() {
    let output = policy(&["assets", "--policy", "site.policy"], &fixtures());
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("policy::assets::unsized-images"), "{err}");
    assert!(err.contains("site/unsized-images.html:9:1]"), "{err}");
    assert!(
        err.contains("help: add `width=\"32\" height=\"16\"`"),
        "{err}"
    );
    assert!(
        err.contains("policy assets: 19 findings in 20 documents (7 images, 7 fonts) under `site`"),
        "{err}"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn the_command_prints_json() {
    let output = policy(
        &[
            "assets",
            "site",
            "--policy",
            "site.policy",
            "--format",
            "json",
        ],
        &fixtures(),
    );
    assert_eq!(output.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["documents"], 20);
    assert_eq!(json["findings"], 19);
    let lazy = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "policy::assets::lcp-lazy-loaded")
        .unwrap();
    assert_eq!(lazy["rule"], "lcp-lazy-loaded");
    assert_eq!(lazy["lighthouse"], "lcp-lazy-loaded");
    assert_eq!(lazy["file"], "site/lcp-lazy-loaded.html");
    assert_eq!(
        (lazy["line"].as_u64(), lazy["column"].as_u64()),
        (Some(9), Some(117))
    );
    assert_eq!(lazy["labels"][0]["end_column"], 131);
    assert!(lazy["help"].as_str().unwrap().starts_with("remove"));
    let ours = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "policy::assets::too-many-preloads")
        .unwrap();
    assert_eq!(ours["lighthouse"], serde_json::Value::Null);
}

#[test]
fn a_clean_folder_passes_with_the_defaults_and_no_policy() {
    let output = policy(&["assets", "clean"], &fixtures());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("0 findings in 1 document (4 images, 2 fonts)"));
    let json = policy(&["assets", "clean", "--format", "json"], &fixtures());
    assert_eq!(json.status.code(), Some(0));
}

#[test]
fn usage_problems_exit_2_and_a_bad_policy_exits_1() {
    let dir = temp_dir("usage");
    let missing = policy(&["assets", "nowhere"], &dir);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("cannot read `nowhere`"));

    std::fs::create_dir_all(dir.join("empty")).unwrap();
    let empty = policy(&["assets", "empty"], &dir);
    assert_eq!(empty.status.code(), Some(2));
    assert!(stderr(&empty).contains("no `.html` documents under `empty`"));

    let no_folder = policy(&["assets"], &dir);
    assert_eq!(no_folder.status.code(), Some(2));

    std::fs::write(
        dir.join("two.policy"),
        "assets web { dir = \"web\" }\nassets docs { dir = \"docs\" }\n",
    )
    .unwrap();
    let two = policy(&["assets", "empty", "--policy", "two.policy"], &dir);
    assert_eq!(two.status.code(), Some(2));
    assert!(stderr(&two).contains("--name"), "{}", stderr(&two));
    let unknown = policy(
        &[
            "assets",
            "empty",
            "--policy",
            "two.policy",
            "--name",
            "webb",
        ],
        &dir,
    );
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("did you mean `web`?"));

    std::fs::write(dir.join("bad.policy"), "assets web { max_image = 0kb }\n").unwrap();
    let bad = policy(&["assets", "empty", "--policy", "bad.policy"], &dir);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("policy::zero-size"));
}

#[test]
fn the_stanza_dir_is_the_default_folder_and_picks_among_stanzas() {
    // `dir` is relative to the policy file, wherever the command runs.
    let output = policy(
        &[
            "assets",
            "--policy",
            "../velocity-policy-delivery/tests/fixtures/assets/site.policy",
        ],
        Path::new(env!("CARGO_MANIFEST_DIR")),
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("19 findings in 20 documents"));

    let dir = temp_dir("pick");
    std::fs::write(
        dir.join("two.policy"),
        format!(
            "assets site {{ dir = \"{}\"; max_image = 32kb; large_image = 10kb; max_font = 8kb; max_font_files = 3; max_font_weights = 2; max_high_priority = 1; max_preloads = 2 }}\nassets clean {{ dir = \"{}\" }}\n",
            fixtures().join("site").display(),
            fixtures().join("clean").display()
        ),
    )
    .unwrap();
    let site = fixtures().join("site");
    let picked = policy(
        &["assets", site.to_str().unwrap(), "--policy", "two.policy"],
        &dir,
    );
    assert_eq!(picked.status.code(), Some(1), "{}", stderr(&picked));
    assert!(stderr(&picked).contains("19 findings"));
    let named = policy(
        &["assets", "--policy", "two.policy", "--name", "clean"],
        &dir,
    );
    assert_eq!(named.status.code(), Some(0), "{}", stderr(&named));
}
