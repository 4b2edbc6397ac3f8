//! A short soak of the debug build (`policy-demo soak`, fifteen seconds): the service in its own
//! process under load on every route while the faults cycle, and the verdict's checks that do
//! not depend on the build's speed. The memory check is CI's, on a one-minute soak of the release
//! build (`.ci/run`).

use std::path::PathBuf;
use std::time::Duration;

use policy_demo::report;
use policy_demo::soak::{self, SoakOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_accounts_for_every_task_and_reports_memory_over_time() {
    let mut options = SoakOptions::new(0.25, PathBuf::from(env!("CARGO_BIN_EXE_policy-demo")))
        .expect("a quarter of a minute is a valid length");
    options.fault_every = Duration::from_secs(3);
    options.sample_every = Duration::from_secs(1);
    options.progress = false;
    let run = soak::run(&options).await.expect("the soak runs");
    eprintln!("{}", report::soak_tables(&run));

    // Every fault was visited, and every route got traffic in it.
    assert_eq!(run.faults.len(), soak::faults().len());
    for fault in &run.faults {
        assert!(
            fault.time > Duration::ZERO,
            "{} never ran",
            fault.fault.name
        );
        for route in &fault.routes {
            assert!(
                route.count > 0,
                "{}: no {:?}",
                fault.fault.name,
                route.route
            );
        }
    }
    let verdict = |name: &str| {
        run.verdict
            .iter()
            .find(|c| c.name.starts_with(name))
            .unwrap_or_else(|| panic!("no check `{name}`"))
    };
    for name in [
        "every deferred and background task accounted for",
        "deferred work started after its response",
        "no panics",
    ] {
        let check = verdict(name);
        assert!(check.passed, "{name}: {}", check.detail);
    }
    // The counts behind it, from the service's last words: work was scheduled, some of it
    // shed while the providers were sick, all of it accounted for.
    let end = run
        .farewell
        .expect("the service reported after its drain")
        .stats;
    assert!(end.created > 0 && end.deferred.scheduled == end.created * 4);
    assert!(end.deferred.failed + end.deferred.shed + end.deferred.refused > 0);
    assert_eq!(end.deferred.in_flight(), 0);
    assert_eq!(end.background.in_flight(), 0);
    assert!(run.exited_cleanly);

    // Measured every second, memory included.
    assert!(run.samples.len() >= 10, "{} samples", run.samples.len());
    assert!(
        run.samples
            .iter()
            .all(|s| s.process.rss_bytes > 0 && s.process.fds > 0)
    );
    assert!(run.samples.iter().any(|s| s.stats.alive_tasks > 0));

    let html = report::soak_html(&run);
    assert!(html.contains("resident memory (MB) over time"));
    assert!(html.contains("<polyline"));
    for fault in soak::faults() {
        assert!(
            html.contains(&format!("<h3>{}</h3>", fault.name)),
            "{}",
            fault.name
        );
    }
}
