//! `policy check` end to end, in process (no process start): a 1 MB file of errors, drawn as
//! people see it (the first 50 reports and a count) and as JSON (every diagnostic), against
//! the goal of under 2 s; and a valid 10,000-line policy for comparison.
//!
//! Run with `cargo bench -p velocity-policy-cli --bench check`; BENCHMARKS.md has the numbers.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use clap::Parser as _;
use criterion::{Criterion, criterion_group, criterion_main};

#[path = "../../velocity-policy-lang/benches/support/mod.rs"]
#[expect(
    dead_code,
    reason = "the long-line file is only drawn by the parse bench"
)]
mod support;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    if std::fs::write(&path, text).is_err() {
        eprintln!("cannot write {}", path.display());
    }
    path
}

fn run(args: &[&str]) -> (velocity_policy_cli::Exit, usize, usize) {
    let cli =
        velocity_policy_cli::Cli::parse_from(std::iter::once("policy").chain(args.iter().copied()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let exit = velocity_policy_cli::run(cli, &mut out, &mut err);
    (exit, out.len(), err.len())
}

fn check(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("policy-bench-check-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let errors = write(&dir, "errors.policy", &support::errors(1_000_000));
    let valid = write(&dir, "valid.policy", &support::valid(10_000));
    let errors = errors.to_string_lossy().into_owned();
    let valid = valid.to_string_lossy().into_owned();

    let (exit, out, err) = run(&["check", &errors]);
    assert_eq!(exit, velocity_policy_cli::Exit::Problems);
    eprintln!("1 MB of errors: {err} bytes of reports, {out} on standard output");
    let (_, json, _) = run(&["check", "--format", "json", &errors]);
    eprintln!("1 MB of errors: {json} bytes of JSON");

    let mut group = c.benchmark_group("policy check (CLI)");
    group.sample_size(10);
    group.bench_function("1 MB of errors, reports", |b| {
        b.iter(|| black_box(run(&["check", &errors])));
    });
    group.bench_function("1 MB of errors, --format json", |b| {
        b.iter(|| black_box(run(&["check", "--format", "json", &errors])));
    });
    group.bench_function("valid 10000 lines", |b| {
        b.iter(|| black_box(run(&["check", &valid])));
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, check);
criterion_main!(benches);
