//! Scenario measurements for BENCHMARKS.md, each next to the naive version users write without
//! this project:
//!
//! 1. retry amplification during a full outage: calls reaching the dependency per request,
//!    three clients retrying three times with a fixed backoff, against bounded retry behind a
//!    breaker (tokio's paused clock: no real I/O, so the counts are exact and instant);
//! 2. the latency bound while a dependency is slow: p50, p99 and max of the protected call
//!    against its deadline (real time, about three seconds);
//! 3. isolation: the p99 of an unrelated route while one dependency is 100 times slower, with
//!    and without a bulkhead (paused clock);
//! 4. hedging a heavy tail: p99 of a dependency whose p99 is 20 times its p50, without and with
//!    a hedge after the operation's own p95 (the runtime's `Hedge`), and the extra calls it
//!    cost (paused clock).
//! 5. the adaptive bulkhead: a dependency's capacity drops from 32 to 8 concurrent calls
//!    mid-run; how fast the adaptive limit follows, and the p99 of an unrelated route, against
//!    a fixed limit of 32 (paused clock).
//!
//! ```text
//! cargo run --release --example scenarios
//! ```
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an example that measures: a failed setup is a failed run"
)]

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;
use velocity_policy::retry::Transient;
use velocity_policy::{
    Breaker, Bulkhead, CallError, Deadline, Idempotent, RetryAllowance, RetryPolicy, retry_within,
};

const MS: Duration = Duration::from_millis(1);

/// The dependency's error: transient, as an outage or a timeout is.
#[derive(Debug)]
struct Unavailable;

impl Transient for Unavailable {
    fn is_transient(&self) -> bool {
        true
    }
}

/// A small deterministic generator (xorshift64*), so every run draws the same latencies.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[lo, hi)`.
    fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = (hi - lo).as_nanos() as u64;
        lo + Duration::from_nanos(self.next() % span.max(1))
    }
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a paused current-thread runtime")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

// ---------------------------------------------------------------------------------------------
// 1. Retry amplification during a full outage
// ---------------------------------------------------------------------------------------------

const CLIENTS: usize = 3;
const OUTAGE: Duration = Duration::from_secs(30);
const REQUEST_EVERY: Duration = Duration::from_millis(100);
const FAIL_AFTER: Duration = Duration::from_millis(5);

/// The dependency during a full outage: every call fails after 5 ms. Counts the calls that
/// reach it, per 10 ms bucket, to see synchronised bursts.
#[derive(Default)]
struct Outage {
    calls: Cell<u64>,
    per_10ms: std::cell::RefCell<BTreeMap<u128, u64>>,
    start: Cell<Option<Instant>>,
}

impl Outage {
    async fn call(&self) -> Result<(), Unavailable> {
        self.calls.set(self.calls.get() + 1);
        let start = match self.start.get() {
            Some(start) => start,
            None => {
                let now = Instant::now();
                self.start.set(Some(now));
                now
            }
        };
        let bucket = start.elapsed().as_millis() / 10;
        *self.per_10ms.borrow_mut().entry(bucket).or_default() += 1;
        tokio::time::sleep(FAIL_AFTER).await;
        Err(Unavailable)
    }

