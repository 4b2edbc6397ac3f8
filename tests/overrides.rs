//! The "done when": an operator changes a deadline in
//! `policies/production/search.policy`, reloads, and the next call of the annotated function
//! uses it, the snapshot (the dashboard's `/policy`) shows it and where it came from; a file
//! that makes an unsafe combination is refused with the message `policy check` prints, and the
//! previous set stays.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failure should stop the test"
)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use velocity_policy::overrides::{Overrides, OverridesError};
use velocity_policy::{Deadline, DeadlineExceeded, ResilienceError};

#[derive(Debug)]
enum SearchError {
    Refused(#[expect(dead_code, reason = "carried for the caller")] ResilienceError),
    TimedOut(#[expect(dead_code, reason = "carried for the caller")] DeadlineExceeded),
}

impl From<ResilienceError> for SearchError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for SearchError {
    fn from(e: DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

/// Bound to `operation search_catalog` in tests/policies/search.policy: deadline 2s, minimum
/// budget 100ms. Answers the budget its call was given.
#[velocity_policy::operation("search_catalog")]
async fn search_catalog(query: String) -> Result<Duration, SearchError> {
    let _ = query;
    Ok(Deadline::current().expect("in scope").budget())
}

/// The deadline the registry's entry for the operation holds now.
fn operation_deadline() -> Duration {
    velocity_policy::Registry::global()
        .snapshot()
        .operations
        .iter()
        .find(|row| &*row.display_name == "search_catalog")
        .expect("registered at the first call")
        .deadline
}

fn compiled_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/policies")
}

#[tokio::test(start_paused = true)]
async fn a_deadline_changed_in_production_is_used_by_the_next_call_and_shown() {
    let production =
        std::env::temp_dir().join(format!("policy-facade-production-{}", std::process::id()));
    std::fs::create_dir_all(&production).unwrap();
    let file = production.join("search.policy");
    std::fs::write(&file, "operation search_catalog { deadline = 400ms }\n").unwrap();

    let overrides = Overrides::builder(compiled_dir())
        .environment("production")
        .dir(&production)
        .strict(true)
        .load()
        .unwrap();

    // The first call: 400ms, not the compiled 2s.
    assert_eq!(
        search_catalog("q".into()).await.unwrap(),
        Duration::from_millis(400)
    );
    assert_eq!(operation_deadline(), Duration::from_millis(400));

    // The operator raises it; a reload (SIGHUP) puts it in force for the next call.
    std::fs::write(&file, "operation search_catalog { deadline = 450ms }\n").unwrap();
    overrides.reload().unwrap();
    assert_eq!(
        search_catalog("q".into()).await.unwrap(),
        Duration::from_millis(450)
    );

    // The dashboard's JSON: the value in force, the compiled one, and where it came from.
    let json = serde_json::to_value(velocity_policy::Registry::global().snapshot()).unwrap();
    let row = json["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["display_name"] == "search_catalog")
        .unwrap()
        .clone();
    assert_eq!(row["deadline_ms"], 450.0);
    assert_eq!(row["compiled_deadline_ms"], 2000.0);
    let setting = &json["overrides"]["settings"][0];
    assert_eq!(setting["name"], "search_catalog");
    assert_eq!(setting["setting"], "deadline");
    assert_eq!(setting["value"], "450ms");
    assert_eq!(setting["compiled"], "2s");
    assert_eq!(setting["line"], 1);
    assert!(setting["file"].as_str().unwrap().ends_with("search.policy"));
    assert!(json["overrides"]["applied_at_unix_ms"].as_u64().unwrap() > 0);

    // Below the compiled minimum budget: unsafe, refused with `policy check`'s message.
    std::fs::write(&file, "operation search_catalog { deadline = 50ms }\n").unwrap();
    let refused = overrides.reload().unwrap_err();
    let OverridesError::Refused { rendered, .. } = &refused else {
        panic!("{refused}");
    };
    let merged = policy_lang_check(&compiled_dir(), &production);
    assert_eq!(rendered, &merged);
    assert!(rendered.contains("policy::min-budget-exceeds-deadline"));
    assert!(
        rendered.contains(&format!("{}:1:39", file.display())),
        "{rendered}"
    );
    // The previous set stays.
    assert_eq!(
        search_catalog("q".into()).await.unwrap(),
        Duration::from_millis(450)
    );
    let json = serde_json::to_value(velocity_policy::Registry::global().snapshot()).unwrap();
    assert_eq!(
        json["overrides"]["refused"]["codes"][0],
        "policy::min-budget-exceeds-deadline"
    );
    std::fs::remove_dir_all(&production).unwrap();
}

/// What `policy check --against` renders for the same directories: the errors of the merged
/// policy, through velocity-policy-lang's renderer.
fn policy_lang_check(compiled: &Path, overrides: &Path) -> String {
    let merged = velocity_policy_lang::overrides::load_overridden(compiled, overrides).unwrap();
    let report = merged.check();
    report
        .errors
        .iter()
        .map(|error| merged.set.render(error))
        .collect::<Vec<_>>()
        .join("\n")
}
