//! The run, told: one table per phase on the terminal, what the numbers show, and a
//! self-contained HTML report with latency-over-time charts (inline SVG, no script, nothing
//! fetched from the network).

use std::fmt::Write as _;
use std::time::Duration;

use crate::events::{Counted, Opening};
use crate::scenario::{Outcome, PhaseReport, Route, RouteStats, RunReport, Sample};
use crate::soak::{Machine, RouteRow, SoakReport, SoakSample};

fn ms(d: Duration) -> String {
    let m = d.as_secs_f64() * 1000.0;
    if m >= 100.0 {
        format!("{m:.0} ms")
    } else {
        format!("{m:.1} ms")
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// A mechanism's or operation's name without the module path the macros put before inline names.
fn short(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name)
}

/// A duration as the runtime's events print it (`2.999998678s`, `10s`, `150ms`), rounded.
fn tidy(debug: &str) -> String {
    let (number, unit) = if let Some(n) = debug.strip_suffix("ms") {
        (n, "ms")
    } else if let Some(n) = debug.strip_suffix("µs") {
        (n, "µs")
    } else if let Some(n) = debug.strip_suffix('s') {
        (n, "s")
    } else {
        return debug.to_owned();
    };
    match number.parse::<f64>() {
        Ok(v) if (v - v.round()).abs() < 0.05 => format!("{} {unit}", v.round()),
        Ok(v) => format!("{v:.1} {unit}"),
        Err(_) => debug.to_owned(),
    }
}

/// `count` and `noun`, the noun plural unless the count is one (`1 call`, `9 calls`).
fn count_of(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

fn join_or_none(items: Vec<String>) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(" · ")
    }
}

fn outcomes(stats: &RouteStats) -> String {
    let mut parts = vec![format!("{} ok", stats.ok)];
    parts.extend(stats.others.iter().map(|(label, n)| format!("{n} {label}")));
    parts.join(", ")
}

fn refusals(counts: &[Counted]) -> String {
    join_or_none(
        counts
            .iter()
            .map(|c| format!("{} `{}` ×{}", c.kind, short(&c.name), c.count))
            .collect(),
    )
}

/// What a chaos drill injected: never to be read as the dependency's own doing.
fn injected(counts: &[Counted]) -> String {
    join_or_none(
        counts
            .iter()
            .map(|c| format!("{} by drill `{}` ×{} (injected)", c.detail, c.name, c.count))
            .collect(),
    )
}

fn shed(counts: &[Counted]) -> String {
    join_or_none(
        counts
            .iter()
            .map(|c| format!("`{}` {} ×{}", short(&c.name), c.detail, c.count))
            .collect(),
    )
}

fn opening(o: &Opening) -> String {
    let counted = match (o.count, &o.window) {
        (Some(count), Some(window)) => format!(" (count {count}, window {})", tidy(window)),
        _ => String::new(),
    };
    format!(
        "`{}` at {}: {}{counted}, open for {}",
        o.breaker,
        secs(o.at),
        o.cause,
        tidy(&o.open_for)
    )
}

fn retries(phase: &PhaseReport) -> String {
    let mut parts: Vec<String> = phase
        .retries
        .iter()
        .map(|(name, n)| format!("`{name}` {n}"))
        .collect();
    parts.extend(
        phase
            .retry_stops
            .iter()
            .map(|c| format!("`{}` stopped early ×{} ({})", c.name, c.count, c.detail)),
    );
    join_or_none(parts)
}

fn fallbacks(phase: &PhaseReport) -> String {
    join_or_none(
        phase
            .fallbacks
            .iter()
            .map(|f| {
                let mut why = Vec::new();
                for (n, what) in [
                    (f.failed, "failed"),
                    (f.refused, "refused"),
                    (f.expired, "expired"),
                ] {
                    if n > 0 {
                        why.push(format!("{n} {what}"));
                    }
                }
                format!(
                    "`{}` answered by `{}` ×{} ({})",
                    short(&f.operation),
                    f.answered_by,
                    f.failed + f.refused + f.expired,
                    why.join(", ")
                )
            })
            .collect(),
    )
}

fn deferred(phase: &PhaseReport) -> String {
    let d = &phase.deferred;
    let started = d.after + d.before + d.unmatched;
    let by_task: Vec<String> = d
        .by_task
        .iter()
        .map(|(task, n)| format!("{task} {n}"))
        .collect();
    let mut line = format!(
        "{started} tasks started (for {} responses): {} after their response was finished, {} before",
        d.responses, d.after, d.before
    );
    if d.unmatched > 0 {
        let _ = write!(line, ", {} with no recorded response", d.unmatched);
    }
    if !by_task.is_empty() {
        let _ = write!(line, " ({})", by_task.join(", "));
    }
    if d.injected_faults > 0 {
        let met: Vec<String> = d
            .met_injected
            .iter()
            .map(|(task, n)| format!("{task} {n}"))
            .collect();
        let _ = write!(
            line,
            "; {} of them met a fault injected by a chaos drill ({} faults, a drill's, not the provider's: {})",
            d.met_injected(),
            d.injected_faults,
            met.join(", ")
        );
    }
    let failed: u64 = phase.tasks_failed.iter().map(|c| c.count).sum();
    if failed > 0 {
        let _ = write!(
            line,
            "; {failed} deferred or background tasks ended in an error or a refusal, each logged with its name"
        );
    }
    line
}

fn background(phase: &PhaseReport) -> String {
    if let Some(q) = phase.queue {
        return format!(
            "{} embeddings enqueued on the Redis stream `embeddings` ({} refused), {} computed and acknowledged by this instance; queue length {} at the phase's end ({} pending), {} redeliveries, {} dead letters",
            q.enqueued, q.refused, q.completed, q.length, q.pending, q.redelivered, q.dead_lettered
        );
    }
    let b = phase.background;
    format!(
        "{} embeddings computed; shed: {} for pressure on `database`, {} for the pool's own load",
        b.finished, b.shed_pressure, b.shed_load
    )
}

/// The instance a provider's caller header names, in words.
fn instance(caller: &str) -> String {
    match caller {
        "a" => "the first instance".to_owned(),
        "b" => "the second instance".to_owned(),
        "" => "a caller that did not say which instance".to_owned(),
        other => format!("instance {other}"),
    }
}

