//! The fleet simulation: N instances of a service sharing one Redis, each with a registry and a
//! store (so a connection and a subscription) of its own, as N processes would have, driven
//! in one process on one tokio runtime. For each N it measures, on a `redis-server` it starts
//! on a free loopback TCP port:
//!
//! - how long an opening on one instance takes to reach every other instance (three failures
//!   open a breaker on instance `k`; every instance's `check` is polled until it refuses);
//! - the Redis commands per second per instance (from `INFO commandstats`) and the server's CPU
//!   (`INFO cpu`) in four phases: healthy; a dependency failing one call in ten below the
//!   breaker's threshold (every failure is a report); a full outage until every instance's
//!   breaker is open; and the breaker open, in steady state (a probe per instance after each
//!   cooldown);
//! - the server's memory and connections with the fleet connected.
//!
//! ```sh
//! cargo run --release --example fleet --features redis                       # N = 10, 50, 200
//! cargo run --release --example fleet --features redis -- --instances 500 --trials 20
//! ```
//!
//! It prints markdown tables (BENCHMARKS.md quotes them) with the machine's load average at the
//! start and end of each N. Without `redis-server` it says so and exits (under `CI=true` it
//! fails, like the tests). `FLEET_TRACE=1` also prints, for each trial, when the first and
//! the last instance learned the opening (a slow trial is either a slow announce, when the
//! first is late too, or a slow fan-out).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a simulation binary: a failed setup is a failed run"
)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use velocity_policy::redis_store::RedisStore;
use velocity_policy::{Breaker, Registry, Sharing};
use velocity_policy_testkit::RedisTcpServer;

/// Each instance's calls per second to the dependency, in every phase.
const CALLS_PER_SECOND: u64 = 100;
/// The breaker the phases use: 20 failures within 10 s across the fleet, a 2 s cooldown.
const THRESHOLD: u32 = 20;
const COOLDOWN: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
struct Options {
    instances: Vec<usize>,
    trials: usize,
    phase: Duration,
}

/// Says what was wrong with the command line, and stops.
fn usage(problem: &str) -> ! {
    eprintln!("fleet: {problem}; expected --instances 10,50,200, --trials 50, --phase-secs 6");
    std::process::exit(2)
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> T {
    value
        .trim()
        .parse()
        .unwrap_or_else(|_| usage(&format!("{flag} takes a number, not `{value}`")))
}

fn options() -> Options {
    let mut options = Options {
        instances: vec![10, 50, 200],
        trials: 50,
        phase: Duration::from_secs(6),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).map_or("", String::as_str);
        match args[i].as_str() {
            "--instances" => {
                options.instances = value.split(',').map(|n| number("--instances", n)).collect();
            }
            "--trials" => options.trials = number("--trials", value),
            "--phase-secs" => options.phase = Duration::from_secs(number("--phase-secs", value)),
            // `cargo bench` passes it to every target.
            "--bench" => {
                i += 1;
                continue;
            }
            other => usage(&format!("unknown argument `{other}`")),
        }
        i += 2;
    }
    options
}

/// The 1-minute load average, from `/proc/loadavg`.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// What the dependency does with a call.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dependency {
    Healthy = 0,
    /// One call in ten fails.
    Flaky = 1,
    Down = 2,
}

/// One simulated instance: its own registry (not the global one: the macros' default) with its
/// own store.
struct Instance {
    registry: Registry,
    store: Arc<RedisStore>,
}

/// The commands a client sends (`INFO commandstats` also counts the commands scripts run
/// inside the server, which are not round trips). The announce's `ZADD` is counted by its
/// `PUBLISH` (one each): the scripts run `ZADD` too.
const CLIENT_COMMANDS: &[&str] = &["evalsha", "eval", "script|load", "publish", "ping"];

/// The fleet's and the server's counters at one moment.
struct Reading {
    at: Instant,
    /// Commands the fleet's stores sent (their own count, every round trip).
    sent: u64,
    calls: BTreeMap<String, u64>,
    cpu_s: f64,
}

