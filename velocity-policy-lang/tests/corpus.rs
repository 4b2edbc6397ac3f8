//! The corpus: bad files with their expected diagnostics as snapshots, good files that check
//! clean and survive `fmt`.
//!
//! Each `tests/corpus/bad/NAME.policy` has a `NAME.snap` next to it: one line per diagnostic
//! (severity, code, line:column, message), then the rendered reports. Regenerate with
//! `UPDATE_SNAPSHOTS=1 cargo test -p velocity-policy-lang --test corpus` and review the diff like code.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failure should stop the test"
)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use velocity_policy_lang::{PolicySet, Sources};

fn corpus(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "policy"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus in {}", dir.display());
    files
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

fn check(path: &Path) -> (PolicySet, velocity_policy_lang::Report) {
    let mut set = PolicySet::new();
    // Named by file name only, so snapshots do not depend on where the repository lives.
    set.add_source(file_name(path), &std::fs::read(path).unwrap());
    let report = set.check();
    (set, report)
}

fn snapshot(set: &PolicySet, report: &velocity_policy_lang::Report) -> String {
    let mut out = String::new();
    for diagnostic in report.all() {
        let position = diagnostic
            .primary_loc()
            .and_then(|loc| set.sources().position(loc))
            .map_or_else(|| "-".to_owned(), |p| format!("{}:{}", p.line, p.column));
        let severity = if diagnostic.is_error() {
            "error"
        } else {
            "warning"
        };
        writeln!(
            out,
            "{severity} {} {position} {}",
            diagnostic.code(),
            diagnostic.message()
        )
        .unwrap();
    }
    out.push_str("---\n");
    for diagnostic in report.all() {
        out.push_str(&set.render(diagnostic));
        out.push('\n');
    }
    out
}

fn compare(expected_path: &Path, actual: &str, failures: &mut Vec<String>) {
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    match std::fs::read_to_string(expected_path) {
        Ok(expected) if expected == actual => {}
        _ if update => std::fs::write(expected_path, actual).unwrap(),
        Ok(expected) => failures.push(format!(
            "{} differs (UPDATE_SNAPSHOTS=1 to accept):\n--- expected\n{expected}\n--- actual\n{actual}",
            expected_path.display()
        )),
        Err(_) => failures.push(format!(
            "{} is missing (UPDATE_SNAPSHOTS=1 to write it):\n{actual}",
            expected_path.display()
        )),
    }
}

/// The codes listed in the crate docs' table. The table of codes that only an environment can
/// raise (`policy locality --check`) follows it, and is tested through the `policy` command.
fn documented_codes() -> BTreeSet<String> {
    include_str!("../src/lib.rs")
        .lines()
        .take_while(|line| *line != "//! ## Checked against an environment")
        .filter(|line| line.starts_with("//! | `policy::"))
        .filter_map(|line| line.split('`').nth(1).map(str::to_owned))
        .collect()
}

#[test]
fn bad_files_match_their_snapshots() {
    let mut failures = Vec::new();
    let mut seen = BTreeSet::new();
    for path in corpus("bad") {
        let (set, report) = check(&path);
        assert!(
            !report.all().is_empty(),
            "{} produced no diagnostic",
            path.display()
        );
        for diagnostic in report.all() {
            seen.insert(diagnostic.code());
        }
        compare(
            &path.with_extension("snap"),
            &snapshot(&set, &report),
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // Every documented code is exercised by the corpus (except the size limit, which needs a
    // 4 MiB file: `too_large_input_is_refused` below covers it), and every code is documented.
    let documented = documented_codes();
    let untested: Vec<_> = documented
        .iter()
        .filter(|code| !seen.contains(*code) && code.as_str() != "policy::too-large")
        .collect();
    assert!(
        untested.is_empty(),
        "documented codes with no bad file: {untested:?}"
    );
    let undocumented: Vec<_> = seen.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "codes missing from the crate docs: {undocumented:?}"
    );
}

#[test]
fn each_rule_file_reports_its_own_code() {
    for path in corpus("bad") {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if stem == "all-at-once" {
            continue;
        }
        let (_, report) = check(&path);
        let code = format!("policy::{stem}");
        assert!(
            report
                .all()
                .iter()
                .any(|diagnostic| diagnostic.code() == code),
            "{} does not report {code}",
            path.display()
        );
    }
}

#[test]
fn all_errors_of_a_file_are_reported_in_one_run() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/bad/all-at-once.policy");
    let (_, report) = check(&path);
    let codes: BTreeSet<String> = report.errors.iter().map(|d| d.code()).collect();
    for code in [
        "policy::unknown-stanza",
        "policy::zero-attempts",
        "policy::shedding-thresholds-inverted",
        "policy::retry-not-idempotent",
        "policy::min-budget-exceeds-deadline",
        "policy::deferred-not-idempotent",
        "policy::unknown-name",
        "policy::duration-not-positive",
    ] {
        assert!(codes.contains(code), "{code} missing from {codes:?}");
    }
}

#[test]
fn too_large_input_is_refused() {
    let mut set = PolicySet::new();
    set.add_source(
        "huge.policy",
        &vec![b'\n'; velocity_policy_lang::MAX_SOURCE_LEN + 1],
    );
    let report = set.check();
    assert_eq!(report.errors.len(), 1);
    assert_eq!(report.errors[0].code(), "policy::too-large");
}

#[test]
fn good_files_check_clean() {
    for path in corpus("good") {
        let (set, report) = check(&path);
        let all: Vec<String> = report.all().iter().map(|d| set.render(d)).collect();
        assert!(all.is_empty(), "{}:\n{}", path.display(), all.join("\n"));
    }
}

/// The spec printed without locations, to compare the meaning of two texts.
fn meaning(text: &str) -> String {
    let mut set = PolicySet::new();
    set.add_source("x.policy", text.as_bytes());
    let debug = format!("{:#?}", set.spec());
    let mut out = String::new();
    let mut chars = debug.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '@' {
            while chars
                .peek()
                .is_some_and(|c| !c.is_whitespace() && *c != ',')
            {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn fmt_round_trips_every_good_file() {
    let mut failures = Vec::new();
    for path in corpus("good") {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut sources = Sources::new();
        let parsed = velocity_policy_lang::fmt::parse(&mut sources, "x.policy", text.as_bytes());
        assert!(parsed.diagnostics.is_empty());
        let formatted = velocity_policy_lang::fmt::format(&parsed.file, &text);

        // Idempotent.
        let reparsed =
            velocity_policy_lang::fmt::parse(&mut sources, "y.policy", formatted.as_bytes());
        assert!(
            reparsed.diagnostics.is_empty(),
            "{}: formatted output does not parse",
            path.display()
        );
        assert_eq!(
            velocity_policy_lang::fmt::format(&reparsed.file, &formatted),
            formatted,
            "{}: not idempotent",
            path.display()
        );
        // Same meaning, same comments.
        assert_eq!(
            meaning(&text),
            meaning(&formatted),
            "{}: meaning changed",
            path.display()
        );
        let comments = |file: &velocity_policy_lang::fmt::File| {
            file.comments().map(str::to_owned).collect::<Vec<_>>()
        };
        assert_eq!(
            comments(&parsed.file),
            comments(&reparsed.file),
            "{}: comments changed",
            path.display()
        );

        // A file already in canonical form stays as it is; any other has its formatted form
        // pinned next to it.
        if formatted != text {
            compare(&path.with_extension("fmt"), &formatted, &mut failures);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `budget` means time alone; written for a retry's allowance or a build's ceilings, it is an
/// error whose help names the word to use.
#[test]
fn budget_for_an_allowance_or_a_ceiling_names_the_word_to_use() {
    for (text, code, word) in [
        (
            "ceilings web { dir = \"dist\"; baseline_js_kb at most 82kb measured 77kb headroom 5% }\n\
             budget web { dir = \"dist\"; baseline_js_kb at most 82kb measured 77kb headroom 5% }\n",
            "policy::unknown-stanza",
            "did you mean `ceilings`?",
        ),
        (
            "retry r { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); budget = 20% + 10/s }\n",
            "policy::unknown-setting",
            "did you mean `allowance`?",
        ),
    ] {
        let mut set = PolicySet::new();
        set.add_source("x.policy", text.as_bytes());
        let report = set.check();
        let all = report.all();
        let [diagnostic] = all.as_slice() else {
            panic!("one diagnostic expected for {text:?}: {all:?}")
        };
        assert_eq!(diagnostic.code(), code);
        let rendered = set.render(diagnostic);
        assert!(rendered.contains(word), "{rendered}");
    }
}