fn providers(phase: &PhaseReport) -> String {
    let mut parts = Vec::new();
    for (name, max) in &phase.provider_max_in_flight {
        let calls: Vec<String> = phase
            .provider_calls
            .iter()
            .filter(|c| c.provider == *name && c.calls.received > 0)
            .map(|c| {
                format!(
                    "{} from {}",
                    count_of(c.calls.received, "call"),
                    instance(&c.caller)
                )
            })
            .collect();
        let calls = if calls.is_empty() {
            "0 calls".to_owned()
        } else {
            calls.join(", ")
        };
        parts.push(format!("{name} {calls} (at most {max} at once)"));
    }
    parts.join(" · ")
}

/// The pause before a phase that waited for a breaker's cooldown, in words.
fn pause(phase: &PhaseReport) -> Option<String> {
    let waited = phase.waited_for_cooldown?;
    let breaker = phase.phase.after_cooldown_of.unwrap_or("its");
    Some(format!(
        "started after a {} pause (no load, every provider healthy) until the `{breaker}` breaker's opening from the phase before had ended, so its first calls reach the provider",
        secs(waited)
    ))
}

fn route_row(label: &str, stats: &RouteStats) -> String {
    format!(
        "  {label:<9}{:>9}  {:>9}  {:>9}  {:>9}   {}\n",
        stats.count,
        ms(stats.p50),
        ms(stats.p99),
        ms(stats.max),
        outcomes(stats)
    )
}

/// One table per phase, as printed on the terminal.
pub fn tables(run: &RunReport) -> String {
    let mut out = String::new();
    let count = run.phases.len();
    for (index, phase) in run.phases.iter().enumerate() {
        let _ = writeln!(
            out,
            "\n── phase {}/{count} · {}: {} ({} to {}) ──",
            index + 1,
            phase.phase.name,
            phase.phase.story,
            secs(phase.started),
            secs(phase.ended)
        );
        if let Some(line) = pause(phase) {
            let _ = writeln!(out, "  {line}");
        }
        let _ = writeln!(
            out,
            "  {:<9}{:>9}  {:>9}  {:>9}  {:>9}   outcomes",
            "route", "requests", "p50", "p99", "max"
        );
        out.push_str(&route_row("save", &phase.save));
        out.push_str(&route_row("read", &phase.read));
        if let Some(b) = &phase.save_on_b {
            out.push_str(&route_row("save (b)", b));
        }
        let rows = [
            ("refusals by kind", refusals(&phase.refusals)),
            ("injected faults", injected(&phase.injected)),
            ("shed by reason", shed(&phase.shed)),
            (
                "breaker openings",
                join_or_none(phase.openings.iter().map(opening).collect()),
            ),
            ("retries spent", retries(phase)),
            ("fallbacks", fallbacks(phase)),
            ("deferred work", deferred(phase)),
            ("background", background(phase)),
            ("provider calls", providers(phase)),
            ("budgets given", budgets(phase)),
        ];
        for (label, text) in rows {
            let _ = writeln!(out, "  {label:<18} {text}");
        }
    }
    if run.skipped > 0 {
        let _ = writeln!(
            out,
            "\n  note: the load generator skipped {} requests (1024 were already in flight)",
            run.skipped
        );
    }
    if let Some(tree) = &run.save_tree {
        let _ = writeln!(
            out,
            "\n── the save's tree: the calls this run made, with demo.policy's numbers ──"
        );
        out.push_str(&tree.to_string());
    }
    if let Some(shared) = &run.shared {
        let _ = writeln!(
            out,
            "\n── two instances, one breaker (Redis) ──\n  during phase {} the second instance took {} saves over {}: its search breaker refused {} index attempts ({}), and it made {} calls to the search provider (the first instance made {} meanwhile)",
            shared.phase + 1,
            shared.saves,
            secs(shared.window),
            shared.refusals,
            if shared.cause.is_empty() {
                "no cause recorded"
            } else {
                &shared.cause
            },
            shared.calls_to_search,
            shared.calls_to_search_from_a,
        );
    }
    out
}

/// The budgets each provider was given in the phase (the propagated `x-deadline-ms`): least,
/// mean and most, and how many calls came without one.
fn budgets(phase: &PhaseReport) -> String {
    let parts: Vec<String> = phase
        .provider_budgets
        .iter()
        .filter(|(_, b)| b.with_budget + b.without_budget > 0)
        .map(|(name, b)| {
            let mut text = match b.mean() {
                Some(mean) => format!(
                    "{name} {}–{} (mean {}) over {} calls",
                    ms(b.min),
                    ms(b.max),
                    ms(mean),
                    b.with_budget
                ),
                None => format!("{name} none"),
            };
            if b.without_budget > 0 {
                let _ = write!(text, ", {} without a budget", b.without_budget);
            }
            text
        })
        .collect();
    join_or_none(parts)
}

/// The most budget each provider was given over the run.
fn most_given(run: &RunReport) -> Vec<(&'static str, Duration, u64)> {
    let mut most: Vec<(&'static str, Duration, u64)> = Vec::new();
    for phase in &run.phases {
        for (name, b) in &phase.provider_budgets {
            match most.iter_mut().find(|(n, _, _)| n == name) {
                Some((_, max, count)) => {
                    *max = (*max).max(b.max);
                    *count += b.with_budget;
                }
                None => most.push((name, b.max, b.with_budget)),
            }
        }
    }
    most
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

/// Whether a promise was kept in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// The measured numbers are within the threshold.
    Kept,
    /// They are not: the promise was broken in this run (or the machine was too busy to keep
    /// it; the numbers say which).
    NotKept,
    /// The run has no phase or data to judge it on.
    NotJudged,
}

impl Judgement {
    fn of(kept: bool) -> Self {
        if kept { Self::Kept } else { Self::NotKept }
    }

    /// How the report writes it: `KEPT`, `NOT KEPT`, `NOT JUDGED`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Kept => "KEPT",
            Self::NotKept => "NOT KEPT",
            Self::NotJudged => "NOT JUDGED",
        }
    }
}

/// One headline of the report: a promise, the threshold it is judged by (stated in the code
/// below and in the report), what the run measured, and the judgement that follows from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Kept, not kept, or not judged.
    pub judgement: Judgement,
    /// The promise, in a few words.
    pub promise: &'static str,
    /// The threshold, in words, with its numbers.
    pub threshold: String,
    /// What the run measured, in words, with its numbers.
    pub measured: String,
}

impl Verdict {
    fn new(
        kept: bool,
        promise: &'static str,
        threshold: impl Into<String>,
        measured: impl Into<String>,
    ) -> Self {
        Self {
            judgement: Judgement::of(kept),
            promise,
            threshold: threshold.into(),
            measured: measured.into(),
        }
    }

