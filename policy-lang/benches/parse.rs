//! Parses and validates a generated 10,000-line policy file.
//!
//! Run with `cargo bench -p policy-lang --bench parse`.

use std::fmt::Write as _;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use policy_lang::PolicySet;

/// A policy of `lines` lines (rounded up to a whole group): breakers, bulkheads, retries and
/// operations that use them, multi-line stanzas with comments, all valid.
fn generate(lines: usize) -> String {
    let mut out = String::from(
        "request { deadline = 10s }\nshedding { deferred at load 0.5; background at load 0.25 }\n",
    );
    let mut i = 0;
    while out.lines().count() < lines {
        let _ = write!(
            out,
            "\n// dependency {i}\n\
             breaker dep{i} {{ open_after = 5 failures within 30s; cooldown = 20s; shared(quorum = 2) }}\n\
             bulkhead dep{i} {{ max_concurrent = 4; max_queued = 8 }}\n\
             retry dep{i} {{\n    attempts = 3\n    backoff = full_jitter(base = 50ms, cap = 1s)\n    attempt_timeout = 1s\n    allowance = 20% + 10/s\n}}\n\
             ratelimit dep{i} {{ 100 per 1m; on_timeout = open; on_error = closed }}\n\
             operation call{i}: critical, idempotent {{\n    breaker = dep{i}\n    bulkhead = dep{i}\n    retry = dep{i}\n    ratelimit = dep{i}\n    deadline = 3s\n    min_budget = 200ms\n}}\n\
             operation later{i}: deferred, idempotent {{ retry = dep{i}; deadline = 5s }}\n"
        );
        i += 1;
    }
    out
}

fn parse_and_validate(c: &mut Criterion) {
    let text = generate(10_000);
    let lines = text.lines().count();
    let mut set = PolicySet::new();
    set.add_source("generated.policy", text.as_bytes());
    let report = set.check();
    assert!(
        report.errors.is_empty() && report.warnings.is_empty(),
        "{:?}",
        report.errors.first()
    );
    eprintln!(
        "generated policy: {lines} lines, {} bytes, {} operations",
        text.len(),
        set.spec().operations.len()
    );

    let mut group = c.benchmark_group("policy");
    group.sample_size(20);
    group.bench_function(format!("parse+lower+validate {lines} lines"), |b| {
        b.iter(|| {
            let mut set = PolicySet::new();
            set.add_source("generated.policy", black_box(text.as_bytes()));
            black_box(set.check())
        });
    });
    group.bench_function(format!("fmt {lines} lines"), |b| {
        b.iter(|| {
            let mut sources = policy_lang::Sources::new();
            let parsed = policy_lang::fmt::parse(
                &mut sources,
                "generated.policy",
                black_box(text.as_bytes()),
            );
            black_box(policy_lang::fmt::format(&parsed.file, &text))
        });
    });
    group.finish();
}

criterion_group!(benches, parse_and_validate);
criterion_main!(benches);
