//! The library soak: a few million calls through each mechanism, and the process's memory
//! measured as they go, to show that nothing the runtime keeps grows with the number of calls.
//!
//! ```text
//! cargo run --release --example soak --features stale               # 2,000,000 calls per mechanism
//! cargo run --release --example soak --features stale -- --calls N
//! ```
//!
//! Every mechanism is reached the way users reach it, through the attributes (their policies
//! are `examples/soak/policies/soak.policy`), on tokio's paused clock so that backoffs and
//! cooldowns cost no wall time:
//!
//! | phase | what each call does |
//! |---|---|
//! | refusals | an open breaker (`tripped`) or a full bulkhead (`full`) refuses it |
//! | fallbacks | refused by the open breaker, answered by its fallback |
//! | stale-if-error | a new argument set each time (a million in all): stored while the function succeeds, served stale while it fails, and long-evicted sets missed |
//! | retries | fails once, retried once after a backoff, succeeds |
//! | shed decisions | deferred work shed for the load of the compartment it uses (`busy`), and background work shed by a full pool |
//! | openings and closings | fails and opens the breaker (`flappy`); a millisecond later a success closes it |
//! | deferred work | scheduled, run on the platform, finished |
//!
//! Each phase runs in ten rounds; the resident memory (Linux's `VmRSS`) is read after each. The
//! first five rounds are the phase's warm-up, where bounded structures fill (the stale cache
//! holds its 10,000 argument sets within the first round) and the allocator settles. The
//! verdict: after the warm-up, a phase's memory never exceeds the most it held during the
//! warm-up by more than 10%; the table also gives the bytes gained per call after it (a leak
//! of a few bytes per call shows there first). The counts printed come from the registry's
//! snapshot, not from the loop. It exits non-zero when a phase grows.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an example that measures: a failed setup is a failed run"
)]

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use velocity_policy::background::BackgroundPool;
use velocity_policy::{CallError, DeadlineExceeded, Registry, ResilienceError};

const ROUNDS: u64 = 10;

/// The soak's own error: transient, so the retry phase retries it.
#[derive(Debug)]
enum SoakError {
    Down,
    Refused(ResilienceError),
    TimedOut,
}

impl fmt::Display for SoakError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Down => f.write_str("the dependency is down"),
            Self::Refused(refusal) => write!(f, "{refusal}"),
            Self::TimedOut => f.write_str("timed out"),
        }
    }
}

impl From<ResilienceError> for SoakError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for SoakError {
    fn from(_: DeadlineExceeded) -> Self {
        Self::TimedOut
    }
}

impl velocity_policy::Transient for SoakError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::Down | Self::TimedOut)
    }
}

// ---- the functions the phases call --------------------------------------------------------

#[velocity_policy::resilient(breaker = "tripped", deadline = "1s")]
async fn behind_tripped(n: u64) -> Result<u64, SoakError> {
    Ok(n)
}

#[velocity_policy::resilient(bulkhead = "full", deadline = "1s")]
async fn behind_full(n: u64) -> Result<u64, SoakError> {
    Ok(n)
}

fn default_price(n: &u64, _why: CallError<SoakError>) -> Result<u64, SoakError> {
    Ok(*n % 7)
}

#[velocity_policy::critical(breaker = "tripped", deadline = "1s", fallback = "default_price")]
async fn price(n: u64) -> Result<u64, SoakError> {
    Ok(n)
}

static PROFILES_DOWN: AtomicBool = AtomicBool::new(false);

#[velocity_policy::critical(deadline = "1s", stale_if_error = "10m")]
async fn profile(user: u64) -> Result<String, SoakError> {
    if PROFILES_DOWN.load(Ordering::Relaxed) {
        Err(SoakError::Down)
    } else {
        Ok(format!("the profile of user {user}"))
    }
}

static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

#[velocity_policy::resilient(retry = "quick", deadline = "1s")]
#[velocity_policy::idempotent]
async fn flaky(n: u64) -> Result<u64, SoakError> {
    // The first attempt of each call fails, the second succeeds.
    if ATTEMPTS.fetch_add(1, Ordering::Relaxed).is_multiple_of(2) {
        Err(SoakError::Down)
    } else {
        Ok(n)
    }
}

static OPTIONAL_RAN: AtomicU64 = AtomicU64::new(0);

#[velocity_policy::deferred]
#[velocity_policy::idempotent]
async fn optional_work(n: u64) {
    let _ = n;
    OPTIONAL_RAN.fetch_add(1, Ordering::Relaxed);
}

#[velocity_policy::resilient(breaker = "flappy", deadline = "1s")]
async fn flap(fail: bool) -> Result<(), SoakError> {
    if fail { Err(SoakError::Down) } else { Ok(()) }
}

