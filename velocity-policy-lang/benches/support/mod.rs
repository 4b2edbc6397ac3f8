//! Generated policies for the benches: valid files of a given length, and files of errors.
//! Shared with `velocity-policy-cli/benches/check.rs` (included by path).

use std::fmt::Write as _;

/// A policy of `lines` lines (rounded up to a whole group): breakers, bulkheads, retries and
/// operations that use them, multi-line stanzas with comments, all valid.
pub(crate) fn valid(lines: usize) -> String {
    let mut out = String::from(
        "request { deadline = 10s }\nshedding { deferred at load 0.5; background at load 0.25 }\n",
    );
    let mut count = 2;
    let mut i = 0;
    while count < lines {
        let before = out.len();
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
        count += out[before..].matches('\n').count();
        i += 1;
    }
    out
}

/// A policy of at least `bytes` bytes where every line is a problem, four kinds in turn: an
/// unknown setting (one label), an unknown breaker with a close name (a "did you mean" among
/// all the breakers), a deadline longer than the request's (a warning with a second label on
/// line 1), and a breaker defined again (a second label on line 2, ever further away).
pub(crate) fn errors(bytes: usize) -> String {
    let mut out = String::from(
        "request { deadline = 10s }\nbreaker dup { open_after = 5 failures within 30s; cooldown = 20s }\n",
    );
    let mut i = 0;
    while out.len() < bytes {
        let _ = match i % 4 {
            0 => writeln!(out, "bulkhead b{i} {{ max_concurrent = 4; max_queud = 8 }}"),
            1 => writeln!(
                out,
                "breaker dep{i} {{ open_after = 5 failures within 30s; cooldown = 20s }}\n\
                 operation o{i}: critical {{ breaker = dep{i}x }}"
            ),
            2 => writeln!(out, "operation slow{i}: critical {{ deadline = 20s }}"),
            _ => writeln!(
                out,
                "breaker dup {{ open_after = 5 failures within 30s; cooldown = 20s }}"
            ),
        };
        i += 1;
    }
    out
}

/// One line of about `columns` bytes whose one problem (an unknown setting) is at its far end:
/// past column 65,535 for a large `columns`, where miette's padding overflowed Rust's format
/// width.
pub(crate) fn long_line(columns: usize) -> String {
    let padding = "a".repeat(columns.saturating_sub(60));
    format!("operation o: critical {{ fallback = \"{padding}\"; bogus = 1 }}\n")
}
