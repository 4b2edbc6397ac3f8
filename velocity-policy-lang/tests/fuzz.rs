//! Random and mutated inputs through the whole pipeline: no panic, no hang, and `fmt` stays
//! idempotent and meaning-preserving on whatever parses.
//!
//! Runs for `POLICY_FUZZ_SECS` seconds (default 10; `.ci/run` sets 60). `POLICY_FUZZ_SEED`
//! replays a run; a failing input is written to `target/fuzz-failure.policy`.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failure should stop the test"
)]

use std::path::Path;
use std::time::{Duration, Instant};

use velocity_policy_lang::{PolicySet, Sources};

/// The most CPU time one input may take, in a debug build. Measured as the thread's own CPU
/// time, so other work on a loaded machine does not count against it (a hang still does: a loop
/// that never ends spends CPU time).
const PER_INPUT: Duration = Duration::from_secs(5);

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const TOKENS: &[&str] = &[
    "request",
    "breaker",
    "bulkhead",
    "retry",
    "shedding",
    "ratelimit",
    "operation",
    "budget",
    "ceilings",
    "allowance",
    "x",
    "payments",
    "{",
    "}",
    "(",
    ")",
    ":",
    ",",
    ";",
    "=",
    "+",
    "\n",
    " ",
    "\t",
    "//c",
    "\"s\"",
    "\"",
    "\\",
    "critical",
    "deferred",
    "background",
    "idempotent",
    "durable",
    "locality",
    "blocking",
    "async",
    "env",
    "deadline",
    "min_budget",
    "attempts",
    "backoff",
    "full_jitter",
    "base",
    "cap",
    "open_after",
    "failures",
    "within",
    "of",
    "at",
    "least",
    "calls",
    "cooldown",
    "shared",
    "quorum",
    "trips_only",
    "max_concurrent",
    "max_queued",
    "per",
    "on_timeout",
    "on_error",
    "open",
    "closed",
    "load",
    "0",
    "1",
    "-1",
    "3",
    "0.5",
    "1.5",
    "50%",
    "10/s",
    "30s",
    "0s",
    "-5s",
    "200ms",
    "1m",
    "2h",
    "10kb",
    "99999999999999999999999",
    "1e9",
    "é",
    "\u{0}",
    "\r\n",
    "\u{FEFF}",
    "🦀",
];

fn good_corpus() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files = Vec::new();
    for kind in ["good", "bad"] {
        for entry in std::fs::read_dir(dir.join(kind)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|ext| ext == "policy") {
                files.push(std::fs::read(path).unwrap());
            }
        }
    }
    files.sort();
    files
}

fn random_tokens(rng: &mut Rng) -> Vec<u8> {
    let n = rng.below(300);
    (0..n)
        .flat_map(|_| rng.pick(TOKENS).as_bytes().to_vec())
        .collect()
}

fn mutate(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut input = rng.pick(corpus).clone();
    for _ in 0..=rng.below(8) {
        let len = input.len();
        let at = rng.below(len + 1);
        match rng.below(9) {
            0 if len > 0 => input[at.min(len - 1)] ^= 1 << rng.below(8),
            1 => {
                let end = (at + rng.below(20)).min(len);
                input.drain(at..end);
            }
            2 => {
                let token = rng.pick(TOKENS).as_bytes().to_vec();
                input.splice(at..at, token);
            }
            3 => {
                let end = (at + rng.below(64)).min(len);
                let chunk = input[at..end].to_vec();
                let to = rng.below(input.len() + 1);
                input.splice(to..to, chunk);
            }
            4 => input.truncate(at),
            5 => {
                let other = rng.pick(corpus);
                let from = rng.below(other.len() + 1);
                input.splice(at..at, other[from..].iter().copied().take(200));
            }
            _ => {
                let byte = (rng.next() & 0xff) as u8;
                input.insert(at, byte);
            }
        }
    }
    input
}