    fn peak_per_10ms(&self) -> u64 {
        self.per_10ms.borrow().values().copied().max().unwrap_or(0)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Client {
    /// Three attempts, a fixed 100 ms pause between them, no deadline, no breaker.
    NaiveFixedBackoff,
    /// `retry_within`: three attempts, full jitter, the retry allowance, inside a 2 s deadline.
    BoundedRetry,
    /// The same behind a breaker (5 failures in 30 s open it for 20 s).
    BoundedRetryBehindBreaker,
}

async fn naive_request(dep: &Outage) {
    for attempt in 1..=3 {
        if dep.call().await.is_ok() {
            return;
        }
        if attempt < 3 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

struct Instance {
    breaker: Option<Breaker>,
    retry: RetryPolicy,
}

impl Instance {
    fn new(behind_breaker: bool) -> Self {
        Self {
            breaker: behind_breaker.then(|| {
                Breaker::builder("dependency")
                    .open_after_failures(5, Duration::from_secs(30))
                    .cooldown(Duration::from_secs(20))
                    .build()
            }),
            retry: RetryPolicy::builder("dependency")
                .attempts(3)
                .backoff(Duration::from_millis(100), Duration::from_secs(1))
                .attempt_timeout(Duration::from_millis(500))
                .allowance(Arc::new(RetryAllowance::default()))
                .build(),
        }
    }

    async fn request(&self, dep: &Outage) -> Result<(), CallError<Unavailable>> {
        let deadline = Deadline::after(Duration::from_secs(2));
        retry_within(
            &deadline,
            &self.retry,
            Idempotent::claim(|attempt| async move {
                if let Some(b) = &self.breaker {
                    b.check()?;
                }
                let outcome = attempt.deadline.run(dep.call()).await;
                if let Some(b) = &self.breaker {
                    b.record(matches!(outcome, Ok(Ok(()))));
                }
                match outcome {
                    Ok(r) => r.map_err(CallError::Failed),
                    Err(expired) => Err(expired.into()),
                }
            }),
        )
        .await
    }
}

struct AmplificationRow {
    requests: u64,
    calls: u64,
    peak_10ms: u64,
    p99: Duration,
}

fn amplification(client: Client) -> AmplificationRow {
    let rt = paused_runtime();
    let dep = Rc::new(Outage::default());
    let local = tokio::task::LocalSet::new();
    let latencies = Rc::new(std::cell::RefCell::new(Vec::new()));
    let requests = Rc::new(Cell::new(0u64));
    local.block_on(&rt, async {
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            let (dep, latencies, requests) = (dep.clone(), latencies.clone(), requests.clone());
            clients.push(tokio::task::spawn_local(async move {
                let instance = Rc::new(Instance::new(client == Client::BoundedRetryBehindBreaker));
                let start = Instant::now();
                let mut tasks = Vec::new();
                let mut next = start;
                while next < start + OUTAGE {
                    tokio::time::sleep_until(next).await;
                    next += REQUEST_EVERY;
                    requests.set(requests.get() + 1);
                    let (dep, latencies, instance) =
                        (dep.clone(), latencies.clone(), instance.clone());
                    tasks.push(tokio::task::spawn_local(async move {
                        let began = Instant::now();
                        match client {
                            Client::NaiveFixedBackoff => naive_request(&dep).await,
                            _ => {
                                let _ = instance.request(&dep).await;
                            }
                        }
                        latencies.borrow_mut().push(began.elapsed());
                    }));
                }
                for t in tasks {
                    t.await.unwrap();
                }
            }));
        }
        for c in clients {
            c.await.unwrap();
        }
    });
    let mut latencies = latencies.borrow().clone();
    latencies.sort();
    AmplificationRow {
        requests: requests.get(),
        calls: dep.calls.get(),
        peak_10ms: dep.peak_per_10ms(),
        p99: percentile(&latencies, 0.99),
    }
}

fn scenario_amplification() {
    println!(
        "## 1. Retry amplification during a full outage\n\n{CLIENTS} clients, one request every {} ms each for {} s; every call fails after {} ms (tokio's paused clock).\n",
        REQUEST_EVERY.as_millis(),
        OUTAGE.as_secs(),
        FAIL_AFTER.as_millis()
    );
    println!(
        "| client | requests | calls at the dependency | calls per request | peak calls in 10 ms | p99 time to an answer |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (client, what) in [
        (
            Client::NaiveFixedBackoff,
            "naive: 3 attempts, fixed 100 ms backoff",
        ),
        (
            Client::BoundedRetry,
            "ours: `retry_within` (3 attempts, full jitter, retry allowance, 2 s deadline)",
        ),
        (
            Client::BoundedRetryBehindBreaker,
            "ours: the same behind a breaker (5 failures in 30 s, 20 s cooldown)",
        ),
    ] {
        let r = amplification(client);
        println!(
            "| {what} | {} | {} | {:.2} | {} | {} |",
            r.requests,
            r.calls,
            r.calls as f64 / r.requests as f64,
            r.peak_10ms,
            ms(r.p99)
        );
    }
    println!();
}

// ---------------------------------------------------------------------------------------------
// 2. The latency bound while a dependency is slow (real time)
// ---------------------------------------------------------------------------------------------

const SLOW_REQUESTS: u64 = 200;
const DEADLINE: Duration = Duration::from_millis(200);

/// The slow dependency: each call takes a uniform 50 ms to 1 s.
async fn slow_call(latency: Duration) -> Result<(), Unavailable> {
    tokio::time::sleep(latency).await;
    Ok(())
}

#[derive(Clone, Copy)]
enum Bound {
    /// No timeout at all.
    NaiveNoTimeout,
    /// `tokio::time::timeout(200 ms)` per attempt, 3 attempts, fixed 50 ms backoff.
    NaiveTimeoutPerAttempt,
    /// `#[critical]`: a 200 ms deadline, `run`.
    OursDeadline,
    /// `retry_within` a 200 ms deadline, 3 attempts of at most 100 ms.
    OursRetryWithinDeadline,
}

async fn bounded_call(bound: Bound, latencies: &[Duration], retry: &RetryPolicy) -> Duration {
    let began = Instant::now();
    let attempt_latency = |n: usize| latencies[n.min(latencies.len() - 1)];
    match bound {
        Bound::NaiveNoTimeout => {
            let _ = slow_call(attempt_latency(0)).await;
        }
        Bound::NaiveTimeoutPerAttempt => {
            for n in 0..3 {
                if let Ok(Ok(())) =
                    tokio::time::timeout(DEADLINE, slow_call(attempt_latency(n))).await
                {
                    break;
                }
                if n < 2 {
                    tokio::time::sleep(50 * MS).await;
                }
            }
        }
        Bound::OursDeadline => {
            let deadline = Deadline::after(DEADLINE);
            let _ = deadline.run(slow_call(attempt_latency(0))).await;
        }
        Bound::OursRetryWithinDeadline => {
            let deadline = Deadline::after(DEADLINE);
            let attempt_no = AtomicU64::new(0);
            let _ = retry_within(
                &deadline,
                retry,
                Idempotent::claim(|attempt| {
                    let n = attempt_no.fetch_add(1, Ordering::Relaxed) as usize;
                    async move {
                        attempt
                            .deadline
                            .run(slow_call(attempt_latency(n)))
                            .await?
                            .map_err(CallError::Failed)
                    }
                }),
            )
            .await;
        }
    }
    began.elapsed()
}

fn scenario_latency_bound() {
    println!(
        "## 2. The latency bound while a dependency is slow\n\n{SLOW_REQUESTS} requests started 5 ms apart; each call to the dependency takes a uniform 50 ms to 1 s; the deadline is {} ms (real time, multi-thread runtime).\n",
        DEADLINE.as_millis()
    );
    println!("| protected call | p50 | p99 | max | max / deadline |");
    println!("|---|---:|---:|---:|---:|");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a runtime");
    let retry = Arc::new(
        RetryPolicy::builder("slow")
            .attempts(3)
            .backoff(Duration::from_millis(10), Duration::from_millis(50))
            .attempt_timeout(Duration::from_millis(100))
            .build(),
    );
    for (bound, what) in [
        (Bound::NaiveNoTimeout, "naive: no timeout"),
        (
            Bound::NaiveTimeoutPerAttempt,
            "naive: `timeout(200 ms)` per attempt, 3 attempts, 50 ms backoff",
        ),
        (
            Bound::OursDeadline,
            "ours: `Deadline::after(200 ms).run(..)` (the `#[critical]` operation)",
        ),
        (
            Bound::OursRetryWithinDeadline,
            "ours: `retry_within` the 200 ms deadline, 3 attempts of at most 100 ms",
        ),
    ] {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut latencies: Vec<Duration> = rt.block_on(async {
            let mut tasks = Vec::new();
            for i in 0..SLOW_REQUESTS {
                let draws: Vec<Duration> = (0..3)
                    .map(|_| rng.between(50 * MS, Duration::from_secs(1)))
                    .collect();
                let retry = retry.clone();
                tasks.push(tokio::spawn(async move {
                    tokio::time::sleep(5 * MS * i as u32).await;
                    bounded_call(bound, &draws, &retry).await
                }));
            }
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        });
        latencies.sort();
        let max = latencies[latencies.len() - 1];
        println!(
            "| {what} | {} | {} | {} | {:.2} |",
            ms(percentile(&latencies, 0.5)),
            ms(percentile(&latencies, 0.99)),
            ms(max),
            max.as_secs_f64() / DEADLINE.as_secs_f64()
        );
    }
    println!();
}

// ---------------------------------------------------------------------------------------------
// 3. Isolation: an unrelated route while one dependency is 100 times slower
// ---------------------------------------------------------------------------------------------

const POOL: usize = 16;
const ISOLATION_RUN: Duration = Duration::from_secs(5);
const ARRIVALS_PER_SEC: u32 = 100;
const FAST: Duration = Duration::from_millis(2);

#[derive(Default)]
struct RouteStats {
    latencies: Vec<Duration>,
    refused: u64,
}

/// Two routes share one pool of `POOL` workers (a queueing semaphore, as a connection pool or
/// a server's concurrency limit is): route A calls dependency X, route B calls dependency Y.
/// Each route gets `ARRIVALS_PER_SEC` requests a second.
fn isolation(x_latency: Duration, bulkhead: Option<u32>) -> (RouteStats, RouteStats) {
    let rt = paused_runtime();
    let local = tokio::task::LocalSet::new();
    let pool = Rc::new(Semaphore::new(POOL));
    let x_bulkhead = bulkhead.map(|slots| Bulkhead::builder("x").max_concurrent(slots).build());
    let a = Rc::new(std::cell::RefCell::new(RouteStats::default()));
    let b = Rc::new(std::cell::RefCell::new(RouteStats::default()));
    local.block_on(&rt, async {
        let start = Instant::now();
        let every = Duration::from_secs(1) / ARRIVALS_PER_SEC;
        let mut tasks = Vec::new();
        let mut next = start;
        while next < start + ISOLATION_RUN {
            tokio::time::sleep_until(next).await;
            next += every;
            // Route A, to the slow dependency X.
            let (pool_a, stats_a, x_bulkhead) = (pool.clone(), a.clone(), x_bulkhead.clone());
            tasks.push(tokio::task::spawn_local(async move {
                let began = Instant::now();
                // The bulkhead is asked before the shared pool: a refused call never queues
                // for a worker.
                let slot = match &x_bulkhead {
                    Some(bh) => match bh.try_acquire_owned() {
                        Ok(slot) => Some(slot),
                        Err(_) => {
                            stats_a.borrow_mut().refused += 1;
                            return;
                        }
                    },
                    None => None,
                };
                let _worker = pool_a.acquire().await.unwrap();
                tokio::time::sleep(x_latency).await;
                drop(slot);
                stats_a.borrow_mut().latencies.push(began.elapsed());
            }));
            // Route B, to the healthy dependency Y.
            let (pool_b, stats_b) = (pool.clone(), b.clone());
            tasks.push(tokio::task::spawn_local(async move {
                let began = Instant::now();
                let _worker = pool_b.acquire().await.unwrap();
                tokio::time::sleep(FAST).await;
                stats_b.borrow_mut().latencies.push(began.elapsed());
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let mut a = a.take();
    let mut b = b.take();
    a.latencies.sort();
    b.latencies.sort();
    (a, b)
}

fn scenario_isolation() {
    println!(
        "## 3. Isolation: an unrelated route while one dependency is 100 times slower\n\nRoutes A (to dependency X) and B (to dependency Y) share a pool of {POOL} workers; {ARRIVALS_PER_SEC} requests a second on each route for {} s. Y answers in {} ms; X in {} ms when healthy and {} ms when slow (tokio's paused clock).\n",
        ISOLATION_RUN.as_secs(),
        FAST.as_millis(),
        FAST.as_millis(),
        (FAST * 100).as_millis()
    );
    println!(
        "| X | bulkhead on X | route B p50 | route B p99 | route B max | route A served | route A refused | route A p99 |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (x, bulkhead, what_x) in [
        (FAST, None, "healthy (2 ms)"),
        (FAST * 100, None, "slow (200 ms)"),
        (FAST * 100, Some(8), "slow (200 ms)"),
    ] {
        let (a, b) = isolation(x, bulkhead);
        println!(
            "| {what_x} | {} | {} | {} | {} | {} | {} | {} |",
            bulkhead.map_or("none".to_owned(), |s| format!("{s} slots, no queue")),
            ms(percentile(&b.latencies, 0.5)),
            ms(percentile(&b.latencies, 0.99)),
            ms(b.latencies.last().copied().unwrap_or_default()),
            a.latencies.len(),
            a.refused,
            ms(percentile(&a.latencies, 0.99)),
        );
    }
    println!();
}

// ---------------------------------------------------------------------------------------------
// 4. Hedging a heavy tail
// ---------------------------------------------------------------------------------------------

const HEDGE_CALLS: u32 = 20_000;
const HEDGE_ARRIVALS_PER_SEC: u32 = 1_000;

/// One attempt's latency: 90% of attempts take 8 to 12 ms, 8% 12 to 40 ms, and 2% (a slow
/// replica, a pause) 100 to 300 ms: a p50 of about 10 ms and a p99 of about 200 ms, 20 times
/// as much. Each attempt draws its own, as a second replica would answer.
fn heavy_tail(rng: &mut Rng) -> Duration {
    match rng.next() % 100 {
        0..2 => rng.between(100 * MS, 300 * MS),
        2..10 => rng.between(12 * MS, 40 * MS),
        _ => rng.between(8 * MS, 12 * MS),
    }
}

struct HedgeRow {
    latencies: Vec<Duration>,
    attempts: u64,
    hedge: Option<velocity_policy::hedge::HedgeSnapshot>,
}

/// `HEDGE_CALLS` calls, `HEDGE_ARRIVALS_PER_SEC` a second, each under a 1 s deadline; with a
/// hedge, through `hedge_within` (every call records its latency, the delay is the recorded
/// percentile), without, the attempt alone. Counts the attempts that reached the dependency.
fn hedging(hedge: Option<velocity_policy::hedge::Hedge>) -> HedgeRow {
    use velocity_policy::hedge::hedge_within;
    let rt = paused_runtime();
    let local = tokio::task::LocalSet::new();
    let rng = Rc::new(std::cell::RefCell::new(Rng(0x9e37_79b9_7f4a_7c15)));
    let attempts = Rc::new(Cell::new(0u64));
    let hedge = hedge.map(Rc::new);
    let latencies = Rc::new(std::cell::RefCell::new(Vec::new()));
    local.block_on(&rt, async {
        let every = Duration::from_secs(1) / HEDGE_ARRIVALS_PER_SEC;
        let mut next = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..HEDGE_CALLS {
            tokio::time::sleep_until(next).await;
            next += every;
            let (rng, attempts, hedge, latencies) = (
                rng.clone(),
                attempts.clone(),
                hedge.clone(),
                latencies.clone(),
            );
            tasks.push(tokio::task::spawn_local(async move {
                let began = Instant::now();
                let deadline = Deadline::after(Duration::from_secs(1));
                let attempt = || {
                    attempts.set(attempts.get() + 1);
                    let took = heavy_tail(&mut rng.borrow_mut());
                    async move {
                        tokio::time::sleep(took).await;
                        Ok::<(), CallError<Unavailable>>(())
                    }
                };
                match &hedge {
                    Some(hedge) => hedge_within(
                        &deadline,
                        hedge,
                        Idempotent::claim(|_: velocity_policy::retry::Attempt| attempt()),
                    )
                    .await
                    .unwrap(),
                    None => attempt().await.unwrap(),
                }
                latencies.borrow_mut().push(began.elapsed());
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let mut latencies = latencies.take();
    latencies.sort();
    HedgeRow {
        latencies,
        attempts: attempts.get(),
        hedge: hedge.map(|h| h.snapshot()),
    }
}

fn scenario_hedging() {
    println!(
        "## 4. Hedging a heavy tail\n\n{HEDGE_CALLS} calls, {HEDGE_ARRIVALS_PER_SEC} a second; each attempt takes 8 to 12 ms (90%), 12 to 40 ms (8%) or 100 to 300 ms (2%), each attempt its own draw; a 1 s deadline (tokio's paused clock).\n"
    );
    println!(
        "| calls | p50 | p95 | p99 | p99.9 | max | calls hedged | hedges won | attempts at the dependency | extra load |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let rows = [
        ("no hedge", None),
        (
            "hedge after the operation's p95 (`hedge(after = \"p95\", max = 2)`)",
            Some(
                velocity_policy::hedge::Hedge::builder("tail")
                    .percentile(95.0)
                    .max(2)
                    .build(),
            ),
        ),
        (
            "hedge after a fixed 30 ms (`hedge(after = \"30ms\")`)",
            Some(
                velocity_policy::hedge::Hedge::builder("fixed")
                    .after(30 * MS)
                    .build(),
            ),
        ),
    ];
    for (what, hedge) in rows {
        let row = hedging(hedge);
        let calls = row.latencies.len() as u64;
        let (hedged, won) = row
            .hedge
            .as_ref()
            .map_or(("none".to_owned(), "".to_owned()), |h| {
                (
                    format!(
                        "{} ({:.1}%)",
                        h.started,
                        100.0 * h.started as f64 / h.calls.max(1) as f64
                    ),
                    h.won.to_string(),
                )
            });
        println!(
            "| {what} | {} | {} | {} | {} | {} | {hedged} | {won} | {} | {:+.1}% |",
            ms(percentile(&row.latencies, 0.5)),
            ms(percentile(&row.latencies, 0.95)),
            ms(percentile(&row.latencies, 0.99)),
            ms(percentile(&row.latencies, 0.999)),
            ms(row.latencies.last().copied().unwrap_or_default()),
            row.attempts,
            100.0 * (row.attempts as f64 / calls.max(1) as f64 - 1.0),
        );
    }
    println!();
}

// ---------------------------------------------------------------------------------------------
// 5. The adaptive bulkhead: the dependency's capacity drops from 32 to 8 concurrent calls
// ---------------------------------------------------------------------------------------------

const ADAPTIVE_POOL: usize = 36;
const ADAPTIVE_RUN: Duration = Duration::from_secs(15);
const CAPACITY_DROP_AT: Duration = Duration::from_secs(5);
const CAPACITY_BEFORE: u32 = 32;
const CAPACITY_AFTER: u32 = 8;
const X_SERVICE: Duration = Duration::from_millis(20);
const A_PER_SEC: f64 = 1200.0;
const B_PER_SEC: f64 = 1500.0;

/// What one run of the capacity drop measured.
struct CapacityDrop {
    /// The bulkhead's slot count every 10 ms, from the start.
    limits: Vec<u32>,
    /// Route B's latencies before the drop (from 1 s on) and after it (from 2 s after it).
    b_before: Vec<Duration>,
    b_after: Vec<Duration>,
    /// Route A after the drop (from 2 s after it): latencies of served calls, and refusals.
    a_after: Vec<Duration>,
    a_refused_after: u64,
}

/// An exponential gap between arrivals, for `per_sec` arrivals a second on average.
fn poisson_gap(rng: &mut Rng, per_sec: f64) -> Duration {
    let uniform = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    Duration::from_secs_f64(-(1.0 - uniform).ln() / per_sec)
}

/// Routes A (to dependency X, behind `bulkhead`) and B (to the healthy Y, 2 ms) share a pool
/// of `ADAPTIVE_POOL` workers; requests arrive at random (Poisson) on both. X serves
/// `CAPACITY_BEFORE` calls at once, each in 20 ms, then `CAPACITY_AFTER` from
/// `CAPACITY_DROP_AT` on; calls past its capacity wait inside it.
fn capacity_drop(bulkhead: Bulkhead) -> CapacityDrop {
    use std::cell::RefCell;
    use velocity_policy_testkit::capacity::Capacity;

    let rt = paused_runtime();
    let local = tokio::task::LocalSet::new();
    let pool = Rc::new(Semaphore::new(ADAPTIVE_POOL));
    let x = Capacity::new(CAPACITY_BEFORE, X_SERVICE);
    let start = rt.block_on(async { Instant::now() });
    let drop_at = start + CAPACITY_DROP_AT;
    let a_after = Rc::new(RefCell::new((Vec::new(), 0u64)));
    let b = Rc::new(RefCell::new((Vec::new(), Vec::new())));
    let limits = Rc::new(RefCell::new(Vec::new()));
    local.block_on(&rt, async {
        let watch = {
            let (bulkhead, limits) = (bulkhead.clone(), limits.clone());
            tokio::task::spawn_local(async move {
                while Instant::now() < start + ADAPTIVE_RUN {
                    tokio::time::sleep(10 * MS).await;
                    limits.borrow_mut().push(bulkhead.max_concurrent());
                }
            })
        };
        let drop_capacity = {
            let x = x.clone();
            tokio::task::spawn_local(async move {
                tokio::time::sleep_until(drop_at).await;
                x.set_slots(CAPACITY_AFTER);
            })
        };
        let routes = [
            (A_PER_SEC, true, 0x5eed_000a),
            (B_PER_SEC, false, 0x5eed_000b),
        ];
        let arrivals = routes.map(|(per_sec, to_x, seed)| {
            let (pool, x, bulkhead) = (pool.clone(), x.clone(), bulkhead.clone());
            let (a_after, b) = (a_after.clone(), b.clone());
            tokio::task::spawn_local(async move {
                let mut rng = Rng(seed);
                let mut next = start;
                let mut tasks = Vec::new();
                while next < start + ADAPTIVE_RUN {
                    next += poisson_gap(&mut rng, per_sec);
                    tokio::time::sleep_until(next).await;
                    let (pool, x, bulkhead) = (pool.clone(), x.clone(), bulkhead.clone());
                    let (a_after, b) = (a_after.clone(), b.clone());
                    tasks.push(tokio::task::spawn_local(async move {
                        let began = Instant::now();
                        let settled = began >= drop_at + Duration::from_secs(2);
                        if to_x {
                            // Asked before the shared pool: a refused call holds no worker.
                            let Ok(slot) = bulkhead.try_acquire_owned() else {
                                if settled {
                                    a_after.borrow_mut().1 += 1;
                                }
                                return;
                            };
                            let _worker = pool.acquire().await.unwrap();
                            x.call().await;
                            drop(slot);
                            if settled {
                                a_after.borrow_mut().0.push(began.elapsed());
                            }
                        } else {
                            let _worker = pool.acquire().await.unwrap();
                            tokio::time::sleep(FAST).await;
                            let took = began.elapsed();
                            let mut b = b.borrow_mut();
                            if began >= start + Duration::from_secs(1) && began < drop_at {
                                b.0.push(took);
                            } else if settled {
                                b.1.push(took);
                            }
                        }
                    }));
                }
                for task in tasks {
                    task.await.unwrap();
                }
            })
        });
        for route in arrivals {
            route.await.unwrap();
        }
        drop_capacity.await.unwrap();
        watch.await.unwrap();
    });
    let (mut a_after, a_refused_after) = a_after.take();
    let (mut b_before, mut b_after) = b.take();
    a_after.sort();
    b_before.sort();
    b_after.sort();
    CapacityDrop {
        limits: limits.take(),
        b_before,
        b_after,
        a_after,
        a_refused_after,
    }
}

/// From the drop, how long until the limit is within 25% of the new capacity and stays there
/// to the end of the run (`None`: it never settles there).
fn converged_after(limits: &[u32]) -> Option<Duration> {
    let low = (f64::from(CAPACITY_AFTER) * 0.75).ceil() as u32;
    let high = (f64::from(CAPACITY_AFTER) * 1.25).floor() as u32;
    let from = (CAPACITY_DROP_AT.as_millis() / 10) as usize;
    let after = &limits[from.min(limits.len())..];
    let first_inside = match after.iter().rposition(|l| !(low..=high).contains(l)) {
        Some(last_outside) if last_outside + 1 == after.len() => return None,
        Some(last_outside) => last_outside + 1,
        None => 0,
    };
    Some(10 * MS * first_inside as u32)
}

fn scenario_adaptive() {
    use velocity_policy::bulkhead::AdaptiveLimit;

    println!(
        "## 5. The adaptive bulkhead: the dependency's capacity drops from {CAPACITY_BEFORE} to {CAPACITY_AFTER} concurrent calls\n\nRoutes A (to dependency X, behind the bulkhead) and B (to Y, {} ms) share a pool of {ADAPTIVE_POOL} workers; requests arrive at random, {A_PER_SEC} a second on A and {B_PER_SEC} on B, for {} s. X serves {CAPACITY_BEFORE} calls at once, each in {} ms, and {CAPACITY_AFTER} from {} s on; calls past its capacity wait inside it. The bulkhead is asked before the pool and does not queue. \"Before\" is from 1 s to the drop, \"after\" from 2 s after it to the end (tokio's paused clock).\n",
        FAST.as_millis(),
        ADAPTIVE_RUN.as_secs(),
        X_SERVICE.as_millis(),
        CAPACITY_DROP_AT.as_secs(),
    );
    println!(
        "| bulkhead on X | limit at the drop | limit after (min-max) | within 25% of {CAPACITY_AFTER} after the drop | route B p99 before | route B p99 after | route B max after | route A served/s after | route A refused/s after | route A p99 after |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let after_secs = (ADAPTIVE_RUN - CAPACITY_DROP_AT - Duration::from_secs(2)).as_secs_f64();
    for (what, bulkhead) in [
        (
            format!("fixed, {CAPACITY_BEFORE} slots"),
            Bulkhead::builder("x-fixed")
                .max_concurrent(CAPACITY_BEFORE)
                .build(),
        ),
        (
            format!("adaptive(min = 4, max = {CAPACITY_BEFORE})"),
            Bulkhead::builder("x-adaptive")
                .adaptive(AdaptiveLimit::new(4, CAPACITY_BEFORE))
                .build(),
        ),
        (
            "adaptive(min = 4, max = 64)".to_owned(),
            Bulkhead::builder("x-adaptive-64")
                .adaptive(AdaptiveLimit::new(4, 64))
                .build(),
        ),
    ] {
        let run = capacity_drop(bulkhead);
        let drop_index = (CAPACITY_DROP_AT.as_millis() / 10) as usize - 1;
        let settled = &run.limits[drop_index + 201..];
        let converged = converged_after(&run.limits).map_or("never".to_owned(), |after| {
            format!("{:.2} s", after.as_secs_f64())
        });
        println!(
            "| {what} | {} | {}-{} | {converged} | {} | {} | {} | {:.0} | {:.0} | {} |",
            run.limits[drop_index],
            settled.iter().min().unwrap(),
            settled.iter().max().unwrap(),
            ms(percentile(&run.b_before, 0.99)),
            ms(percentile(&run.b_after, 0.99)),
            ms(run.b_after.last().copied().unwrap_or_default()),
            run.a_after.len() as f64 / after_secs,
            run.a_refused_after as f64 / after_secs,
            ms(percentile(&run.a_after, 0.99)),
        );
    }
    println!();
}

fn main() {
    scenario_amplification();
    scenario_latency_bound();
    scenario_isolation();
    scenario_hedging();
    scenario_adaptive();
}
