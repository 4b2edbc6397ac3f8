//! The macros' front end: files of a directory, plus operations built from attribute arguments
//! with external locations, checked by the same validator.
#![expect(
    clippy::expect_used,
    reason = "test helper: a failure should stop the test"
)]

use std::time::Duration;

use velocity_policy_lang::{Loc, Located, OperationSpec, PolicySet, WorkClass};

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("policy-lang-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

#[test]
fn attributes_and_files_meet_in_one_spec() {
    let dir = temp_dir("front-ends");
    std::fs::write(dir.join("a.policy"), "request { deadline = 10s }\n").unwrap();
    std::fs::write(
        dir.join("b.policy"),
        "retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s) }\n",
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not a policy").unwrap();

    let mut set = PolicySet::new();
    let read = set.load_dir(&dir).unwrap();
    assert_eq!(read.len(), 2);

    // #[critical] #[resilient(retry = "transient", deadline = "3s")] async fn charge_card()
    // -- tokens 0, 1 and 2 are the function name, `critical` and the retry string.
    let mut charge = OperationSpec::new(
        Located::new("charge_card".to_owned(), Loc::External(0)),
        Located::new(WorkClass::Critical, Loc::External(1)),
        Loc::External(0),
    );
    charge.retry = Some(Located::new("transient".to_owned(), Loc::External(2)));
    charge.deadline = Some(Located::new(Duration::from_secs(3), Loc::External(3)));
    set.add_operation(charge);

    let report = set.check();
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    let error = &report.errors[0];
    assert_eq!(error.code(), "policy::retry-not-idempotent");
    let locs: Vec<Loc> = error.labels.iter().map(|label| label.loc).collect();
    assert_eq!(locs, [Loc::External(2), Loc::External(0)]);
    // Rendering a diagnostic with no file location does not fail.
    assert!(set.render(error).contains("policy::retry-not-idempotent"));

    // A reference from an attribute to a name no file defines gets a suggestion.
    let mut other = OperationSpec::new(
        Located::new("refund".to_owned(), Loc::External(10)),
        Located::new(WorkClass::Critical, Loc::External(11)),
        Loc::External(10),
    );
    other.retry = Some(Located::new("transent".to_owned(), Loc::External(12)));
    other.idempotent = Some(Loc::External(13));
    set.add_operation(other);
    let report = set.check();
    let unknown = report
        .errors
        .iter()
        .find(|e| e.code() == "policy::unknown-name")
        .unwrap();
    assert_eq!(unknown.help().as_deref(), Some("did you mean `transient`?"));
    assert_eq!(unknown.primary_loc(), Some(Loc::External(12)));

    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_duplicate_across_files_points_at_both() {
    let mut set = PolicySet::new();
    set.add_source("a.policy", b"bulkhead db { max_concurrent = 4 }\n");
    set.add_source("b.policy", b"\nbulkhead db { max_concurrent = 2 }\n");
    let report = set.check();
    assert_eq!(report.errors.len(), 1);
    let rendered = set.render(&report.errors[0]);
    assert!(rendered.contains("b.policy:2:10"), "{rendered}");
    assert!(rendered.contains("a.policy:1:10"), "{rendered}");
    assert!(rendered.contains("first defined here"), "{rendered}");
}

/// What the runtime takes of an operation's deadline: the request's when it is shorter (for
/// critical work only), a day when none is written, and the `min_budget` as written.
#[test]
fn an_operations_deadline_config_is_the_governing_deadline_and_its_min_budget() {
    use velocity_policy_lang::DeadlineConfig;
    let mut set = PolicySet::new();
    set.add_source(
        "x.policy",
        b"request { deadline = 2s }\n\
          operation search: critical { deadline = 5s; min_budget = 50ms }\n\
          operation index: deferred, idempotent { deadline = 5s }\n\
          operation free: deferred, idempotent {}\n",
    );
    assert!(!set.check().has_errors(), "{:?}", set.check().errors);
    let spec = set.spec();
    let config = |name: &str| spec.deadline_config(spec.operations.get(name).unwrap());
    assert_eq!(
        config("search"),
        DeadlineConfig::new(Duration::from_secs(2)).with_min_budget(Duration::from_millis(50))
    );
    assert_eq!(config("index"), DeadlineConfig::new(Duration::from_secs(5)));
    assert_eq!(config("free"), DeadlineConfig::DEFAULT);
}