fn read(server: &RedisTcpServer, instances: &[Instance]) -> Reading {
    let cpu = |f| server.info_number("cpu", f).unwrap_or(0.0);
    Reading {
        at: Instant::now(),
        sent: instances.iter().map(|i| i.store.snapshot().sent).sum(),
        calls: server.command_calls(),
        cpu_s: cpu("used_cpu_user") + cpu("used_cpu_sys"),
    }
}

/// What happened between two readings.
struct Phase {
    secs: f64,
    /// Round trips the stores counted.
    commands: u64,
    /// The server's count of client commands, by name.
    by_command: BTreeMap<String, u64>,
    cpu_percent: f64,
}

fn between(a: &Reading, b: &Reading) -> Phase {
    let mut by_command: BTreeMap<String, u64> = b
        .calls
        .iter()
        .filter(|(name, _)| CLIENT_COMMANDS.contains(&name.as_str()))
        .filter_map(|(name, &n)| {
            let d = n - a.calls.get(name).copied().unwrap_or(0);
            (d > 0).then(|| (name.clone(), d))
        })
        .collect();
    if let Some(&published) = by_command.get("publish") {
        by_command.insert("zadd".to_owned(), published);
    }
    let secs = (b.at - a.at).as_secs_f64();
    Phase {
        secs,
        commands: b.sent - a.sent,
        by_command,
        cpu_percent: (b.cpu_s - a.cpu_s) / secs * 100.0,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Every instance calls `name` at [`CALLS_PER_SECOND`] until `stop`, doing what `mode` says.
fn drive(
    rt: &tokio::runtime::Runtime,
    breakers: &[Breaker],
    mode: &Arc<AtomicU8>,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    breakers
        .iter()
        .enumerate()
        .map(|(i, breaker)| {
            let (breaker, mode, stop) = (breaker.clone(), mode.clone(), stop.clone());
            rt.spawn(async move {
                let mut tick =
                    tokio::time::interval(Duration::from_micros(1_000_000 / CALLS_PER_SECOND));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                let mut n: u64 = i as u64;
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    if breaker.check().is_err() {
                        continue;
                    }
                    n += 1;
                    let fails = match mode.load(Ordering::Relaxed) {
                        0 => false,
                        1 => n.is_multiple_of(10),
                        _ => true,
                    };
                    if fails {
                        breaker.record_failure();
                    } else {
                        breaker.record_success();
                    }
                }
            })
        })
        .collect()
}

struct Row {
    n: usize,
    load_start: String,
    load_end: String,
    /// Each instance's delay, every trial.
    deliveries: Vec<Duration>,
    /// Per trial: when the last instance refused.
    all_reached: Vec<Duration>,
    missed: usize,
    phases: Vec<(&'static str, Phase)>,
    open_fleet: Option<Duration>,
    reports_to_open: u64,
    memory_per_instance: f64,
    used_memory: f64,
    clients: f64,
}

fn simulate(rt: &tokio::runtime::Runtime, n: usize, options: &Options) -> Option<Row> {
    let server = RedisTcpServer::start(&["--maxclients", "20000"])?;
    let load_start = load();
    let prefix = server.key_prefix("fleet");
    let memory = |s: &RedisTcpServer| s.info_number("memory", "used_memory").unwrap_or(0.0);
    let before_connect = memory(&server);
    let instances: Vec<Instance> = (0..n)
        .map(|i| {
            let store = rt
                .block_on(
                    RedisStore::builder()
                        .prefix(prefix.as_str())
                        .instance(format!("sim-{i}"))
                        // The default re-sync period, as a fleet would run.
                        .resync_every(Duration::from_secs(5))
                        // Generous: 200 instances start on two shared cores.
                        .timeout(Duration::from_secs(2))
                        .connect(&server.url()),
                )
                .map(Arc::new)
                .expect("connect a store");
            let registry = Registry::new();
            registry.set_breaker_store(store.clone());
            Instance { registry, store }
        })
        .collect();
    // Every subscription is in place before anything is measured.
    let channel = format!("{prefix}:breaker:events");
    let started = Instant::now();
    while server
        .query(&["PUBSUB", "NUMSUB", &channel])
        .ok()
        .and_then(|r| r.lines().nth(1).and_then(|c| c.parse::<usize>().ok()))
        != Some(n)
    {
        assert!(started.elapsed() < Duration::from_secs(60), "subscriptions");
        std::thread::sleep(Duration::from_millis(10));
    }
    let connected = memory(&server);
    let clients = server
        .info_number("clients", "connected_clients")
        .unwrap_or(0.0);

    let dependency = |name: &str, threshold: u32| -> Vec<Breaker> {
        instances
            .iter()
            .map(|i| {
                i.registry.breaker(name, |b| {
                    b.open_after_failures(threshold, Duration::from_secs(10))
                        .cooldown(COOLDOWN)
                        .sharing(Sharing::Openings { quorum: 1 })
                })
            })
            .collect()
    };
    let mut phases = Vec::new();
    let run_phase = |breakers: &[Breaker], mode: Dependency, length: Duration| -> Phase {
        let mode = Arc::new(AtomicU8::new(mode as u8));
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = drive(rt, breakers, &mode, &stop);
        std::thread::sleep(Duration::from_millis(200));
        let a = read(&server, &instances);
        std::thread::sleep(length);
        let b = read(&server, &instances);
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            rt.block_on(t).expect("a caller task");
        }
        between(&a, &b)
    };

    // 1. Healthy: the success path, and the periodic re-sync.
    let healthy = dependency("provider", THRESHOLD);
    phases.push((
        "healthy",
        run_phase(&healthy, Dependency::Healthy, options.phase),
    ));
    // 2. One call in ten fails, below the threshold: every failure is a report.
    let flaky = dependency("provider-flaky", u32::MAX);
    phases.push((
        "dependency failing 1 call in 10, breaker not open (every failure reported)",
        run_phase(&flaky, Dependency::Flaky, options.phase),
    ));
    // 3. A full outage, until every instance refuses; then 4. open, steady state.
    let (open_fleet, opening, open_phase) = {
        let breakers = dependency("provider-outage", THRESHOLD);
        let mode = Arc::new(AtomicU8::new(Dependency::Down as u8));
        let stop = Arc::new(AtomicBool::new(false));
        let a = read(&server, &instances);
        let tasks = drive(rt, &breakers, &mode, &stop);
        let limit = Duration::from_secs(30);
        let open_fleet = loop {
            if breakers.iter().all(|b| b.open_until().is_some()) {
                break Some(a.at.elapsed());
            }
            if a.at.elapsed() > limit {
                break None;
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        let b = read(&server, &instances);
        std::thread::sleep(Duration::from_millis(500));
        let c = read(&server, &instances);
        std::thread::sleep(options.phase.max(COOLDOWN * 3));
        let d = read(&server, &instances);
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            rt.block_on(t).expect("a caller task");
        }
        (open_fleet, between(&a, &b), between(&c, &d))
    };
    let reports_to_open = opening.commands;
    phases.push((
        "dependency down, until every instance's breaker is open",
        opening,
    ));
    phases.push(("dependency down, breaker open (steady state)", open_phase));

    // The opening's journey: three failures on instance k open its breaker; when does every
    // other instance refuse?
    let _context = rt.enter();
    let mut deliveries = Vec::with_capacity(options.trials * n);
    let mut all_reached = Vec::with_capacity(options.trials);
    let mut missed = 0;
    let before_trials = read(&server, &instances);
    for trial in 0..options.trials {
        let breakers = dependency(&format!("trial-{trial}"), 3);
        std::thread::sleep(Duration::from_millis(20));
        let origin = (trial * 7) % n;
        let opened = Instant::now();
        for _ in 0..3 {
            breakers[origin].record_failure();
        }
        let mut reached: Vec<Option<Duration>> = vec![None; n];
        reached[origin] = Some(Duration::ZERO);
        let mut left = n - 1;
        while left > 0 && opened.elapsed() < Duration::from_secs(2) {
            for (i, breaker) in breakers.iter().enumerate() {
                if reached[i].is_none() && breaker.open_until().is_some() {
                    reached[i] = Some(opened.elapsed());
                    left -= 1;
                }
            }
            // Every half millisecond: the polling thread shares the two cores with the
            // fleet's runtime and the server, and a tighter loop would slow what it measures.
            std::thread::sleep(Duration::from_micros(500));
        }
        missed += left;
        let seen: Vec<Duration> = reached
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != origin)
            .filter_map(|(_, r)| *r)
            .collect();
        if std::env::var_os("FLEET_TRACE").is_some() {
            eprintln!(
                "n={n} trial {trial}: first {:?}, last {:?}",
                seen.iter().min(),
                seen.iter().max()
            );
        }
        if left == 0 {
            all_reached.push(seen.iter().copied().max().unwrap_or_default());
        }
        deliveries.extend(seen);
    }
    phases.push((
        "the delivery trials: an opening every ~25 ms, each to every instance",
        between(&before_trials, &read(&server, &instances)),
    ));
    deliveries.sort();
    all_reached.sort();
    let failed: u64 = instances.iter().map(|i| i.store.snapshot().failed).sum();
    assert_eq!(failed, 0, "no Redis call failed during the simulation");
    let used_memory = memory(&server);
    let load_end = load();
    drop(instances);
    Some(Row {
        n,
        load_start,
        load_end,
        deliveries,
        all_reached,
        missed,
        phases,
        open_fleet,
        reports_to_open,
        memory_per_instance: (connected - before_connect) / n as f64,
        used_memory,
        clients,
    })
}

fn main() {
    let options = options();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime for the fleet");
    let mut rows = Vec::new();
    for &n in &options.instances {
        eprintln!("simulating {n} instances (load {})", load());
        match simulate(&rt, n.max(2), &options) {
            Some(row) => rows.push(row),
            None => {
                println!("SKIPPED: the fleet simulation needs `redis-server`");
                return;
            }
        }
    }

    println!();
    println!(
        "An opening on one instance, seen by every other ({} trials per fleet; three failures open the breaker on one instance, the time until each other instance's breaker is open):",
        options.trials
    );
    println!();
    println!(
        "| instances | deliveries | p50 | p99 | max | every instance reached: p50 | p99 | max | load (1 min) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in &rows {
        println!(
            "| {} | {}{} | {} | {} | {} | {} | {} | {} | {} → {} |",
            r.n,
            r.deliveries.len(),
            if r.missed > 0 {
                format!(" ({} not within 2 s)", r.missed)
            } else {
                String::new()
            },
            ms(percentile(&r.deliveries, 0.5)),
            ms(percentile(&r.deliveries, 0.99)),
            ms(r.deliveries.last().copied().unwrap_or_default()),
            ms(percentile(&r.all_reached, 0.5)),
            ms(percentile(&r.all_reached, 0.99)),
            ms(r.all_reached.last().copied().unwrap_or_default()),
            r.load_start,
            r.load_end,
        );
    }
    println!();
    println!(
        "Redis commands per second per instance, and the Redis server's CPU (each instance calls the dependency {CALLS_PER_SECOND} times a second; re-sync every 5 s; breaker: {THRESHOLD} failures within 10 s, cooldown {} s, quorum 1):",
        COOLDOWN.as_secs()
    );
    println!();
    println!(
        "| instances | phase | seconds | round trips/s per instance | client commands at the server | Redis CPU |"
    );
    println!("|---:|---|---:|---:|---|---:|");
    for r in &rows {
        for (name, p) in &r.phases {
            println!(
                "| {} | {name} | {:.1} | {:.3} | {} | {:.1}% |",
                r.n,
                p.secs,
                p.commands as f64 / p.secs / r.n as f64,
                p.by_command
                    .iter()
                    .map(|(c, k)| format!("{c} {k}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                p.cpu_percent,
            );
        }
    }
    println!();
    println!(
        "| instances | outage until every instance is open | commands until then, per instance | Redis memory with the fleet connected | per instance | clients |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.2} | {:.1} MB | {:.1} KB | {} |",
            r.n,
            r.open_fleet.map_or("not within 30 s".to_owned(), ms),
            r.reports_to_open as f64 / r.n as f64,
            r.used_memory / 1e6,
            r.memory_per_instance / 1e3,
            r.clients,
        );
    }
}