static COUNTED: AtomicU64 = AtomicU64::new(0);

#[velocity_policy::deferred]
#[velocity_policy::idempotent]
async fn count_view(n: u64) {
    COUNTED.fetch_add(n % 2 + 1, Ordering::Relaxed);
}

// ---- measuring ------------------------------------------------------------------------------

/// Resident memory in bytes (Linux's `VmRSS`); `None` where there is no `/proc`.
fn rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Deferred tasks the soak scheduled (each call of a `#[deferred]` function schedules one).
static SCHEDULED: AtomicU64 = AtomicU64::new(0);

/// Schedules one deferred task through `call`, counting it.
fn schedule(call: impl FnOnce()) {
    call();
    SCHEDULED.fetch_add(1, Ordering::Relaxed);
}

/// Waits until every deferred task scheduled so far has ended, by the runtime's own count.
async fn settle() {
    let want = SCHEDULED.load(Ordering::Relaxed);
    for _ in 0..10_000_000u64 {
        let d = velocity_policy::defer::snapshot();
        if d.finished + d.abandoned >= want {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!(
        "deferred work did not settle: {:?}, {want} scheduled",
        velocity_policy::defer::snapshot()
    );
}

struct Phase {
    name: &'static str,
    calls: u64,
    rss: Vec<u64>,
    took: Duration,
    counted: String,
}

/// The rounds that warm a phase up: its first half, where bounded structures fill.
const WARM_UP_ROUNDS: usize = (ROUNDS / 2) as usize;

impl Phase {
    /// The most memory held during the warm-up, and after it.
    fn levels(&self) -> Option<(u64, u64)> {
        let (warm, after) = self.rss.split_at(WARM_UP_ROUNDS.min(self.rss.len()));
        Some((*warm.iter().max()?, *after.iter().max()?))
    }

    /// How much the most held after the warm-up exceeds the most held during it.
    fn growth(&self) -> Option<f64> {
        let (warm, after) = self.levels()?;
        Some(after as f64 / warm.max(1) as f64 - 1.0)
    }

    /// Memory gained per call after the warm-up: the last reading against the warm-up's
    /// last, over the calls between them.
    fn bytes_per_call(&self) -> Option<f64> {
        let end_of_warm_up = *self.rss.get(WARM_UP_ROUNDS.checked_sub(1)?)?;
        let last = *self.rss.last()?;
        let calls = self.calls as f64 * (1.0 - WARM_UP_ROUNDS as f64 / self.rss.len() as f64);
        Some((last as f64 - end_of_warm_up as f64) / calls.max(1.0))
    }

    fn passed(&self) -> bool {
        self.growth().is_some_and(|g| g <= 0.10)
    }
}

/// Runs `calls` calls of `round` (given the call's index), in [`ROUNDS`] rounds, measuring
/// after each.
async fn phase<F, Fut>(name: &'static str, calls: u64, mut one: F) -> Phase
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let started = Instant::now();
    let per_round = (calls / ROUNDS).max(1);
    let mut rss_after = Vec::new();
    let mut n = 0;
    for _ in 0..ROUNDS {
        for _ in 0..per_round {
            one(n).await;
            n += 1;
            if n % 256 == 0 {
                // Let the platform run the deferred work scheduled meanwhile: what is in
                // flight stays the driver's choice, not the scheduler's.
                settle().await;
            }
        }
        settle().await;
        rss_after.push(rss().unwrap_or(0));
    }
    Phase {
        name,
        calls: n,
        rss: rss_after,
        took: started.elapsed(),
        counted: String::new(),
    }
}

fn calls_from_args() -> u64 {
    let mut args = std::env::args().skip(1);
    let mut calls = 2_000_000;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--calls" => {
                calls = args
                    .next()
                    .and_then(|v| v.replace('_', "").parse().ok())
                    .unwrap_or_else(|| {
                        eprintln!("soak: --calls takes a number, such as 2000000");
                        std::process::exit(2)
                    });
            }
            other => {
                eprintln!("soak: unknown argument `{other}` (only --calls N)");
                std::process::exit(2)
            }
        }
    }
    calls.max(ROUNDS)
}

