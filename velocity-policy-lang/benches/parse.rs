//! What `policy check` costs in process: parsing, lowering and validating generated policies
//! of 5,000 to 100,000 lines (linear in the file's size: the goal is 10,000 lines under 30 ms
//! and 100,000 under 300 ms), formatting one, and drawing the reports of files of errors (linear
//! in their number, whatever the file: the reports of 1 MB of errors, every one drawn, and one
//! report past column 1,000,000 of a line).
//!
//! Run with `cargo bench -p velocity-policy-lang --bench parse`; BENCHMARKS.md has the numbers.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use velocity_policy_lang::PolicySet;

mod support;

fn checked(text: &str) -> (PolicySet, velocity_policy_lang::Report) {
    let mut set = PolicySet::new();
    set.add_source("generated.policy", text.as_bytes());
    let report = set.check();
    (set, report)
}

fn parse_and_validate(c: &mut Criterion) {
    let mut group = c.benchmark_group("policy check");
    group.sample_size(10);
    for lines in [5_000, 10_000, 20_000, 100_000] {
        let text = support::valid(lines);
        let (set, report) = checked(&text);
        assert!(
            report.errors.is_empty() && report.warnings.is_empty(),
            "{:?}",
            report.errors.first()
        );
        eprintln!(
            "generated policy: {} lines, {} bytes, {} operations",
            text.lines().count(),
            text.len(),
            set.spec().operations.len()
        );
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("parse+lower+validate", format!("{lines} lines")),
            &text,
            |b, text| b.iter(|| black_box(checked(black_box(text)))),
        );
    }
    group.finish();

    let text = support::valid(10_000);
    let mut group = c.benchmark_group("policy fmt");
    group.sample_size(10);
    group.bench_function("fmt 10000 lines", |b| {
        b.iter(|| {
            let mut sources = velocity_policy_lang::Sources::new();
            let parsed = velocity_policy_lang::fmt::parse(
                &mut sources,
                "generated.policy",
                black_box(text.as_bytes()),
            );
            black_box(velocity_policy_lang::fmt::format(&parsed.file, &text))
        });
    });
    group.finish();
}

/// Every report of a file of errors drawn, as `PolicySet::render` draws them (the CLI draws the
/// first 50; this is the renderer's own cost, per diagnostic, with no cap).
fn render_errors(c: &mut Criterion) {
    let mut group = c.benchmark_group("policy reports");
    group.sample_size(10);
    for bytes in [25_000, 100_000, 1_000_000] {
        let text = support::errors(bytes);
        let (set, report) = checked(&text);
        let all = report.all();
        eprintln!(
            "errors file: {} bytes, {} errors, {} warnings",
            text.len(),
            report.errors.len(),
            report.warnings.len()
        );
        group.throughput(Throughput::Elements(all.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("draw every report", format!("{} diagnostics", all.len())),
            &all,
            |b, all| {
                b.iter(|| {
                    all.iter()
                        .map(|diagnostic| set.render(diagnostic).len())
                        .sum::<usize>()
                });
            },
        );
    }
    let text = support::long_line(1_000_000);
    let (set, report) = checked(&text);
    let far = report
        .errors
        .first()
        .map(|error| set.render(error))
        .unwrap_or_default();
    let column = text.find("bogus").unwrap_or_default() + 1;
    assert!(far.contains(&format!(":1:{column}")), "{far}");
    group.bench_function("draw a report past column 1000000", |b| {
        b.iter(|| {
            report
                .all()
                .iter()
                .map(|d| set.render(d).len())
                .sum::<usize>()
        });
    });
    group.finish();
}

criterion_group!(benches, parse_and_validate, render_errors);

/// `--profile LINES`: one check of a generated valid file of `LINES` lines inside
/// `profiled_check`, for callgrind (`valgrind --tool=callgrind --toggle-collect=*profiled_check*`),
/// whose instruction counts the machine's load does not move. Otherwise criterion's benches.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|arg| arg == "--profile") {
        let lines = args
            .get(at + 1)
            .and_then(|lines| lines.parse().ok())
            .unwrap_or(10_000);
        let text = support::valid(lines);
        let (_, report) = profiled_check(&text);
        assert!(report.errors.is_empty(), "{:?}", report.errors.first());
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

#[inline(never)]
fn profiled_check(text: &str) -> (PolicySet, velocity_policy_lang::Report) {
    black_box(checked(black_box(text)))
}