    fn not_judged(promise: &'static str, why: impl Into<String>) -> Self {
        Self {
            judgement: Judgement::NotJudged,
            promise,
            threshold: String::new(),
            measured: why.into(),
        }
    }

    /// Whether the promise was kept.
    pub fn kept(&self) -> bool {
        self.judgement == Judgement::Kept
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}. Measured: {}.",
            self.judgement.label(),
            self.promise,
            self.measured
        )?;
        if !self.threshold.is_empty() {
            write!(f, " Threshold: {}.", self.threshold)?;
        }
        Ok(())
    }
}

/// A save that waited for the slow provider would take at least its delay; saves are judged
/// against this share of it.
pub const SLOW_SAVE_SHARE_OF_DELAY: f64 = 0.5;
/// The read route's p99 in a phase where search is sick may be at most this many times its
/// healthy p99...
pub const READ_P99_FACTOR: u32 = 3;
/// ...plus this: with ~60 reads a phase the p99 is the slowest read, and one scheduler hiccup on
/// a loaded 2-core machine costs a few milliseconds. A failure of isolation would show the
/// provider's 600 ms, far above it.
pub const READ_P99_SLACK: Duration = Duration::from_millis(10);
/// How far the breaker's opening may be from the `Retry-After` the provider sent.
pub const RETRY_AFTER_TOLERANCE: Duration = Duration::from_millis(50);

fn calls_to(phase: &PhaseReport, provider: &str) -> u64 {
    phase
        .provider_calls
        .iter()
        .filter(|c| c.provider == provider)
        .map(|c| c.calls.received)
        .sum()
}

fn critical_work_only(run: &RunReport) -> Verdict {
    const PROMISE: &str = "the user waited only for critical work";
    let (Some(healthy), Some(slow)) = (run.phase("healthy"), run.phase("search slow")) else {
        return Verdict::not_judged(PROMISE, "the run has no `healthy` and `search slow` phases");
    };
    let crate::providers::Mode::Slow { delay } = slow.phase.search else {
        return Verdict::not_judged(PROMISE, "search is not slow in `search slow`");
    };
    let bound = delay.mul_f64(SLOW_SAVE_SHARE_OF_DELAY);
    let slots = run.search_limits.slots;
    let in_flight = slow
        .provider_max_in_flight
        .iter()
        .find(|(name, _)| *name == "search")
        .map_or(0, |(_, n)| *n);
    let all_ok = slow.save.ok == slow.save.count;
    Verdict::new(
        slow.save.p99 <= bound && all_ok && in_flight <= slots,
        PROMISE,
        format!(
            "with search taking {} per call, the save's p99 at most {} ({}% of it), every save answered, and search never holding more than the `search` bulkhead's {slots} calls",
            ms(delay),
            ms(bound),
            SLOW_SAVE_SHARE_OF_DELAY * 100.0
        ),
        format!(
            "save p99 {} (healthy: {}), {} of {} saves answered, at most {in_flight} search calls at once",
            ms(slow.save.p99),
            ms(healthy.save.p99),
            slow.save.ok,
            slow.save.count
        ),
    )
}

fn unrelated_unaffected(run: &RunReport) -> Verdict {
    const PROMISE: &str = "nothing unrelated slowed down";
    let Some(healthy) = run.phase("healthy") else {
        return Verdict::not_judged(PROMISE, "the run has no `healthy` phase");
    };
    let bound = healthy.read.p99 * READ_P99_FACTOR + READ_P99_SLACK;
    let sick: Vec<&PhaseReport> = run
        .phases
        .iter()
        .filter(|p| p.phase.name.starts_with("search"))
        .collect();
    if sick.is_empty() {
        return Verdict::not_judged(PROMISE, "the run has no phase where search is sick");
    }
    let over: Vec<&str> = sick
        .iter()
        .filter(|p| p.read.p99 > bound || p.read.ok < p.read.count)
        .map(|p| p.phase.name)
        .collect();
    let measured: Vec<String> = sick
        .iter()
        .map(|p| {
            format!(
                "{} {} (×{:.1}, {} of {} answered)",
                p.phase.name,
                ms(p.read.p99),
                ratio(p.read.p99, healthy.read.p99),
                p.read.ok,
                p.read.count
            )
        })
        .collect();
    let mut measured = format!(
        "the read route's p99 was {} while healthy; {}",
        ms(healthy.read.p99),
        measured.join(", ")
    );
    if !over.is_empty() {
        let _ = write!(measured, "; over the bound: {}", over.join(", "));
    }
    Verdict::new(
        over.is_empty(),
        PROMISE,
        format!(
            "in every phase where search is sick, every read answered and the read p99 at most {READ_P99_FACTOR}× its healthy p99 + {} = {}",
            ms(READ_P99_SLACK),
            ms(bound)
        ),
        measured,
    )
}

fn bounded_cost(run: &RunReport) -> Verdict {
    const PROMISE: &str = "a sick dependency cost a bounded amount";
    let Some(down) = run.phase("search down") else {
        return Verdict::not_judged(PROMISE, "the run has no `search down` phase");
    };
    let refused: u64 = down
        .refusals
        .iter()
        .filter(|c| c.kind == "breaker_open" && c.name == "search")
        .map(|c| c.count)
        .sum();
    let calls = calls_to(down, "search");
    let openings: Vec<&crate::events::Opening> = down
        .openings
        .iter()
        .filter(|o| o.breaker == "search")
        .collect();
    let limits = run.search_limits;
    let per_opening = u64::from(limits.failures_to_open + limits.slots);
    let bound = per_opening * openings.len() as u64;
    let first = openings.first().map_or_else(
        || "the breaker never opened".to_owned(),
        |o| format!("the breaker opened on {}", o.cause),
    );
    Verdict::new(
        !openings.is_empty() && refused > 0 && calls <= bound,
        PROMISE,
        format!(
            "the breaker opens and refuses, and search receives at most {per_opening} calls per opening (the {} failures that open it and the `search` bulkhead's {} calls in flight): {bound} for {}",
            limits.failures_to_open,
            limits.slots,
            count_of(openings.len() as u64, "opening")
        ),
        format!(
            "while search was down {first}, refused {} without paying a timeout, and search received {} in the whole phase",
            count_of(refused, "call"),
            count_of(calls, "call")
        ),
    )
}

/// What the save route does around `save_document` (reading the body, writing the response),
/// allowed above the tree's bound.
pub const SAVE_ROUTE_SLACK: Duration = Duration::from_millis(250);