fn main() -> std::process::ExitCode {
    let calls = calls_from_args();
    if rss().is_none() {
        eprintln!("soak: this measures the process through /proc/self/status, which needs Linux");
        return std::process::ExitCode::FAILURE;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a paused current-thread runtime");
    let passed = runtime.block_on(soak(calls));
    if passed {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

async fn soak(calls: u64) -> bool {
    println!(
        "library soak: {calls} calls through each mechanism, in {ROUNDS} rounds; resident memory at the start: {:.1} MB{}",
        mb(rss().unwrap_or(0)),
        if cfg!(debug_assertions) {
            " (a debug build: use --release for the figures in BENCHMARKS.md)"
        } else {
            ""
        }
    );
    let registry = Registry::global();
    let mut phases = Vec::new();

    // Refusals: build both mechanisms with one call each, then open the breaker for a day and
    // hold the bulkhead's only slot.
    behind_tripped(0)
        .await
        .expect("the breaker is closed at first");
    behind_full(0).await.expect("the bulkhead is free at first");
    let tripped = registry.find_breaker("tripped").expect("built by the call");
    tripped.trip(Duration::from_secs(86_400), "the soak holds it open");
    let full = registry.find_bulkhead("full").expect("built by the call");
    let slot = full.try_acquire().expect("its only slot");
    let mut refused = phase("refusals", calls, |n| async move {
        let outcome = if n % 2 == 0 {
            behind_tripped(n).await
        } else {
            behind_full(n).await
        };
        assert!(matches!(outcome, Err(SoakError::Refused(_))), "{outcome:?}");
    })
    .await;
    let snapshot = registry.snapshot();
    let refusals = |name: &str| -> u64 {
        snapshot
            .breakers
            .iter()
            .filter(|b| &*b.name == name)
            .map(|b| b.refusals)
            .chain(
                snapshot
                    .bulkheads
                    .iter()
                    .filter(|b| &*b.name == name)
                    .map(|b| b.refused_full + b.refused_queue_timeout),
            )
            .sum()
    };
    refused.counted = format!(
        "breaker `tripped` refused {}, bulkhead `full` refused {}",
        refusals("tripped"),
        refusals("full")
    );
    phases.push(refused);

    // Fallbacks: the same open breaker, answered by the fallback.
    let mut fallbacks = phase("fallbacks", calls, |n| async move {
        assert_eq!(price(n).await.expect("the fallback answers"), n % 7);
    })
    .await;
    let snapshot = registry.snapshot();
    let answered: u64 = snapshot
        .fallbacks
        .iter()
        .filter(|f| f.operation.ends_with("price"))
        .map(|f| f.refused + f.expired + f.failed)
        .sum();
    fallbacks.counted = format!("the fallback answered {answered} refused calls");
    phases.push(fallbacks);
    drop(slot);

    // Stale-if-error: a new argument set every second call; the call after it fails and is
    // served stale; every 64th call asks for a set evicted long ago, which misses.
    let stale_missed = Arc::new(AtomicU64::new(0));
    let missed = stale_missed.clone();
    let mut stale = phase("stale-if-error", calls, move |n| {
        let missed = missed.clone();
        async move {
            let user = n / 2;
            if n % 2 == 0 {
                PROFILES_DOWN.store(false, Ordering::Relaxed);
                profile(user).await.expect("the profile store is up");
            } else {
                PROFILES_DOWN.store(true, Ordering::Relaxed);
                let user = if n % 64 == 1 && user > 20_000 {
                    user - 20_000
                } else {
                    user
                };
                if profile(user).await.is_err() {
                    missed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    })
    .await;
    PROFILES_DOWN.store(false, Ordering::Relaxed);
    let snapshot = registry.snapshot();
    let served: u64 = snapshot
        .fallbacks
        .iter()
        .filter(|f| f.operation.ends_with("profile"))
        .map(|f| f.stale)
        .sum();
    stale.counted = format!(
        "{} argument sets, {served} stale answers, {} misses (sets evicted from its 10,000)",
        calls / 2,
        stale_missed.load(Ordering::Relaxed)
    );
    phases.push(stale);

    // Retries: every call fails once and is retried once.
    let failed = Arc::new(AtomicU64::new(0));
    let gave_up = failed.clone();
    let mut retries = phase("retries", calls, move |n| {
        let gave_up = gave_up.clone();
        async move {
            ATTEMPTS.store(0, Ordering::Relaxed);
            if flaky(n).await.is_err() {
                gave_up.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await;
    let snapshot = registry.snapshot();
    let (retried, stopped) = snapshot
        .retries
        .iter()
        .filter(|r| &*r.name == "quick")
        .fold((0, 0), |(r, s), q| {
            (r + q.retries, s + q.stopped_by_allowance)
        });
    retries.counted = format!(
        "{retried} retries; {stopped} stopped by the retry allowance, so {} calls gave up",
        failed.load(Ordering::Relaxed)
    );
    phases.push(retries);

    // Shed decisions: deferred work using `busy` while it is at half its load, and background
    // work submitted to a pool that is full.
    schedule(|| optional_work(0));
    settle().await;
    let busy = registry
        .find_bulkhead("busy")
        .expect("built by the first call");
    let held = busy.try_acquire().expect("one of its two slots");
    let pool = BackgroundPool::builder("soak")
        .max_concurrent(1)
        .max_queued(1)
        .build();
    let release = Arc::new(tokio::sync::Notify::new());
    for _ in 0..2 {
        let release = release.clone();
        pool.submit("hold_the_pool", async move { release.notified().await })
            .expect("the pool has room for two");
    }
    let mut shed = phase("shed decisions", calls, |n| {
        let pool = pool.clone();
        async move {
            if n % 2 == 0 {
                schedule(|| optional_work(n));
            } else {
                assert!(pool.submit("embed", async {}).is_err(), "the pool is full");
            }
        }
    })
    .await;
    release.notify_waiters();
    drop(held);
    settle().await;
    let snapshot = registry.snapshot();
    let deferred_shed: u64 = snapshot.shedders.iter().map(|s| s.shed_load.deferred).sum();
    let pool_shed: u64 = snapshot
        .background
        .iter()
        .filter(|b| &*b.name == "soak")
        .map(|b| b.shed_load + b.shed_pressure)
        .sum();
    shed.counted = format!(
        "{deferred_shed} deferred tasks shed for load, {pool_shed} background submissions shed; {} ran",
        OPTIONAL_RAN.load(Ordering::Relaxed)
    );
    phases.push(shed);

    // Openings and closings: a failure opens `flappy`, its cooldown passes, a success closes it.
    let mut flapping = phase("openings and closings", calls, |n| async move {
        if n % 2 == 0 {
            let _ = flap(true).await;
        } else {
            tokio::time::sleep(Duration::from_millis(2)).await;
            flap(false).await.expect("the cooldown has passed");
        }
    })
    .await;
    let snapshot = registry.snapshot();
    let openings: u64 = snapshot
        .breakers
        .iter()
        .filter(|b| &*b.name == "flappy")
        .map(|b| b.openings)
        .sum();
    flapping.counted = format!("breaker `flappy` opened {openings} times");
    phases.push(flapping);

    // Deferred work: scheduled, run and finished.
    let before = velocity_policy::defer::snapshot().finished;
    let mut deferred = phase("deferred work", calls, |n| async move {
        schedule(|| count_view(n));
    })
    .await;
    let after = velocity_policy::defer::snapshot();
    deferred.counted = format!(
        "{} deferred tasks finished, {} abandoned",
        after.finished - before,
        after.abandoned
    );
    phases.push(deferred);
    println!(
        "\n  {:<22} {:>10} {:>8}  {:>9} {:>9} {:>9} {:>8} {:>9}   counted by the registry",
        "phase", "calls", "seconds", "warm-up", "after", "last", "growth", "B/call"
    );
    for p in &phases {
        let (warm, after) = p.levels().unwrap_or((0, 0));
        let last = p.rss.last().copied().unwrap_or(0);
        println!(
            "  {:<22} {:>10} {:>8.1}  {:>6.1} MB {:>6.1} MB {:>6.1} MB {:>+7.1}% {:>+9.3}   {}",
            p.name,
            p.calls,
            p.took.as_secs_f64(),
            mb(warm),
            mb(after),
            mb(last),
            p.growth().unwrap_or(f64::NAN) * 100.0,
            p.bytes_per_call().unwrap_or(f64::NAN),
            p.counted
        );
    }
    // Every deferred task of the run, by the runtime's count.
    let scheduled = SCHEDULED.load(Ordering::Relaxed);
    let accounted =
        after.finished + after.abandoned == scheduled && after.queued == 0 && after.running == 0;
    println!(
        "\ndeferred tasks: {scheduled} scheduled by the soak = {} finished ({} of them refused) + {} abandoned: {}",
        after.finished,
        after.refused,
        after.abandoned,
        if accounted {
            "all accounted for"
        } else {
            "NOT accounted for"
        }
    );

    let total: u64 = phases.iter().map(|p| p.calls).sum();
    let passed = phases.iter().all(Phase::passed) && accounted;
    println!(
        "\nverdict: {} ({total} calls; resident memory at the end {:.1} MB){}",
        if passed { "PASS" } else { "FAIL" },
        mb(rss().unwrap_or(0)),
        if passed {
            String::new()
        } else {
            let grew: Vec<&str> = phases
                .iter()
                .filter(|p| !p.passed())
                .map(|p| p.name)
                .collect();
            format!(
                ": memory grew more than 10% after the warm-up in {}",
                grew.join(", ")
            )
        }
    );
    passed
}
