//! A tiny scenario end to end through the binary: the dependency, two contenders' services and
//! the load generator as separate processes on loopback, the fault switched on and off, and
//! the table, the JSON and the HTML page written from the records.

use std::process::Command;

#[test]
fn a_tiny_outage_runs_end_to_end_and_is_measured_from_its_records() {
    let out = std::env::temp_dir().join(format!("proving-ground-e2e-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_proving-ground"))
        .args([
            "--scenario",
            "outage",
            "--contender",
            "none",
            "--contender",
            "naive",
        ])
        .args(["--phases", "0.3,1,1,1", "--out"])
        .arg(&out)
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("== outage"), "{stdout}");
    assert!(stdout.contains("amp fault"), "{stdout}");

    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("proving-ground.json")).expect("the JSON"))
            .expect("it parses");
    let runs = json["scenarios"][0]["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    let fault_amplification = |i: usize| {
        runs[i]["measurement"]["fault"]["amplification"]
            .as_f64()
            .expect("an amplification")
    };
    // In the outage every dependency answer is a 503: no policy calls once per request, the
    // hand-written loop three times.
    let none = fault_amplification(0);
    let naive = fault_amplification(1);
    assert!((0.9..=1.1).contains(&none), "none: {none}");
    assert!((2.5..=3.1).contains(&naive), "naive: {naive}");
    for run in runs {
        let m = &run["measurement"];
        // What ended the failed requests is recorded: the dependency's 503, named by the service.
        let failures = m["fault"]["failures"].as_object().expect("failures");
        let refused_by_503 = failures.get("dependency_503").and_then(|n| n.as_u64());
        assert!(refused_by_503.unwrap_or(0) > 100, "{failures:?}");
        assert!(
            m["baseline"]["goodput_rps"].as_f64().expect("goodput") > 300.0,
            "{m}"
        );
        assert!(
            m["fault"]["goodput_rps"].as_f64().expect("goodput") < 100.0,
            "{m}"
        );
        assert!(!m["series"].as_array().expect("a series").is_empty());
    }
    let html = std::fs::read_to_string(out.join("proving-ground.html")).expect("the page");
    assert!(html.contains("<svg") && html.contains("naive") && !html.contains("<script"));
    let _ = std::fs::remove_dir_all(&out);
}
