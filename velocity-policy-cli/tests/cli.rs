//! The `policy` binary, run as a user would: exit codes, output shapes, files changed or not.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failure should stop the test"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../velocity-policy-lang/tests/corpus")
        .join(path)
}

fn policy(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_policy"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn path(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn temp_copy(from: &Path, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("policy-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let to = dir.join(from.file_name().unwrap());
    std::fs::copy(from, &to).unwrap();
    to
}

#[test]
fn check_exits_0_on_a_clean_policy() {
    let output = policy(&["check", path(&corpus("good/example.policy"))]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("0 errors, 0 warnings in 1 file (3 operations)"));
}

#[test]
fn check_exits_1_with_a_report_per_error() {
    let output = policy(&["check", path(&corpus("bad/unknown-name.policy"))]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert_eq!(err.matches("policy::unknown-name").count(), 4, "{err}");
    assert!(err.contains("unknown-name.policy:5:15"), "{err}");
    assert!(err.contains("breaker = paymnts"), "{err}");
    assert!(err.contains("help: did you mean `payments`?"), "{err}");
    assert!(err.contains("4 errors, 0 warnings"), "{err}");
}

#[test]
fn check_reads_directories_as_one_policy() {
    let dir = std::env::temp_dir().join(format!("policy-cli-{}-dir", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("a.policy"),
        "retry r { attempts = 2; backoff = full_jitter(base = 10ms, cap = 20ms) }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.policy"),
        "operation op: critical, idempotent { retry = r; deadline = 1s }\n",
    )
    .unwrap();
    let output = policy(&["check", path(&dir)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("in 2 files (1 operation)"));
}

#[test]
fn check_json_has_codes_positions_and_labels() {
    let output = policy(&[
        "check",
        "--format",
        "json",
        path(&corpus("bad/all-at-once.policy")),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["errors"], 8);
    assert_eq!(json["warnings"], 0);
    assert!(
        json["files"][0]
            .as_str()
            .unwrap()
            .ends_with("all-at-once.policy")
    );
    let first = &json["diagnostics"][0];
    assert_eq!(first["severity"], "error");
    assert_eq!(first["code"], "policy::unknown-stanza");
    assert_eq!(first["message"], "unknown stanza `bulkhed`");
    assert_eq!(first["help"], "did you mean `bulkhead`?");
    assert_eq!(
        (first["line"].as_u64(), first["column"].as_u64()),
        (Some(3), Some(1))
    );
    let label = &first["labels"][0];
    assert_eq!(
        (
            label["line"].as_u64(),
            label["column"].as_u64(),
            label["end_column"].as_u64()
        ),
        (Some(3), Some(1), Some(8))
    );
    assert_eq!(label["text"], "not a stanza");
}

#[test]
fn check_warnings_alone_exit_0() {
    let output = policy(&[
        "check",
        "--format",
        "json",
        path(&corpus("bad/queue-stores-backlog.policy")),
    ]);
    assert_eq!(output.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["diagnostics"][0]["severity"], "warning");
}

#[test]
fn usage_and_io_errors_exit_2() {
    assert_eq!(policy(&[]).status.code(), Some(2));
    assert_eq!(policy(&["check"]).status.code(), Some(2));
    assert_eq!(
        policy(&["check", "--format", "xml", "x.policy"])
            .status
            .code(),
        Some(2)
    );
    let missing = policy(&["check", "/nonexistent/x.policy"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("cannot read `/nonexistent/x.policy`"));
    assert_eq!(
        policy(&["fmt", "/nonexistent/x.policy"]).status.code(),
        Some(2)
    );
    assert_eq!(
        policy(&["explain", "/nonexistent/x.policy"]).status.code(),
        Some(2)
    );
}

#[test]
fn explain_prints_chains_and_both_bounds() {
    let output = policy(&[
        "explain",
        path(&corpus("good/example.policy")),
        "index_document",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "operation index_document: deferred, idempotent\n\
         \x20 1. shedding: shed when load reaches 0.5 (deferred)\n\
         \x20 2. retry `transient`: up to 3 attempts, full jitter backoff (base 50ms, cap 1s); each attempt:\n\
         \x20    a. deadline: run for at most 2s per attempt, within what remains of 5s\n\
         \x20 worst case with deadline propagation:    5s\n\
         \x20 worst case if each timeout stood alone:  6.15s (3 × 2s + 50ms + 100ms)\n\
         \n\
         note: these are the files' values. A function bound to an operation (by its own name, or by \
         `#[velocity_policy::operation(\"...\")]`) keeps the operation's class, and each value its attribute \
         gives (`deadline`, `min_budget`, `breaker = \"...\"`, ...) replaces the file's for that \
         function.\n"
    );
}

#[test]
fn explain_json_and_unknown_operation() {
    let output = policy(&[
        "explain",
        "--format",
        "json",
        path(&corpus("good/example.policy")),
    ]);
    assert_eq!(output.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 3);
    assert_eq!(json[1]["operation"], "index_document");
    assert_eq!(json[1]["bound_ms"], 5000.0);
    assert_eq!(json[1]["bound_without_propagation_ms"], 6150.0);

    let unknown = policy(&[
        "explain",
        path(&corpus("good/example.policy")),
        "charge_crd",
    ]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("did you mean `charge_card`?"));
}

#[test]
fn explain_refuses_an_invalid_policy() {
    let output = policy(&["explain", path(&corpus("bad/retry-not-idempotent.policy"))]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("policy::retry-not-idempotent"));
    assert!(stdout(&output).is_empty());
}

#[test]
fn fmt_rewrites_then_check_passes() {
    let file = temp_copy(&corpus("good/messy.policy"), "fmt");
    let check = policy(&["fmt", "--check", path(&file)]);
    assert_eq!(check.status.code(), Some(1));
    assert!(stdout(&check).contains("messy.policy"));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(corpus("good/messy.policy")).unwrap()
    );

    assert_eq!(policy(&["fmt", path(&file)]).status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        std::fs::read_to_string(corpus("good/messy.fmt")).unwrap()
    );
    let again = policy(&["fmt", "--check", path(&file)]);
    assert_eq!(again.status.code(), Some(0));
    assert!(stdout(&again).is_empty());
}

#[test]
fn fmt_leaves_a_file_that_does_not_parse() {
    let file = temp_copy(&corpus("bad/syntax.policy"), "fmt-bad");
    let output = policy(&["fmt", path(&file)]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("policy::syntax"));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(corpus("bad/syntax.policy")).unwrap()
    );
}

/// The repository's own `.policy` files, formatted: the list `.ci/run` checks with `policy fmt
/// --check` (`.ci/policy-files`).
#[test]
fn the_repositorys_own_policy_files_are_formatted() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let list = std::fs::read_to_string(root.join(".ci/policy-files")).unwrap();
    let args: Vec<String> = list
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|item| path(&root.join(item)).to_owned())
        .collect();
    assert!(args.len() > 10, "{list}");
    let mut command = vec!["fmt", "--check"];
    command.extend(args.iter().map(String::as_str));
    let output = policy(&command);
    assert_eq!(
        output.status.code(),
        Some(0),
        "not formatted (run `policy fmt` on them):\n{}{}",
        stdout(&output),
        stderr(&output)
    );
}

/// The text of the README and of the facade's guides (`src/guide/*.rs`, their `//!` docs with
/// the comment marker taken off), where the `.policy` examples a reader copies live.
fn readme_and_guides() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut text = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut guides: Vec<PathBuf> = std::fs::read_dir(root.join("src/guide"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    guides.sort();
    for guide in guides {
        for line in std::fs::read_to_string(guide).unwrap().lines() {
            if let Some(doc) = line.strip_prefix("//!") {
                text.push_str(doc.strip_prefix(' ').unwrap_or(doc));
                text.push('\n');
            }
        }
    }
    text
}

/// The `.policy` examples of the README and the guides are what `policy fmt` writes: a reader
/// who copies one and runs `policy fmt --check` sees no change. The examples are their `text`
/// blocks that parse as policy files (reports and outputs do not).
#[test]
fn the_readmes_policy_examples_are_formatted() {
    let readme = readme_and_guides();
    let dir = std::env::temp_dir().join(format!("policy-cli-{}-readme", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut examples = 0;
    for (index, block) in readme.split("```text\n").skip(1).enumerate() {
        let block = block.split("```").next().unwrap();
        let file = dir.join(format!("example-{index}.policy"));
        std::fs::write(&file, block).unwrap();
        let check = policy(&["check", path(&file)]);
        if stderr(&check).contains("policy::syntax") {
            continue; // a report or an output, not a policy file
        }
        examples += 1;
        let output = policy(&["fmt", "--check", path(&file)]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "README or guide example {index} is not what `policy fmt` writes:\n{block}"
        );
    }
    assert!(
        examples >= 2,
        "found {examples} policy examples in the README and the guides"
    );
}

/// `policy check --against policies policies/production`: the overrides merged into the
/// compiled policy and checked whole, with the diagnostic a reload would refuse them with.
#[test]
fn check_against_a_compiled_policy_refuses_an_unsafe_override_at_its_location() {
    let root = std::env::temp_dir().join(format!("policy-cli-{}-against", std::process::id()));
    let production = root.join("production");
    std::fs::create_dir_all(&production).unwrap();
    std::fs::write(
        root.join("search.policy"),
        "retry transient { attempts = 2; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 500ms }\n\
         operation search: critical, idempotent { retry = transient; deadline = 2s }\n",
    )
    .unwrap();
    let overrides = production.join("search.policy");
    std::fs::write(&overrides, "operation search { deadline = 800ms }\n").unwrap();
    let output = policy(&["check", "--against", path(&root), path(&production)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("0 errors, 0 warnings in 1 file (1 operation)"));

    std::fs::write(&overrides, "operation search { deadline = 300ms }\n").unwrap();
    let output = policy(&["check", "--against", path(&root), path(&production)]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("policy::attempt-timeout-exceeds-deadline"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}:1:31", overrides.display())),
        "{err}"
    );

    std::fs::write(&overrides, "operation serch { deadline = 800ms }\n").unwrap();
    let output = policy(&["check", "--against", path(&root), path(&production)]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("policy::unknown-name"), "{err}");
    assert!(err.contains("did you mean `search`?"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A scratch crate folder: a `Cargo.toml` with `metadata` appended, and nothing else.
fn crate_folder(name: &str, metadata: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("policy-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!("[package]\nname = \"shop\"\nversion = \"0.1.0\"\n{metadata}"),
    )
    .unwrap();
    dir
}

#[test]
fn a_crate_folder_stands_for_its_policies() {
    // The demo's crate folder, not its `policies/`: the files the macros read there.
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/demo");
    let check = policy(&["check", path(&demo)]);
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    assert!(stderr(&check).contains("in 1 file ("), "{}", stderr(&check));
    let explain = policy(&["explain", path(&demo), "save_document"]);
    assert_eq!(explain.status.code(), Some(0), "{}", stderr(&explain));
    assert!(
        stdout(&explain).contains("save_document"),
        "{}",
        stdout(&explain)
    );

    // `[package.metadata.policy] dir` names another directory: that one is read.
    let dir = crate_folder(
        "metadata-dir",
        "[package.metadata.policy]\ndir = \"config\"\n",
    );
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(
        dir.join("config/shop.policy"),
        "operation checkout: critical { deadline = 2s }\n",
    )
    .unwrap();
    let output = policy(&["check", path(&dir)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("in 1 file (1 operation)"),
        "{}",
        stderr(&output)
    );
    let explain = policy(&["explain", path(&dir)]);
    assert_eq!(explain.status.code(), Some(0), "{}", stderr(&explain));
    assert!(
        stdout(&explain).contains("checkout"),
        "{}",
        stdout(&explain)
    );
}

#[test]
fn a_crate_folder_without_policies_fails_and_says_where_it_looked() {
    let dir = crate_folder("no-policies", "");
    let looked = dir.join("policies");
    for command in ["check", "explain", "fmt"] {
        let output = policy(&[command, path(&dir)]);
        assert_eq!(output.status.code(), Some(2), "{command}");
        let err = stderr(&output);
        assert!(
            err.contains(&format!(
                "error: no `.policy` files for the crate at `{}`: looked in `{}` (the crate's `policies/`), which does not exist",
                dir.display(),
                looked.display()
            )),
            "{command}: {err}"
        );
        assert!(
            err.contains("help: put the crate's `.policy` files in"),
            "{command}: {err}"
        );
        assert!(stdout(&output).is_empty(), "{command}");
    }

    // An empty `policies/`, and a metadata `dir` that holds nothing: each said as it is.
    std::fs::create_dir_all(&looked).unwrap();
    let empty = stderr(&policy(&["check", path(&dir)]));
    assert!(
        empty.contains("(the crate's `policies/`), which holds none"),
        "{empty}"
    );
    let dir = crate_folder(
        "empty-metadata-dir",
        "[package.metadata.policy]\ndir = \"conf\"\n",
    );
    let output = policy(&["check", path(&dir)]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "looked in `{}` (the `dir` of `[package.metadata.policy]` in its `Cargo.toml`), which does not exist",
            dir.join("conf").display()
        )),
        "{err}"
    );
}

#[test]
fn a_directory_without_policy_files_fails() {
    let dir = std::env::temp_dir().join(format!("policy-cli-{}-no-files", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a policy\n").unwrap();
    for command in ["check", "explain", "fmt"] {
        let output = policy(&[command, path(&dir)]);
        assert_eq!(output.status.code(), Some(2), "{command}");
        let err = stderr(&output);
        assert!(
            err.contains(&format!("error: no `.policy` files in `{}`", dir.display())),
            "{command}: {err}"
        );
        assert!(!err.contains("0 errors"), "{command}: {err}");
    }
    // With a file beside it, the empty directory still fails the run: a path that yields
    // nothing is a mistake whatever else is named.
    let output = policy(&["check", path(&corpus("good/example.policy")), path(&dir)]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn explain_says_when_the_policy_has_no_operations() {
    let file = temp_copy(&corpus("good/gate.policy"), "explain-none");
    let output = policy(&["explain", path(&file)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).is_empty());
    assert!(
        stderr(&output).contains("policy explain: no operations in 1 file"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn every_command_says_which_directory_a_crate_folder_stood_for() {
    // The demo's crate folder: its `policies/`, said on standard error by each command that
    // takes policy paths, beside what it prints.
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/demo");
    let said = format!(
        "note: reading `{}` (the crate's `policies/`) for the crate at `{}`",
        demo.join("policies").display(),
        demo.display()
    );
    for args in [
        vec!["check", path(&demo)],
        vec!["check", "--format", "json", path(&demo)],
        vec!["explain", path(&demo), "save_document"],
        vec!["fmt", "--check", path(&demo)],
        vec!["locality", path(&demo)],
    ] {
        let output = policy(&args);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(&said),
            "{args:?}: {}",
            stderr(&output)
        );
    }

    // `[package.metadata.policy] dir`: that directory, and what named it.
    let dir = crate_folder(
        "said-metadata-dir",
        "[package.metadata.policy]\ndir = \"config\"\n",
    );
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(
        dir.join("config/shop.policy"),
        "operation checkout: critical { deadline = 2s }\n",
    )
    .unwrap();
    let said = format!(
        "note: reading `{}` (the `dir` of `[package.metadata.policy]` in its `Cargo.toml`) for the crate at `{}`",
        dir.join("config").display(),
        dir.display()
    );
    for args in [
        vec!["check", path(&dir)],
        vec!["explain", path(&dir)],
        vec!["fmt", "--check", path(&dir)],
        vec!["gate", "--root", path(&dir), path(&dir)],
    ] {
        let output = policy(&args);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(&said),
            "{args:?}: {}",
            stderr(&output)
        );
    }

    // A policy file or a plain directory is read as named: nothing to say.
    let output = policy(&["check", path(&dir.join("config"))]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        !stderr(&output).contains("note: reading"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn gate_locality_and_assets_fail_on_a_crate_folder_without_policies() {
    // The other commands that take policy paths refuse nothing found as check, explain and
    // fmt do: exit 2, saying where they looked.
    let dir = crate_folder("no-policies-others", "");
    let looked = format!(
        "error: no `.policy` files for the crate at `{}`: looked in `{}` (the crate's `policies/`), which does not exist",
        dir.display(),
        dir.join("policies").display()
    );
    for args in [
        vec!["gate", "--root", path(&dir), path(&dir)],
        vec!["locality", path(&dir)],
        vec!["assets", path(&dir), "--policy", path(&dir)],
    ] {
        let output = policy(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&output).contains(&looked),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(stdout(&output).is_empty(), "{args:?}");
    }
}