fn pathological(rng: &mut Rng) -> Vec<u8> {
    let n = 1 + rng.below(100_000);
    match rng.below(9) {
        0 => "(".repeat(n).into_bytes(),
        1 => "{".repeat(n).into_bytes(),
        2 => format!("operation x: critical {{ a = f({}", "(".repeat(n)).into_bytes(),
        3 => format!("breaker {} {{", "a".repeat(n)).into_bytes(),
        4 => "\"".repeat(n).into_bytes(),
        5 => "x\n".repeat(n).into_bytes(),
        // An error up to 100,000 columns right, past what miette's padding could draw.
        6 => format!(
            "operation x: critical {{ fallback = \"{}\"; @ }}",
            "a".repeat(n)
        )
        .into_bytes(),
        // Errors far right on one line, each with a label far back on it.
        7 => format!(
            "operation x: critical {{ deadline = 1s; fallback = \"{}\"; {}}}",
            "a".repeat(n),
            "deadline = 1s; ".repeat(1 + n % 200)
        )
        .into_bytes(),
        _ => format!("retry r {{ attempts = {} }}", "9".repeat(n)).into_bytes(),
    }
}

fn codes(text: &[u8]) -> Vec<String> {
    let mut set = PolicySet::new();
    set.add_source("x.policy", text);
    set.check().all().iter().map(|d| d.code()).collect()
}

/// The whole pipeline on one input.
fn exercise(input: &[u8]) {
    let mut set = PolicySet::new();
    set.add_source("fuzz.policy", input);
    let report = set.check();
    for diagnostic in report.all() {
        let _ = set.render(diagnostic);
        let _ = set.sources().position(diagnostic.primary_loc().unwrap());
    }
    let _ = velocity_policy_lang::explain::explain_all(set.spec())
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>();

    let mut sources = Sources::new();
    let parsed = velocity_policy_lang::fmt::parse(&mut sources, "fuzz.policy", input);
    if parsed.diagnostics.is_empty() {
        let text = std::str::from_utf8(input).unwrap();
        let formatted = velocity_policy_lang::fmt::format(&parsed.file, text);
        let reparsed = velocity_policy_lang::fmt::parse(
            &mut sources,
            "formatted.policy",
            formatted.as_bytes(),
        );
        assert!(
            reparsed.diagnostics.is_empty(),
            "formatted output does not parse:\n{formatted}"
        );
        assert_eq!(
            velocity_policy_lang::fmt::format(&reparsed.file, &formatted),
            formatted,
            "fmt is not idempotent"
        );
        assert_eq!(
            codes(input),
            codes(formatted.as_bytes()),
            "fmt changed the diagnostics:\n{formatted}"
        );
    }
}

#[test]
fn random_and_mutated_inputs_never_panic_or_hang() {
    let seconds: u64 = std::env::var("POLICY_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let seed: u64 = std::env::var("POLICY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let corpus = good_corpus();
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut cases = 0u64;
    let mut slowest = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(seconds) {
        let input = match rng.below(20) {
            0..=1 => (0..rng.below(2000))
                .map(|_| (rng.next() & 0xff) as u8)
                .collect(),
            2..=6 => random_tokens(&mut rng),
            7 => pathological(&mut rng),
            _ => mutate(&mut rng, &corpus),
        };
        let began = cpu_time::ThreadTime::now();
        let outcome = std::panic::catch_unwind(|| exercise(&input));
        let took = began.elapsed();
        slowest = slowest.max(took);
        if outcome.is_err() || took > PER_INPUT {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-failure.policy");
            let _ = std::fs::write(&path, &input);
            panic!(
                "case {cases} (seed {seed}) {} after {took:?}; input written to {}",
                if outcome.is_err() {
                    "panicked"
                } else {
                    "was too slow"
                },
                path.display()
            );
        }
        cases += 1;
    }
    eprintln!(
        "fuzz: {cases} cases in {:?} (seed {seed}), slowest {slowest:?}",
        started.elapsed()
    );
    assert!(cases > 0);
}
