//! Overrides per environment (feature `overrides`): applied before the first call, refused with
//! the validator's diagnostic and its location, swapped whole at a reload under load, a bad
//! file keeping the set in force, breaker state and bulkhead permits kept.
#![cfg(feature = "overrides")]
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failure should stop the test"
)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use velocity_policy_runtime::breaker::BreakerState;
use velocity_policy_runtime::overrides::{Overrides, OverridesError};
use velocity_policy_runtime::{Deadline, Registry};

const COMPILED: &str = "\
request { deadline = 5s }
breaker search { open_after = 3 failures within 30s; cooldown = 10s }
bulkhead search { max_concurrent = 8; max_queued = 0 }
retry transient { attempts = 3; backoff = full_jitter(base = 10ms, cap = 100ms); attempt_timeout = 500ms }
shedding { deferred at load 0.5; background at load 0.25 }
operation search: critical, idempotent { breaker = search; bulkhead = search; retry = transient; deadline = 2s; min_budget = 100ms }
operation reindex: deferred, idempotent { deadline = 10s }
envelope { breaker search cooldown within 25% to 300% }
";

/// A fresh `policies/` with the compiled file and a `production/` of overrides.
struct Policies {
    root: PathBuf,
}

impl Policies {
    fn new(test: &str) -> Self {
        let root =
            std::env::temp_dir().join(format!("policy-overrides-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("production")).unwrap();
        std::fs::write(root.join("search.policy"), COMPILED).unwrap();
        Self { root }
    }

    fn set(&self, text: &str) {
        std::fs::write(self.root.join("production/search.policy"), text).unwrap();
    }

    fn path(&self) -> &Path {
        &self.root
    }
}

impl Drop for Policies {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn fresh() -> &'static Registry {
    Box::leak(Box::new(Registry::new()))
}

fn load(
    policies: &Policies,
    registry: &'static Registry,
    strict: bool,
) -> Result<Overrides, OverridesError> {
    Overrides::builder(policies.path())
        .environment("production")
        .registry(registry)
        .strict(strict)
        .load()
}

fn search_deadline(
    registry: &Registry,
) -> Arc<velocity_policy_runtime::deadline::OperationDeadline> {
    registry.operation_deadline(
        "shop::search",
        Duration::from_secs(2),
        Duration::from_millis(100),
    )
}

#[test]
fn an_override_at_startup_is_in_force_before_the_first_call() {
    let policies = Policies::new("startup");
    policies.set(
        "operation search { deadline = 800ms }\n\
         retry transient { attempts = 2 }\n\
         breaker search { cooldown = 3s }\n\
         shedding { deferred at load 0.75 }\n",
    );
    let registry = fresh();
    load(&policies, registry, true).unwrap();
    // Built after the load, as an annotated function's handles are at their first call.
    let search = search_deadline(registry);
    assert_eq!(
        search.current(),
        (Duration::from_millis(800), Duration::from_millis(100))
    );
    assert_eq!(search.compiled().0, Duration::from_secs(2));
    let retry = registry.retry("transient", |r| {
        r.attempts(3)
            .backoff(Duration::from_millis(10), Duration::from_millis(100))
            .attempt_timeout(Duration::from_millis(500))
    });
    assert_eq!(retry.attempts(), 2);
    assert_eq!(retry.attempt_timeout(), Some(Duration::from_millis(500)));
    let breaker = registry.breaker("search", |b| {
        b.open_after_failures(3, Duration::from_secs(30))
            .cooldown(Duration::from_secs(10))
    });
    assert_eq!(breaker.config().cooldown, Duration::from_secs(3));
    let shedder = registry.shedder(
        "shop::reindex",
        velocity_policy_runtime::shedding::Thresholds::DEFAULT,
    );
    assert!((shedder.thresholds().deferred - 0.75).abs() < 1e-9);
    // Not overridden: compiled.
    let reindex =
        registry.operation_deadline("shop::reindex", Duration::from_secs(10), Duration::ZERO);
    assert_eq!(reindex.current().0, Duration::from_secs(10));

    let snapshot = registry.snapshot();
    let rows: Vec<(&str, &str, &str, u32)> = snapshot
        .overrides
        .settings
        .iter()
        .map(|s| (&*s.kind, &*s.setting, &*s.value, s.line))
        .collect();
    assert_eq!(
        rows,
        [
            ("operation", "deadline", "800ms", 1),
            ("retry", "attempts", "2", 2),
            ("breaker", "cooldown", "3s", 3),
            ("shedding", "deferred", "deferred at load 0.75", 4),
        ]
    );
    assert_eq!(
        snapshot.overrides.settings[0].compiled.as_deref(),
        Some("2s")
    );
    assert!(
        snapshot.overrides.settings[0]
            .file
            .ends_with("production/search.policy")
    );
    assert_eq!(
        snapshot.overrides.environment.as_deref(),
        Some("production")
    );
    assert_eq!(snapshot.overrides.applied, 1);
    let json = serde_json::to_value(&snapshot).unwrap();
    assert_eq!(json["overrides"]["settings"][0]["column"], 20);
    let row = json["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["display_name"] == "search")
        .unwrap();
    assert_eq!(row["deadline_ms"], 800.0);
    assert_eq!(row["compiled_deadline_ms"], 2000.0);
}

#[test]
fn an_unsafe_override_is_refused_at_its_location_and_the_compiled_numbers_stay() {
    let policies = Policies::new("unsafe");
    // Shorter than an attempt may take.
    policies.set("\noperation search { deadline = 300ms }\n");
    let registry = fresh();
    let refused = load(&policies, registry, true).unwrap_err();
    let OverridesError::Refused {
        codes, rendered, ..
    } = &refused
    else {
        panic!("{refused}");
    };
    assert_eq!(codes, &["policy::attempt-timeout-exceeds-deadline"]);
    assert!(
        rendered.contains("production/search.policy:2:31"),
        "{rendered}"
    );
    assert!(
        rendered.contains("lower `attempt_timeout` to 300ms or less"),
        "{rendered}"
    );

    // Not strict: the service starts, on the compiled numbers, the refusal listed.
    let overrides = load(&policies, registry, false).unwrap();
    assert_eq!(
        search_deadline(registry).current().0,
        Duration::from_secs(2)
    );
    let snapshot = registry.snapshot();
    let listed = snapshot.overrides.refused.as_ref().unwrap();
    assert_eq!(
        &*listed.codes[0],
        "policy::attempt-timeout-exceeds-deadline"
    );
    assert!(snapshot.overrides.settings.is_empty());
    drop(overrides);

    for (text, code) in [
        (
            "operation search { min_budget = 3s }",
            "policy::min-budget-exceeds-deadline",
        ),
        (
            "operation reindex { shed_at = 0.5 }\noperation search { shed_at = 0.5 }",
            "policy::shed-critical",
        ),
        ("retry transient { attempts = 0 }", "policy::zero-attempts"),
        ("breaker serch { cooldown = 1s }", "policy::unknown-name"),
        (
            "operation search { retry = other }",
            "policy::not-overridable",
        ),
    ] {
        policies.set(text);
        let refused = load(&policies, fresh(), true).unwrap_err();
        let OverridesError::Refused { codes, .. } = &refused else {
            panic!("{refused}");
        };
        assert_eq!(codes, &[code], "{text}");
    }
}

#[test]
fn a_bad_file_mid_run_keeps_the_set_in_force() {
    let policies = Policies::new("midrun");
    policies.set("operation search { deadline = 800ms }");
    let registry = fresh();
    let overrides = load(&policies, registry, true).unwrap();
    let search = search_deadline(registry);
    assert_eq!(search.current().0, Duration::from_millis(800));

    policies.set("operation search { deadline = 1200ms; min_budget = 50ms }");
    overrides.reload().unwrap();
    assert_eq!(
        search.current(),
        (Duration::from_millis(1200), Duration::from_millis(50))
    );

    // A syntax error, then an unsafe combination: both refused, 1200ms stays.
    policies.set("operation search { deadline = }");
    assert!(overrides.reload().is_err());
    policies.set("operation search { deadline = 1200ms; min_budget = 2s }");
    let refused = overrides.reload().unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("policy::min-budget-exceeds-deadline")
    );
    assert_eq!(
        search.current(),
        (Duration::from_millis(1200), Duration::from_millis(50))
    );
    let snapshot = registry.snapshot();
    assert_eq!(snapshot.overrides.refusals, 2);
    assert_eq!(snapshot.overrides.settings[0].value.as_ref(), "1200ms");
    assert!(snapshot.overrides.refused.is_some());

    // The override removed: back to the compiled numbers.
    policies.set("");
    overrides.reload().unwrap();
    assert_eq!(
        search.current(),
        (Duration::from_secs(2), Duration::from_millis(100))
    );
    assert!(registry.snapshot().overrides.refused.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_breaker_keeps_its_state_across_a_reload_of_its_thresholds() {
    let policies = Policies::new("breaker");
    policies.set("");
    let registry = fresh();
    let overrides = load(&policies, registry, true).unwrap();
    let breaker = registry.breaker("search", |b| {
        b.open_after_failures(3, Duration::from_secs(30))
            .cooldown(Duration::from_secs(10))
    });
    // Two failures counted, then a cooldown change: the count is kept (the rule is the same).
    breaker.record_failure();
    breaker.record_failure();
    policies.set("breaker search { cooldown = 4s }");
    overrides.reload().unwrap();
    breaker.record_failure();
    assert_eq!(breaker.state(), BreakerState::Open);
    // Open for the new cooldown.
    tokio::time::advance(Duration::from_secs(3)).await;
    assert!(breaker.check().is_err());
    // A reload while open: the opening runs to its end.
    policies.set("breaker search { cooldown = 30s; open_after = 1 failures within 30s }");
    overrides.reload().unwrap();
    assert!(breaker.check().is_err());
    tokio::time::advance(Duration::from_millis(1001)).await;
    assert!(breaker.check().is_ok());
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.openings, 1);
    assert_eq!(snapshot.failures, 3);
    assert_eq!(snapshot.config.cooldown, Duration::from_secs(30));
}

/// Thousands of calls in flight through one operation's deadline, retry and bulkhead while the
/// set flips between two valid ones: every call sees one whole set, no permit is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_under_load_is_never_half_applied_and_loses_no_permit() {
    const A: &str = "operation search { deadline = 800ms; min_budget = 80ms }\n\
                     retry transient { attempts = 2; attempt_timeout = 400ms }\n\
                     bulkhead search { max_concurrent = 8 }\n";
    const B: &str = "operation search { deadline = 1500ms; min_budget = 150ms }\n\
                     retry transient { attempts = 4; attempt_timeout = 700ms }\n\
                     bulkhead search { max_concurrent = 3 }\n";
    let policies = Policies::new("load");
    policies.set(A);
    let registry = fresh();
    let overrides = Arc::new(load(&policies, registry, true).unwrap());
    let search = search_deadline(registry);
    let retry = registry.retry("transient", |r| r);
    let bulkhead = registry.bulkhead("search", |b| b.max_concurrent(8));
    let peak = Arc::new(AtomicU32::new(0));

    let calls: Vec<_> = (0..4000)
        .map(|_| {
            let (search, retry, bulkhead, peak) = (
                search.clone(),
                retry.clone(),
                bulkhead.clone(),
                peak.clone(),
            );
            tokio::spawn(async move {
                let (deadline, min_budget) = search.current();
                let numbers = retry.numbers();
                let admitted = Deadline::for_named(&search).unwrap();
                // Read a moment after `current()`: a reload may come between the two, so the
                // admitted budget is one whole set's deadline (no scope clamps it here), the
                // one read above or the other. `<= deadline` failed when B came in between.
                assert!(
                    admitted.budget() == Duration::from_millis(800)
                        || admitted.budget() == Duration::from_millis(1500),
                    "{:?}",
                    admitted.budget()
                );
                let permit = bulkhead.try_acquire();
                if permit.is_ok() {
                    let running = bulkhead.snapshot().running;
                    peak.fetch_max(running, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
                drop(permit);
                (
                    deadline,
                    min_budget,
                    numbers.attempts,
                    numbers.attempt_timeout,
                )
            })
        })
        .collect();
    for n in 0..50 {
        policies.set(if n % 2 == 0 { B } else { A });
        overrides.reload().unwrap();
        tokio::task::yield_now().await;
    }
    for call in calls {
        let (deadline, min_budget, attempts, timeout) = call.await.unwrap();
        let whole_a =
            deadline == Duration::from_millis(800) && min_budget == Duration::from_millis(80);
        let whole_b =
            deadline == Duration::from_millis(1500) && min_budget == Duration::from_millis(150);
        assert!(
            whole_a || whole_b,
            "half an operation: {deadline:?} {min_budget:?}"
        );
        let retry_a = attempts == 2 && timeout == Some(Duration::from_millis(400));
        let retry_b = attempts == 4 && timeout == Some(Duration::from_millis(700));
        assert!(retry_a || retry_b, "half a retry: {attempts} {timeout:?}");
    }
    // The last set written was A (n = 49).
    assert_eq!(search.current().0, Duration::from_millis(800));
    assert_eq!(bulkhead.max_concurrent(), 8);
    let after = bulkhead.snapshot();
    assert_eq!(after.running, 0, "a permit was lost");
    assert!(peak.load(Ordering::Relaxed) <= 8);
    // Every slot can be taken again.
    let permits: Vec<_> = (0..8).map(|_| bulkhead.try_acquire().unwrap()).collect();
    assert!(bulkhead.try_acquire().is_err());
    drop(permits);
    assert_eq!(registry.snapshot().overrides.applied, 51);
}

#[test]
fn a_bulkhead_resized_down_refuses_new_callers_until_the_calls_in_flight_drain() {
    let policies = Policies::new("resize");
    policies.set("");
    let registry = fresh();
    let overrides = load(&policies, registry, true).unwrap();
    let bulkhead = registry.bulkhead("search", |b| b.max_concurrent(8));
    let mut running: Vec<_> = (0..6).map(|_| bulkhead.try_acquire().unwrap()).collect();
    policies.set("bulkhead search { max_concurrent = 3 }");
    overrides.reload().unwrap();
    assert_eq!(bulkhead.max_concurrent(), 3);
    // Six in flight keep their permits; nobody new until fewer than three run.
    assert_eq!(bulkhead.snapshot().running, 6);
    assert!(bulkhead.try_acquire().is_err());
    running.truncate(3);
    assert!(bulkhead.try_acquire().is_err());
    running.truncate(2);
    let third = bulkhead.try_acquire().unwrap();
    assert!(bulkhead.try_acquire().is_err());
    drop((running, third));
    assert_eq!(bulkhead.snapshot().running, 0);
}

/// The watcher: a change to a file reloads; a bad one is refused
/// and the set in force stays. File events arrive in real time, so this waits for them (a
/// few milliseconds on inotify), up to five seconds.
#[test]
fn the_watcher_reloads_when_a_file_changes() {
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let start = std::time::Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(5), "{what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let policies = Policies::new("watch");
    policies.set("operation search { deadline = 800ms }");
    let registry = fresh();
    let overrides = Arc::new(load(&policies, registry, true).unwrap());
    let _watcher = overrides.watch().unwrap();
    let search = search_deadline(registry);
    assert_eq!(search.current().0, Duration::from_millis(800));

    policies.set("operation search { deadline = 900ms }");
    wait_for("the change reloaded", &|| {
        search.current().0 == Duration::from_millis(900)
    });
    policies.set("operation search { deadline = 10ms }");
    wait_for("the bad file refused", &|| {
        registry.snapshot().overrides.refused.is_some()
    });
    assert_eq!(search.current().0, Duration::from_millis(900));
}

/// Issue 39: a set of ten thousand unknown stanzas is refused with a few events and one count,
/// not ten thousand events.
#[test]
fn a_flood_of_unknown_stanzas_is_a_few_events_and_one_count() {
    let policies = Policies::new("flood");
    let flood: String = (0..10_000)
        .map(|i| format!("breaker unknown_{i} {{ cooldown = 1s }}\n"))
        .collect();
    policies.set(&flood);
    let registry = fresh();
    let (logs, _guard) = common::capture();
    let refused = load(&policies, registry, true).unwrap_err();
    let events = logs.lines_with(&["kind=\"override_refused\""]);
    assert_eq!(events.len(), 11, "ten errors and one count");
    let count = &events[10];
    assert!(
        count.contains("count=9990")
            && count.contains("reason=\"more_errors\"")
            && count.contains("codes=\"policy::unknown-name\"")
            && count.contains("`unknown_10`, `unknown_11`"),
        "{count}"
    );
    let OverridesError::Refused {
        codes, rendered, ..
    } = refused
    else {
        panic!("{refused}");
    };
    assert_eq!(codes.len(), 10);
    assert!(rendered.len() < 20_000, "{} bytes", rendered.len());
    assert!(
        rendered.ends_with(
            "the first at `unknown_10`, `unknown_11`, `unknown_12`, `unknown_13`, `unknown_14`"
        ),
        "{}",
        &rendered[rendered.len() - 200..]
    );
}

#[tokio::test(start_paused = true)]
async fn an_override_shortens_a_breakers_probation() {
    let policies = Policies::new("probation");
    // Compiled: one window, 30s; an override may set a quarter of it and up.
    policies.set("breaker search { probation = 10s }");
    let registry = fresh();
    let overrides = load(&policies, registry, true).unwrap();
    let breaker = registry.breaker("search", |b| {
        b.open_after_failures(3, Duration::from_secs(30))
            .cooldown(Duration::from_secs(10))
    });
    assert_eq!(breaker.config().probation, Some(Duration::from_secs(10)));
    for _ in 0..3 {
        breaker.record_failure();
    }
    // Cooldown over, and 11s more: past the 10s probation, inside the 30s window.
    tokio::time::advance(Duration::from_secs(21)).await;
    assert_eq!(breaker.state(), BreakerState::Closed);
    breaker.record_failure();
    assert_eq!(
        breaker.state(),
        BreakerState::Closed,
        "one failure of three"
    );
    policies.set("breaker search { probation = 1s }");
    assert!(overrides.reload().is_err(), "below a quarter of the window");
}

/// Every overridable row of a table whose range refuses something, set outside it by an
/// override, is refused at startup with the row's code: the runtime asks the one validator,
/// which reads the range from the row.
#[test]
fn every_overridable_range_is_refused_with_its_code() {
    use velocity_policy_lang::units::format_duration;
    use velocity_policy_lang::{BreakerConfig, Number, RetryConfig, Setting};

    fn refusing<C>(table: &[Setting<C>]) -> Vec<(&'static str, String, &'static str)> {
        table
            .iter()
            .filter(|setting| setting.overridable)
            .filter_map(|setting| {
                let value = match setting.range.outside()? {
                    Number::Duration(d) => format_duration(d),
                    Number::Count(n) => n.to_string(),
                    Number::Share(share) => share.to_string(),
                };
                Some((setting.key, value, setting.range.code()?))
            })
            .collect()
    }
    let policies = Policies::new("ranges");
    let mut checked = 0;
    for (stanza, rows) in [
        ("breaker search", refusing(BreakerConfig::SETTINGS)),
        ("retry transient", refusing(RetryConfig::SETTINGS)),
    ] {
        for (key, value, code) in rows {
            checked += 1;
            let text = format!("{stanza} {{ {key} = {value} }}");
            policies.set(&text);
            let refused = load(&policies, fresh(), true).unwrap_err();
            let OverridesError::Refused { codes, .. } = &refused else {
                panic!("{refused}");
            };
            assert_eq!(codes, &[code], "{text}");
        }
    }
    // `max_retry_after` and `attempt_timeout` today.
    assert!(checked >= 2, "{checked} ranges checked");
}