/// The save's tree, named by its operations: `` `save_document` > `authenticate`, ... ``, its
/// calls by name (the run observes who called whom, not in which order).
fn tree_names(tree: &velocity_policy_lang::bound::Tree) -> String {
    let children: Vec<String> = tree
        .root
        .children
        .iter()
        .map(|c| format!("`{}`", c.operation))
        .collect();
    format!("`{}` > {}", tree.entry(), children.join(", "))
}

fn bound_text(bound: Option<Duration>) -> String {
    bound.map_or_else(
        || "unbounded".to_owned(),
        velocity_policy_lang::units::format_duration,
    )
}

fn save_within_its_bound(run: &RunReport) -> Verdict {
    const PROMISE: &str = "every save ended within the bound its tree states";
    let Some(tree) = &run.save_tree else {
        return Verdict::not_judged(PROMISE, "no save ran, so the run observed no tree");
    };
    let Some(bound) = tree.bound else {
        return Verdict::not_judged(PROMISE, "the save's tree has no bound");
    };
    let saves: u64 = run.phases.iter().map(|p| p.save.count).sum();
    let slowest = run
        .phases
        .iter()
        .map(|p| p.save.max)
        .max()
        .unwrap_or_default();
    let tightest = match tree.tightest.as_deref() {
        Some("request") => "the request's deadline".to_owned(),
        Some(op) => format!("`{op}`'s deadline"),
        None => "no deadline".to_owned(),
    };
    Verdict::new(
        saves > 0 && slowest <= bound + SAVE_ROUTE_SLACK,
        PROMISE,
        format!(
            "the save's tree as this run called it, with demo.policy's numbers: {} ({tightest}) with deadline propagation, plus {} for the route's own work",
            bound_text(Some(bound)),
            ms(SAVE_ROUTE_SLACK)
        ),
        format!(
            "the run called {}; the slowest of {} took {}; if each timeout stood alone it could have taken {} ({})",
            tree_names(tree),
            count_of(saves, "save"),
            ms(slowest),
            bound_text(tree.alone),
            tree.sum
        ),
    )
}

fn retry_after_honoured(run: &RunReport) -> Verdict {
    const PROMISE: &str = "a 429's Retry-After was honoured";
    let Some(limited) = run.phase("search 429") else {
        return Verdict::not_judged(PROMISE, "the run has no `search 429` phase");
    };
    let crate::providers::Mode::RateLimited { retry_after } = limited.phase.search else {
        return Verdict::not_judged(PROMISE, "search does not answer 429 in `search 429`");
    };
    let calls = calls_to(limited, "search");
    let asked = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
    let tolerance = u64::try_from(RETRY_AFTER_TOLERANCE.as_millis()).unwrap_or(u64::MAX);
    let trips: Vec<&crate::events::Opening> = limited
        .openings
        .iter()
        .filter(|o| o.breaker == "search" && o.reason == "retry_after")
        .collect();
    let as_asked = |o: &&crate::events::Opening| {
        o.open_for_ms
            .is_some_and(|m| m.abs_diff(asked) <= tolerance)
    };
    let opened_for: Vec<String> = trips.iter().map(|o| tidy(&o.open_for)).collect();
    let waited = limited
        .waited_for_cooldown
        .map(|w| {
            format!(
                " (it started after a {} pause for the breaker's cooldown)",
                secs(w)
            )
        })
        .unwrap_or_default();
    Verdict::new(
        calls > 0 && !trips.is_empty() && trips.iter().all(as_asked),
        PROMISE,
        format!(
            "search is reached (at least one call), and every opening it causes lasts its Retry-After, {}, within {}",
            ms(retry_after),
            ms(RETRY_AFTER_TOLERANCE)
        ),
        format!(
            "search received {} in the phase{waited}; the breaker opened on its Retry-After {}{}",
            count_of(calls, "call"),
            match trips.len() {
                0 => "never".to_owned(),
                1 => "once".to_owned(),
                n => format!("{n} times"),
            },
            if opened_for.is_empty() {
                String::new()
            } else {
                format!(", for {}", opened_for.join(", "))
            }
        ),
    )
}

fn shared_opening(run: &RunReport) -> Option<Verdict> {
    let shared = run.shared.as_ref()?;
    Some(Verdict::new(
        shared.saves > 0 && shared.calls_to_search == 0,
        "two instances shared one breaker",
        "the second instance, while the first instance's opening holds, takes saves and makes 0 calls to the sick provider",
        format!(
            "the second instance took {} saves while the first instance's opening held, refused {} index attempts, and made {} calls to the sick provider",
            shared.saves, shared.refusals, shared.calls_to_search
        ),
    ))
}

fn burst_sheds_optional_work(run: &RunReport) -> Verdict {
    const PROMISE: &str = "under the burst, critical work was never shed";
    let critical: u64 = run.phases.iter().map(|p| p.critical_shed_for_load).sum();
    let Some(burst) = run.phase("burst") else {
        return Verdict::not_judged(PROMISE, "the run has no `burst` phase");
    };
    let not_ok = burst.save.count - burst.save.ok;
    let visible: u64 = burst
        .save
        .others
        .iter()
        .filter(|(label, _)| label.starts_with("503"))
        .map(|(_, n)| n)
        .sum();
    let shed: u64 = burst.shed.iter().map(|c| c.count).sum();
    Verdict::new(
        critical == 0 && visible == not_ok,
        PROMISE,
        "0 critical requests shed for load in the whole run, and every save not answered refused visibly (a 503 with its reason)",
        format!(
            "{critical} critical requests shed for load; {visible} of the {not_ok} saves not answered were a 503 naming the full bulkhead; {shed} pieces of optional work shed, each with its reason; reads p50 {} and p99 {} during the burst",
            ms(burst.read.p50),
            ms(burst.read.p99)
        ),
    )
}

fn deferred_after_response(run: &RunReport) -> Verdict {
    let (after, total) = run.phases.iter().fold((0, 0), |(a, t), p| {
        let d = &p.deferred;
        (a + d.after, t + d.after + d.before + d.unmatched)
    });
    Verdict::new(
        after == total && total > 0,
        "deferred work ran after its response",
        "every deferred task starts after its own response was finished (and there was some)",
        format!("{after} of {total} deferred tasks started after their response was finished"),
    )
}

