//! The `policy` binary on hostile files: an error past column 65,535, thousands of errors, a
//! named pipe or a device as the argument. Each must end promptly with a clear report and the
//! documented exit code (1 problems, 2 unreadable), never a panic (101) or a hang.
#![cfg(unix)]
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failure should stop the test"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `policy` and waits at most a minute: a hang fails the test rather than the run.
fn policy(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_policy"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drain the pipes on threads so a large report cannot fill them and stall the child.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut bytes).unwrap();
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut bytes).unwrap();
        bytes
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let hung = started.elapsed() > Duration::from_secs(60);
        if hung {
            child.kill().unwrap();
        }
        assert!(
            !hung,
            "`policy {}` did not finish within a minute",
            args.join(" ")
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn path(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("policy-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// A one-line policy whose only problem (`what`, after a long string) is at column
/// `column` or further.
fn far_right(dir: &Path, column: usize, what: &str) -> (PathBuf, usize) {
    let head = "operation o: critical { fallback = \"";
    let padding = "a".repeat(column.saturating_sub(head.len() + 3));
    let text = format!("{head}{padding}\"; {what} }}\n");
    let at = text.find(what).unwrap() + 1;
    let file = dir.join("wide.policy");
    std::fs::write(&file, text).unwrap();
    (file, at)
}

#[test]
fn an_error_past_column_65535_is_reported_not_a_panic() {
    let dir = temp_dir("wide");
    // A syntax error: `check`, `explain` and `fmt` each draw it.
    let (file, column) = far_right(&dir, 65_536, "@");
    assert!(column >= 65_536);
    let position = format!("wide.policy:1:{column}");
    for args in [
        vec!["check", path(&file)],
        vec!["explain", path(&file)],
        vec!["fmt", path(&file)],
        vec!["fmt", "--check", path(&file)],
    ] {
        let output = policy(&args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("policy::syntax"), "{args:?}: {err}");
        assert!(err.contains(&position), "{args:?}: {err}");
        // The snippet is cut around the error, not 65,536 columns wide.
        assert!(err.contains("1 | …aaaa"), "{args:?}: {err}");
        assert!(err.contains("aaaa\"; @ }"), "{args:?}: {err}");
        assert!(err.lines().all(|line| line.len() < 1_000), "{args:?}");
    }

    // An error found after parsing (an unknown setting), a million columns in.
    let (file, column) = far_right(&dir, 1_000_000, "bogus = 1");
    let output = policy(&["check", path(&file)]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("policy::unknown-setting"), "{err}");
    assert!(err.contains(&format!("wide.policy:1:{column}")), "{err}");
    let json = policy(&["check", "--format", "json", path(&file)]);
    assert_eq!(json.status.code(), Some(1));
    assert!(stdout(&json).contains(&format!("\"column\": {column}")));
}

#[test]
fn thousands_of_errors_draw_the_first_50_and_count_the_rest() {
    let dir = temp_dir("many");
    let file = dir.join("many.policy");
    let mut text = String::from("request { deadline = 10s }\n");
    for i in 0..2_000 {
        text.push_str(&format!(
            "bulkhead b{i} {{ max_concurrent = 4; max_queud = 8 }}\n"
        ));
    }
    text.push_str("operation slow: critical { deadline = 20s }\n");
    std::fs::write(&file, &text).unwrap();

    let output = policy(&["check", path(&file)]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(err.matches("policy::unknown-setting").count(), 50, "{err}");
    assert!(err.contains("many.policy:51:36"), "the 50th is drawn");
    assert!(!err.contains("many.policy:52:36"), "the 51st is not");
    assert!(
        err.contains(
            "... and 1951 more not shown (1950 errors, 1 warning): \
             `policy check --format json` lists every one"
        ),
        "{err}"
    );
    assert!(err.contains("policy check: 2000 errors, 1 warning in 1 file (1 operation)"));

    // JSON lists every one.
    let json = policy(&["check", "--format", "json", path(&file)]);
    assert_eq!(json.status.code(), Some(1));
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(document["errors"], 2000);
    assert_eq!(document["diagnostics"].as_array().unwrap().len(), 2001);
    assert_eq!(
        document["diagnostics"][2000]["code"],
        "policy::deadline-clamped"
    );

    // The commands that need a valid policy stop the same way.
    let explain = policy(&["explain", path(&file)]);
    assert_eq!(explain.status.code(), Some(1));
    assert_eq!(
        stderr(&explain).matches("policy::unknown-setting").count(),
        50
    );
    assert!(stderr(&explain).contains("... and 1951 more not shown"));
}

#[test]
fn a_named_pipe_is_refused_without_blocking() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("service.policy");
    mkfifo(&fifo);
    for command in ["check", "explain", "fmt"] {
        let output = policy(&[command, path(&fifo)]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{command}: {err}");
        assert!(
            err.contains(&format!(
                "error: cannot read `{}`: not a regular file but a named pipe (FIFO)",
                fifo.display()
            )),
            "{command}: {err}"
        );
        assert!(err.contains("help: name a `.policy` file, or a directory of them"));
    }
    // In a directory, only the regular `*.policy` files are read.
    std::fs::write(dir.join("a.policy"), "request { deadline = 1s }\n").unwrap();
    let output = policy(&["check", path(&dir)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("in 1 file"));
}

#[test]
fn a_device_is_refused_rather_than_read_until_memory_runs_out() {
    for command in ["check", "explain", "fmt", "gate", "locality"] {
        let output = policy(&[command, "/dev/zero"]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{command}: {err}");
        assert!(
            err.contains("cannot read `/dev/zero`: not a regular file but a character device"),
            "{command}: {err}"
        );
    }
}

#[test]
fn a_file_over_the_limit_is_one_diagnostic_read_no_further() {
    let dir = temp_dir("huge");
    let file = dir.join("huge.policy");
    // Sparse: 16 GiB that would take minutes to read, and the memory to hold.
    std::fs::File::create(&file)
        .unwrap()
        .set_len(16 << 30)
        .unwrap();
    for command in ["check", "fmt"] {
        let output = policy(&[command, path(&file)]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{command}: {err}");
        assert!(err.contains("policy::too-large"), "{command}: {err}");
        assert!(
            err.contains(&format!("file is {} bytes", 16u64 << 30)),
            "{command}: {err}"
        );
    }
    std::fs::remove_file(&file).unwrap();
}