fn sessions_degrade(run: &RunReport) -> Verdict {
    const PROMISE: &str = "with the session store down, sessions degraded and reads went on";
    let Some(sessions) = run.phase("sessions down") else {
        return Verdict::not_judged(PROMISE, "the run has no `sessions down` phase");
    };
    let degraded: u64 = sessions
        .save
        .others
        .iter()
        .filter(|(label, _)| *label == Outcome::Degraded.label())
        .map(|(_, n)| n)
        .sum();
    let answered: u64 = sessions
        .fallbacks
        .iter()
        .map(|f| f.failed + f.refused + f.expired)
        .sum();
    Verdict::new(
        answered > 0
            && degraded + sessions.save.ok == sessions.save.count
            && sessions.read.ok == sessions.read.count,
        PROMISE,
        "session lookups answered by the fallback (anonymous, never wider than the token's claim), every save answered or refused as anonymous with the reason, and every read answered",
        format!(
            "{answered} session lookups degraded to anonymous; {degraded} of {} saves answered 503 with the reason (retry, not sign in again); {} of {} reads answered (p99 {})",
            sessions.save.count,
            sessions.read.ok,
            sessions.read.count,
            ms(sessions.read.p99)
        ),
    )
}

fn one_budget(run: &RunReport) -> Verdict {
    const PROMISE: &str = "every request got one budget, carried to its providers";
    let most = most_given(run);
    let given: Vec<String> = most
        .iter()
        .filter(|(_, _, count)| *count > 0)
        .map(|(name, max, count)| format!("{name} at most {} over {count} calls", ms(*max)))
        .collect();
    if given.is_empty() {
        return Verdict::not_judged(PROMISE, "no provider call carried a budget");
    }
    let over: Vec<&str> = most
        .iter()
        .filter(|(_, max, _)| *max > run.request_budget)
        .map(|(name, _, _)| *name)
        .collect();
    let mut measured = given.join(", ");
    if over.is_empty() {
        measured.push_str("; none was ever given more than the request had");
    } else {
        let _ = write!(
            measured,
            "; given more than the request had: {}",
            over.join(", ")
        );
    }
    Verdict::new(
        over.is_empty(),
        PROMISE,
        format!(
            "no provider call is given more than the request's {} (demo.policy's request stanza)",
            ms(run.request_budget)
        ),
        measured,
    )
}

/// The report's headlines: each promise judged on the run's numbers against its threshold.
pub fn findings(run: &RunReport) -> Vec<Verdict> {
    let mut out = vec![
        critical_work_only(run),
        unrelated_unaffected(run),
        bounded_cost(run),
        retry_after_honoured(run),
    ];
    out.extend(shared_opening(run));
    out.extend([
        burst_sheds_optional_work(run),
        deferred_after_response(run),
        sessions_degrade(run),
        one_budget(run),
        save_within_its_bound(run),
    ]);
    out
}

// ---- HTML --------------------------------------------------------------------------------------

fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Text written for the terminal, as HTML: escaped, and each `name` in backticks (Markdown's
/// code span) as `<code>name</code>`; an unpaired backtick is dropped, so none reaches the page.
pub fn rich(text: &str) -> String {
    let pieces: Vec<&str> = text.split('`').collect();
    // Pieces at odd positions were between a pair of backticks, unless the last is unpaired.
    let paired = pieces.len() % 2 == 1;
    let mut out = String::with_capacity(text.len() + 16);
    for (i, piece) in pieces.iter().enumerate() {
        let last = i + 1 == pieces.len();
        if i % 2 == 1 && (paired || !last) {
            let _ = write!(out, "<code>{}</code>", esc(piece));
        } else {
            out.push_str(&esc(piece));
        }
    }
    out
}

fn colour(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Ok => "#2e6bd8",
        Outcome::Degraded => "#d97706",
        Outcome::Refused(_) => "#b42318",
        _ => "#111111",
    }
}

/// A chart's time axis: a label every `step` seconds from 0 to `total`, at height `y`.
fn time_labels(svg: &mut String, total: f64, step: f64, x: impl Fn(f64) -> f64, y: f64) {
    let mut t = 0.0;
    while t <= total {
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{y:.1}" font-size="10" text-anchor="middle" fill="#5b6475">{t:.0} s</text>"##,
            x(t)
        );
        t += step;
    }
}

/// One chart: latency (log scale) over time, phases shaded, every response a dot, each
/// phase's p99 a dashed line.
fn chart(run: &RunReport, route: Route, title: &str) -> String {
    const W: f64 = 960.0;
    const H: f64 = 280.0;
    const LEFT: f64 = 56.0;
    const RIGHT: f64 = 12.0;
    const TOP: f64 = 28.0;
    const BOTTOM: f64 = 28.0;
    let samples: Vec<&Sample> = run.samples.iter().filter(|s| s.route == route).collect();
    let total = run.elapsed.as_secs_f64().max(1.0);
    let lowest = samples
        .iter()
        .map(|s| s.latency.as_secs_f64() * 1000.0)
        .fold(f64::INFINITY, f64::min)
        .clamp(0.01, 1.0);
    let highest = samples
        .iter()
        .map(|s| s.latency.as_secs_f64() * 1000.0)
        .fold(0.0, f64::max)
        .max(10.0);
    let (lo, hi) = (lowest.log10().floor(), highest.log10().ceil());
    let x = |t: f64| LEFT + (t / total) * (W - LEFT - RIGHT);
    let y = |ms: f64| {
        let v = ms.max(10f64.powf(lo)).log10();
        TOP + (1.0 - (v - lo) / (hi - lo)) * (H - TOP - BOTTOM)
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">"#,
        esc(title)
    );
    for (i, phase) in run.phases.iter().enumerate() {
        let (x0, x1) = (x(phase.started.as_secs_f64()), x(phase.ended.as_secs_f64()));
        let fill = if i % 2 == 0 { "#f4f6fa" } else { "#e9edf5" };
        let _ = write!(
            svg,
            r##"<rect x="{x0:.1}" y="{TOP}" width="{:.1}" height="{:.1}" fill="{fill}"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#5b6475">{}</text>"##,
            (x1 - x0).max(0.0),
            H - TOP - BOTTOM,
            (x0 + x1) / 2.0,
            TOP - 8.0,
            esc(phase.phase.name)
        );
        // The pause before a phase that waited for a breaker's cooldown: no load, so no dots.
        if let Some(waited) = phase.waited_for_cooldown.filter(|w| !w.is_zero()) {
            let p0 = x((phase.started.saturating_sub(waited)).as_secs_f64());
            let _ = write!(
                svg,
                r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#5b6475">paused: cooldown</text>"##,
                (p0 + x0) / 2.0,
                TOP - 8.0
            );
        }
        let stats = match route {
            Route::Save => &phase.save,
            Route::Read => &phase.read,
            Route::SaveOnB => match &phase.save_on_b {
                Some(stats) => stats,
                None => continue,
            },
        };
        if stats.count > 0 {
            let py = y(stats.p99.as_secs_f64() * 1000.0);
            let _ = write!(
                svg,
                r##"<line x1="{x0:.1}" x2="{x1:.1}" y1="{py:.1}" y2="{py:.1}" stroke="#1d2433" stroke-dasharray="4 3" stroke-width="1"><title>p99 {}</title></line>"##,
                esc(&ms(stats.p99))
            );
        }
    }
    let mut decade = lo;
    while decade <= hi {
        let v = 10f64.powf(decade);
        let py = y(v);
        let label = if v >= 1000.0 {
            format!("{} s", v / 1000.0)
        } else {
            format!("{v} ms")
        };
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}" stroke="#c9cfdb" stroke-width="0.5"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end" fill="#5b6475">{}</text>"##,
            W - RIGHT,
            LEFT - 4.0,
            py + 3.0,
            esc(&label)
        );
        decade += 1.0;
    }
    time_labels(
        &mut svg,
        total,
        if total > 30.0 { 10.0 } else { 2.0 },
        x,
        H - 10.0,
    );
    for s in &samples {
        let _ = write!(
            svg,
            r#"<circle cx="{:.1}" cy="{:.1}" r="1.6" fill="{}" fill-opacity="0.7"/>"#,
            x(s.at.as_secs_f64()),
            y(s.latency.as_secs_f64() * 1000.0),
            colour(&s.outcome)
        );
    }
    svg.push_str("</svg>");
    format!(
        "<figure><figcaption>{}</figcaption>{svg}</figure>",
        esc(title)
    )
}

fn html_phase(index: usize, count: usize, phase: &PhaseReport) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<h3>Phase {}/{count} · {}</h3><p class=\"muted\">{} ({} to {})</p>",
        index + 1,
        esc(phase.phase.name),
        esc(phase.phase.story),
        secs(phase.started),
        secs(phase.ended)
    );
    if let Some(line) = pause(phase) {
        let _ = write!(out, "<p class=\"muted\">{}</p>", rich(&line));
    }
    out.push_str("<table><thead><tr><th>route</th><th class=\"num\">requests</th><th class=\"num\">p50</th><th class=\"num\">p99</th><th class=\"num\">max</th><th>outcomes</th></tr></thead><tbody>");
    let mut routes = vec![("save", &phase.save), ("read", &phase.read)];
    if let Some(b) = &phase.save_on_b {
        routes.push(("save (b)", b));
    }
    for (label, stats) in routes {
        let _ = write!(
            out,
            "<tr><td>{label}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            stats.count,
            ms(stats.p50),
            ms(stats.p99),
            ms(stats.max),
            esc(&outcomes(stats))
        );
    }
    out.push_str("</tbody></table><table class=\"facts\"><tbody>");
    let rows = [
        ("refusals by kind", refusals(&phase.refusals)),
        ("injected faults", injected(&phase.injected)),
        ("shed decisions by reason", shed(&phase.shed)),
        (
            "breaker openings",
            join_or_none(phase.openings.iter().map(opening).collect()),
        ),
        ("retries spent", retries(phase)),
        ("fallbacks per operation", fallbacks(phase)),
        ("deferred work", deferred(phase)),
        ("background work", background(phase)),
        ("provider calls", providers(phase)),
        ("budgets given to providers", budgets(phase)),
    ];
    for (label, text) in rows {
        let _ = write!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            esc(label),
            rich(&text)
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// A self-contained page around `body`, in the reports' style.
fn page(title: &str, body: &str) -> String {
    let title = esc(title);
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ margin: 0 auto; max-width: 1000px; padding: 24px; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: #1d2433; }}
h1 {{ font-size: 22px; }} h2 {{ font-size: 18px; margin-top: 32px; }} h3 {{ font-size: 15px; margin: 24px 0 4px; }}
.muted {{ color: #5b6475; }}
figure {{ margin: 16px 0; }} figcaption {{ font-weight: 600; margin-bottom: 4px; }}
svg {{ max-width: 100%; height: auto; background: #fff; border: 1px solid #d9dee8; }}
table {{ border-collapse: collapse; width: 100%; margin: 6px 0; }}
th, td {{ text-align: left; padding: 4px 8px; border-bottom: 1px solid #e3e7ef; vertical-align: top; }}
td.num, th.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
table.facts th {{ width: 200px; color: #5b6475; font-weight: 600; }}
.findings li {{ margin: 4px 0; }}
.findings li.kept strong {{ color: #067647; }} .findings li.broken strong {{ color: #b42318; }} .findings li.unjudged strong {{ color: #b54708; }}
code {{ font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f2f4f7; padding: 0 3px; border-radius: 3px; }}
.legend .swatch {{ display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 10px; border: 1px solid #c9cfdb; vertical-align: -2px; }}
</style>
</head>
<body>
{body}
</body>
</html>
"#
    )
}

/// The HTML report: one self-contained file.
pub fn html(run: &RunReport) -> String {
    let mut body = String::new();
    body.push_str("<h1>policy demo: a document service under a sick dependency</h1>");
    let _ = write!(
        body,
        "<p class=\"muted\">{} phases over {}; every figure below was measured in this run. Each dot is one response (blue: ok, orange: degraded to anonymous, red: refused, black: other); dashed lines are each phase's p99.</p>",
        run.phases.len(),
        secs(run.elapsed)
    );
    body.push_str("<ul class=\"findings\">");
    for verdict in findings(run) {
        let class = match verdict.judgement {
            Judgement::Kept => "kept",
            Judgement::NotKept => "broken",
            Judgement::NotJudged => "unjudged",
        };
        let _ = write!(
            body,
            "<li class=\"{class}\"><strong>{}</strong>: {}. Measured: {}.",
            verdict.judgement.label(),
            rich(verdict.promise),
            rich(&verdict.measured)
        );
        if !verdict.threshold.is_empty() {
            let _ = write!(
                body,
                " <span class=\"muted\">Threshold: {}.</span>",
                rich(&verdict.threshold)
            );
        }
        body.push_str("</li>");
    }
    body.push_str("</ul>");
    if let Some(tree) = &run.save_tree {
        let _ = write!(
            body,
            "<h2>The save's tree</h2><p>What a save ran in this run (the calls the registry observed between annotated operations), with <code>demo.policy</code>'s numbers: with deadline propagation a save takes at most <strong>{}</strong>; if each timeout stood alone it could take <strong>{}</strong> ({}).</p><pre>{}</pre>",
            bound_text(tree.bound),
            bound_text(tree.alone),
            esc(&tree.sum),
            rich(&tree.to_string())
        );
    }
    body.push_str(&chart(
        run,
        Route::Save,
        "POST /documents (save): latency over time",
    ));
    body.push_str(&chart(
        run,
        Route::Read,
        "GET /documents/{id} (read, the unrelated route): latency over time",
    ));
    if run.samples.iter().any(|s| s.route == Route::SaveOnB) {
        body.push_str(&chart(
            run,
            Route::SaveOnB,
            "POST /documents on the second instance (shares its breakers through Redis)",
        ));
    }
    if let Some(shared) = &run.shared {
        let _ = write!(
            body,
            "<h2>Two instances, one breaker</h2><p>During phase {}, the second instance took {} saves over {}. Its <code>search</code> breaker refused {} index attempts ({}); it made <strong>{}</strong> calls to the search provider, while the first instance made {} in the same window.</p>",
            shared.phase + 1,
            shared.saves,
            secs(shared.window),
            shared.refusals,
            rich(&shared.cause),
            shared.calls_to_search,
            shared.calls_to_search_from_a,
        );
    }
    body.push_str("<h2>Phase by phase</h2>");
    let count = run.phases.len();
    for (index, phase) in run.phases.iter().enumerate() {
        body.push_str(&html_phase(index, count, phase));
    }
    page("policy demo report", &body)
}

// ---- the soak ----------------------------------------------------------------------------------

fn soak_route_row(row: &RouteRow) -> String {
    let mut outcomes = vec![format!("{} ok", row.ok)];
    outcomes.extend(row.others.iter().map(|(label, n)| format!("{n} {label}")));
    format!(
        "  {:<9}{:>9}  {:>8.0}  {:>9}  {:>9}  {:>9}   {}\n",
        row.route.label(),
        row.count,
        row.per_second,
        ms(row.p50),
        ms(row.p99),
        ms(row.max),
        outcomes.join(", ")
    )
}

fn machine(m: &Machine) -> String {
    let load = |l: Option<f64>| l.map_or_else(|| "unknown".to_owned(), |l| format!("{l:.1}"));
    format!(
        "{} cores, one-minute load average {} at the start and {} at the end",
        m.cores,
        load(m.load_at_start),
        load(m.load_at_end)
    )
}

/// The soak on the terminal: one table per fault, then the verdict.
pub fn soak_tables(run: &SoakReport) -> String {
    let mut out = String::new();
    // A fault the run was too short to reach has nothing to show.
    for row in run.faults.iter().filter(|f| !f.time.is_zero()) {
        let _ = writeln!(
            out,
            "\n── {} (search {}, notifier {}, sessions {}): {} in all ──",
            row.fault.name,
            row.fault.search,
            row.fault.notifier,
            row.fault.sessions,
            secs(row.time)
        );
        let _ = writeln!(
            out,
            "  {:<9}{:>9}  {:>8}  {:>9}  {:>9}  {:>9}   outcomes",
            "route", "requests", "per s", "p50", "p99", "max"
        );
        for route in &row.routes {
            out.push_str(&soak_route_row(route));
        }
    }
    let _ = writeln!(
        out,
        "\n── verdict: {} ({} requests over {}; the machine: {}) ──",
        if run.passed() { "PASS" } else { "FAIL" },
        run.requests(),
        secs(run.duration),
        machine(&run.machine)
    );
    for check in &run.verdict {
        let _ = writeln!(
            out,
            "  [{}] {}: {}",
            if check.passed { "pass" } else { "FAIL" },
            check.name,
            check.detail
        );
    }
    out
}

/// The shade of a fault's stretches in the soak's charts (one per fault of the cycle).
fn fault_fill(fault: usize) -> &'static str {
    const FILLS: [&str; 5] = ["#f4f6fa", "#fdf0dc", "#fbe4e2", "#efe6fa", "#e3f1ec"];
    FILLS[fault % FILLS.len()]
}

/// Which shade is which fault, above the soak's charts.
fn fault_legend(run: &SoakReport) -> String {
    let mut out = String::from("<p class=\"legend\">Shaded by fault: ");
    for (index, row) in run.faults.iter().enumerate() {
        let _ = write!(
            out,
            "<span class=\"swatch\" style=\"background:{}\"></span>{} ",
            fault_fill(index),
            esc(row.fault.name)
        );
    }
    out.push_str("(dotted: the end of the warm-up).</p>");
    out
}

/// A line chart of one quantity of the soak's samples over time, faults shaded, the warm-up
/// marked, and optionally a limit drawn (the memory check's).
fn soak_chart(
    run: &SoakReport,
    title: &str,
    unit: &str,
    value: impl Fn(&SoakSample) -> f64,
    limit: Option<(f64, &str)>,
) -> String {
    const W: f64 = 960.0;
    const H: f64 = 240.0;
    const LEFT: f64 = 64.0;
    const RIGHT: f64 = 12.0;
    const TOP: f64 = 28.0;
    const BOTTOM: f64 = 28.0;
    let names: Vec<&str> = run.faults.iter().map(|f| f.fault.name).collect();
    let total = run.duration.as_secs_f64().max(1.0);
    let points: Vec<(f64, f64)> = run
        .samples
        .iter()
        .map(|s| (s.at.as_secs_f64().min(total), value(s)))
        .collect();
    let highest = points
        .iter()
        .map(|p| p.1)
        .chain(limit.map(|l| l.0))
        .fold(0.0f64, f64::max);
    // A round top: 1, 2 or 5 times a power of ten, with some room above the highest value.
    let top = {
        let want = (highest * 1.15).max(1.0);
        let power = 10f64.powf(want.log10().floor());
        [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * power)
            .find(|v| *v >= want)
            .unwrap_or(10.0 * power)
    };
    let x = |t: f64| LEFT + (t / total) * (W - LEFT - RIGHT);
    let y = |v: f64| TOP + (1.0 - v / top) * (H - TOP - BOTTOM);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">"#,
        esc(title)
    );
    for band in &run.bands {
        let (x0, x1) = (x(band.from.as_secs_f64()), x(band.until.as_secs_f64()));
        let fill = fault_fill(band.fault);
        let name = names.get(band.fault).copied().unwrap_or("?");
        let _ = write!(
            svg,
            r#"<rect x="{x0:.1}" y="{TOP}" width="{:.1}" height="{:.1}" fill="{fill}"><title>{}</title></rect>"#,
            (x1 - x0).max(0.0),
            H - TOP - BOTTOM,
            esc(name)
        );
        // Fault names where there is room for them.
        if x1 - x0 > 44.0 {
            let _ = write!(
                svg,
                r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#5b6475">{}</text>"##,
                (x0 + x1) / 2.0,
                TOP - 8.0,
                esc(name)
            );
        }
    }
    // Round steps: a top of 1, 2 or 5 times a power of ten, in fifths, quarters or fifths.
    let divisions = if (top / 10f64.powf(top.log10().floor()) - 2.0).abs() < 1e-9 {
        4
    } else {
        5
    };
    for i in 0..=divisions {
        let v = top * f64::from(i) / f64::from(divisions);
        let py = y(v);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}" stroke="#c9cfdb" stroke-width="0.5"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end" fill="#5b6475">{} {}</text>"##,
            W - RIGHT,
            LEFT - 4.0,
            py + 3.0,
            if top >= 5.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            },
            esc(unit)
        );
    }
    let warm = x(run.warm_up.as_secs_f64());
    let _ = write!(
        svg,
        r##"<line x1="{warm:.1}" x2="{warm:.1}" y1="{TOP}" y2="{:.1}" stroke="#8a93a6" stroke-dasharray="2 3"><title>end of warm-up</title></line>"##,
        H - BOTTOM
    );
    if let Some((level, label)) = limit {
        let py = y(level);
        let _ = write!(
            svg,
            r##"<line x1="{warm:.1}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}" stroke="#b42318" stroke-dasharray="6 3" stroke-width="1"><title>{}</title></line>"##,
            W - RIGHT,
            esc(label)
        );
    }
    let step = match total {
        t if t > 1200.0 => 300.0,
        t if t > 300.0 => 60.0,
        t if t > 60.0 => 30.0,
        _ => 10.0,
    };
    time_labels(&mut svg, total, step, x, H - 10.0);
    let path: Vec<String> = points
        .iter()
        .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
        .collect();
    let _ = write!(
        svg,
        r##"<polyline points="{}" fill="none" stroke="#2e6bd8" stroke-width="1.5"/>"##,
        path.join(" ")
    );
    svg.push_str("</svg>");
    format!(
        "<figure><figcaption>{}</figcaption>{svg}</figure>",
        esc(title)
    )
}

/// The soak's HTML report: the verdict, memory, descriptors and tasks over time, and a table
/// per fault. One self-contained file.
pub fn soak_html(run: &SoakReport) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>policy demo soak: {}</h1><p class=\"muted\">{} requests over {} on every route while the providers' faults cycled; the service ran in a process of its own, measured every few seconds (the machine: {}). Every figure below was measured in this run.</p>",
        if run.passed() { "PASS" } else { "FAIL" },
        run.requests(),
        secs(run.duration),
        esc(&machine(&run.machine))
    );
    body.push_str("<table class=\"facts\"><tbody>");
    for check in &run.verdict {
        let _ = write!(
            body,
            "<tr><th>{}</th><td><strong>{}</strong> {}</td></tr>",
            esc(check.name),
            if check.passed { "pass" } else { "FAIL" },
            rich(&check.detail)
        );
    }
    body.push_str("</tbody></table>");
    body.push_str(&fault_legend(run));
    let reference = run
        .samples
        .iter()
        .rfind(|s| s.at <= run.warm_up)
        .map(|s| s.process.rss_bytes as f64 / (1024.0 * 1024.0));
    body.push_str(&soak_chart(
        run,
        "The service's resident memory (MB) over time; red: the limit, 10% above its level at the end of the warm-up (dotted)",
        "MB",
        |s| s.process.rss_bytes as f64 / (1024.0 * 1024.0),
        reference.map(|r| (r * 1.10, "the limit: +10%")),
    ));
    body.push_str(&soak_chart(
        run,
        "Open file descriptors",
        "",
        |s| s.process.fds as f64,
        None,
    ));
    body.push_str(&soak_chart(
        run,
        "Tasks alive on the service's tokio runtime",
        "",
        |s| s.stats.alive_tasks as f64,
        None,
    ));
    body.push_str(&soak_chart(
        run,
        "Deferred and background tasks in flight (scheduled, not yet ended)",
        "",
        |s| (s.stats.deferred.in_flight() + s.stats.background.in_flight()) as f64,
        None,
    ));
    body.push_str("<h2>Throughput and latency per fault</h2>");
    for row in run.faults.iter().filter(|f| !f.time.is_zero()) {
        let _ = write!(
            body,
            "<h3>{}</h3><p class=\"muted\">search {}, notifier {}, sessions {}; {} in all</p>",
            esc(row.fault.name),
            esc(&row.fault.search.to_string()),
            esc(&row.fault.notifier.to_string()),
            esc(&row.fault.sessions.to_string()),
            secs(row.time)
        );
        body.push_str("<table><thead><tr><th>route</th><th class=\"num\">requests</th><th class=\"num\">per second</th><th class=\"num\">p50</th><th class=\"num\">p99</th><th class=\"num\">max</th><th>outcomes</th></tr></thead><tbody>");
        for route in &row.routes {
            let mut outcomes = vec![format!("{} ok", route.ok)];
            outcomes.extend(route.others.iter().map(|(label, n)| format!("{n} {label}")));
            let _ = write!(
                body,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{:.0}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                route.route.label(),
                route.count,
                route.per_second,
                ms(route.p50),
                ms(route.p99),
                ms(route.max),
                esc(&outcomes.join(", "))
            );
        }
        body.push_str("</tbody></table>");
    }
    page("policy demo soak report", &body)
}

#[cfg(test)]
mod tests {
    use super::rich;

    #[test]
    fn backticks_become_code_and_never_reach_the_page() {
        assert_eq!(
            rich("breaker `search` at 3.8 s"),
            "breaker <code>search</code> at 3.8 s"
        );
        assert_eq!(
            rich("`a<b>` and `c`"),
            "<code>a&lt;b&gt;</code> and <code>c</code>"
        );
        // An unpaired backtick is dropped, the text kept.
        assert_eq!(rich("`a` and `b"), "<code>a</code> and b");
        assert_eq!(rich("no code"), "no code");
    }
}
