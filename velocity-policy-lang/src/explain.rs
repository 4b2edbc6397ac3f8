//! What an operation does, in the order the runtime does it, and how long it can take.
//!
//! # The bounds
//!
//! With `N` attempts (1 without retry), `T` the attempt timeout, `D_op` the operation's deadline,
//! `D_req` the request's, and `B_k = min(cap, base × 2^(k-1))` the longest backoff after attempt
//! `k` (full jitter waits a random time in `[0, B_k]`):
//!
//! * **without deadline propagation** every layer waits out its own timeout, and they add up:
//!   `N × t + (B_1 + ... + B_(N-1))`, where `t` is `T`, or `D_op` when there is no attempt
//!   timeout (each attempt then gets the whole operation timeout), or `D_req` when the operation
//!   has no deadline either (critical work only); unbounded when there is none. An operation
//!   alone calls nothing: the operations it calls, and what they add to its attempt's `t`, are
//!   the [`bound`](crate::bound) module's trees.
//! * **with deadline propagation** every attempt and every backoff draws from one budget, which
//!   is clamped by the request's: `min(D_op, D_req, the sum above)`.
//!
//! A hedge (`after = H`, `max = M` attempts in flight) runs each attempt up to `M` times at
//! once, the `j`th starting `(j - 1) × H` after the first: an attempt then ends by
//! `t + (M - 1) × H` at worst, and that replaces `t` above. A percentile delay has no fixed
//! value; the runtime starts no hedge whose delay ends past the deadline, so `H` is taken as
//! `t`. With deadline propagation every hedge shares the one budget and the bound does not grow.
//!
//! `D_req` applies to critical work only: deferred and background work runs after the response,
//! outside the request's budget, under its own deadline.

use std::fmt;
use std::time::Duration;

use crate::source::Located;
use crate::spec::{
    AllowanceConfig, Backoff, FailMode, HedgeDelay, OperationSpec, PoolKind, QueueSpec, Rate, Spec,
    WorkClass,
};
use crate::units::{format_duration, format_ratio};

/// One step of an operation's chain.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Step {
    /// Background work on a durable queue: the call enqueues its arguments, and whichever
    /// instance's worker takes the task runs the steps after this one.
    Enqueue {
        /// The queue's name.
        queue: String,
        /// Whether a `queue` stanza declares it (otherwise the numbers are the runtime's
        /// defaults).
        declared: bool,
        /// Unfinished tasks the stream may hold; an enqueue past it is refused.
        max_len: u32,
        /// How long a delivered task may stay unacknowledged before another worker claims it.
        visibility_timeout: Duration,
        /// Deliveries after which an unfinished task is dead-lettered.
        max_deliveries: u32,
        /// The bound on one delivery's run (at most four fifths of the visibility timeout).
        task_deadline: Duration,
        /// Tasks one instance's worker runs at once.
        concurrency: u32,
    },
    /// The admission decision: load for deferred and background work, budget for all.
    Shed {
        /// The operation's class.
        class: WorkClass,
        /// The load at which it is shed (`None`: critical work is never shed for load).
        load_threshold: Option<f64>,
        /// Refused if less than this remains of the deadline.
        min_budget: Option<Duration>,
        /// What it usually costs, weighed against the remaining budget.
        expected_cost: Option<Duration>,
    },
    /// The rate limit admits the call once, after the deadline and shedding and before any
    /// attempt: in process on each instance, or across the fleet with a limiter store.
    RateLimit {
        /// Its name.
        name: String,
        /// Its rate.
        rate: Rate,
        /// What happens when its fleet store is slow (`local` when not set).
        on_timeout: FailMode,
        /// What happens when its fleet store is down (`local` when not set).
        on_error: FailMode,
        /// The rate this instance keeps alone while the store fails, when a mode is `local`
        /// (the fleet's rate unless set).
        local_rate: Rate,
    },
    /// The retry loop; the steps after it run once per attempt.
    Retry {
        /// Its name.
        name: String,
        /// Total attempts.
        attempts: u32,
        /// The backoff between attempts.
        backoff: Backoff,
    },
    /// The hedge: each attempt again, at once, when it has not answered in time; the steps
    /// after it run once per attempt in flight.
    Hedge {
        /// Its name.
        name: String,
        /// When a hedge starts.
        after: HedgeDelay,
        /// Attempts in flight at most, the first included.
        max: u32,
        /// The retry policy whose allowance the hedges draw from, if the operation retries.
        shares_with: Option<String>,
        /// Its own allowance, when set and the operation does not retry (the runtime's
        /// default, 20% + 10/s, otherwise).
        allowance: Option<AllowanceConfig>,
    },
    /// The breaker refuses while open.
    BreakerCheck {
        /// Its name.
        name: String,
        /// The longest `Retry-After` it honours, when set (the runtime's 5 minutes otherwise).
        max_retry_after: Option<Duration>,
    },
    /// A permit from the bulkhead, or a refusal when it and its queue are full.
    BulkheadPermit {
        /// Its name.
        name: String,
        /// Its slots (an adaptive bulkhead's most).
        max_concurrent: u32,
        /// Its queue.
        max_queued: u32,
        /// An adaptive bulkhead's fewest slots: its count moves from there up to
        /// `max_concurrent`, following the dependency's latency.
        adaptive_min: Option<u32>,
    },
    /// A chaos drill's draw (only in builds with the runtime's `chaos` feature): its faults
    /// are injected here, inside the attempt, as the mechanisms around it would see real ones.
    Chaos {
        /// Its name.
        name: String,
        /// Its faults, as written (`latency 600ms at 100%`, `error at 5%`).
        faults: Vec<String>,
        /// Whether it is declared off (`enabled = false`), to be switched on at run time.
        off: bool,
    },
    /// The attempt runs in a child of the deadline.
    Run {
        /// The attempt timeout, if any.
        attempt_timeout: Option<Duration>,
        /// The effective deadline the child is clamped to, if any.
        deadline: Option<Duration>,
        /// A poll of the work longer than this is reported as blocking its worker.
        poll_budget: Option<Duration>,
    },
    /// The outcome is recorded in the breaker.
    RecordOutcome {
        /// The breaker.
        breaker: String,
    },
    /// What answers when the work cannot: its fallback, a stale result, or both.
    Answer {
        /// The fallback function, if any.
        fallback: Option<String>,
        /// Whether the fallback also answers the work's own failures.
        on_failure: bool,
        /// How old a stale result may be, with stale-if-error.
        stale_if_error: Option<Duration>,
    },
    /// Isolated CPU work: the synchronous body runs on a bounded pool, waited for within the
    /// caller's deadline.
    Isolate {
        /// Which pool.
        pool: PoolKind,
        /// Work at once (`None`: as many as the machine has CPUs).
        max_concurrent: Option<u32>,
        /// Work that may wait (`None`: none).
        max_queued: Option<u32>,
    },
}

/// An operation's chain and its worst-case latency bounds.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Explanation {
    /// The operation.
    pub operation: String,
    /// Its class.
    pub class: WorkClass,
    /// Its flags (`idempotent`, `durable`).
    pub flags: Vec<&'static str>,
    /// The steps, in the order the runtime runs them.
    pub steps: Vec<Step>,
    /// Total attempts (1 without retry).
    pub attempts: u32,
    /// The bound with deadline propagation (`None`: unbounded).
    pub bound: Option<Duration>,
    /// The bound the same timeouts give without deadline propagation (`None`: unbounded).
    pub bound_without_propagation: Option<Duration>,
    /// How the second bound adds up, such as `3 × 2s + 50ms + 100ms`.
    pub sum: String,
}

/// Explains every operation of `spec`, in declaration order.
#[must_use]
pub fn explain_all(spec: &Spec) -> Vec<Explanation> {
    spec.operations
        .iter()
        .map(|operation| explain(spec, operation))
        .collect()
}

/// Explains one operation. References that do not resolve are left out of the chain (the
/// validator reports them).
#[must_use]
pub fn explain(spec: &Spec, operation: &OperationSpec) -> Explanation {
    let class = operation.class.value;
    if let Some(isolate) = &operation.isolate {
        return Explanation {
            operation: operation.name.value.clone(),
            class,
            flags: Vec::new(),
            steps: vec![Step::Isolate {
                pool: isolate.pool.value,
                max_concurrent: isolate.max_concurrent.as_ref().map(|m| m.value),
                max_queued: isolate.max_queued.as_ref().map(|m| m.value),
            }],
            attempts: 1,
            bound: None,
            bound_without_propagation: None,
            sum: "waited for within the caller's deadline; the work itself runs on".to_owned(),
        };
    }
    let (deferred, background) = spec.shedding_thresholds();
    let mut steps: Vec<Step> = operation
        .queue
        .iter()
        .filter(|_| class == WorkClass::Background)
        .map(|queue| {
            let declared = spec.queues.get(&queue.value);
            let numbers = declared.cloned().unwrap_or_else(|| {
                QueueSpec::new(Located::new(queue.value.clone(), queue.loc), queue.loc)
            });
            Step::Enqueue {
                queue: queue.value.clone(),
                declared: declared.is_some(),
                max_len: numbers.effective_max_len(),
                visibility_timeout: numbers.effective_visibility_timeout(),
                max_deliveries: numbers.effective_max_deliveries(),
                task_deadline: numbers.effective_task_deadline(),
                concurrency: numbers.effective_concurrency(),
            }
        })
        .collect();
    steps.push(Step::Shed {
        class,
        load_threshold: match class {
            WorkClass::Critical => None,
            WorkClass::Deferred => Some(deferred),
            WorkClass::Background => Some(background),
        },
        min_budget: operation.min_budget.as_ref().map(|d| d.value),
        expected_cost: operation.expected_cost.as_ref().map(|d| d.value),
    });
    if let Some(ratelimit) = operation
        .ratelimit
        .as_ref()
        .and_then(|name| spec.ratelimits.get(&name.value))
    {
        steps.push(Step::RateLimit {
            name: ratelimit.name.value.clone(),
            rate: ratelimit.rate().value,
            on_timeout: ratelimit.timeout_mode(),
            on_error: ratelimit.error_mode(),
            local_rate: {
                let (count, per) = ratelimit.config.local_rate_or_rate();
                Rate::new(count, per)
            },
        });
    }
    let retry = operation
        .retry
        .as_ref()
        .and_then(|name| spec.retries.get(&name.value));
    if let Some(retry) = retry {
        steps.push(Step::Retry {
            name: retry.name.value.clone(),
            attempts: retry.config.attempts,
            backoff: retry.config.backoff,
        });
    }
    let hedge = operation
        .hedge
        .as_ref()
        .and_then(|name| spec.hedges.get(&name.value));
    if let Some(hedge) = hedge {
        steps.push(Step::Hedge {
            name: hedge.name.value.clone(),
            after: hedge.config.after,
            max: hedge.config.max,
            shares_with: retry.map(|retry| retry.name.value.clone()),
            allowance: hedge.config.allowance,
        });
    }
    let breaker = operation
        .breaker
        .as_ref()
        .and_then(|name| spec.breakers.get(&name.value));
    if let Some(breaker) = breaker {
        steps.push(Step::BreakerCheck {
            name: breaker.name.value.clone(),
            max_retry_after: breaker.max_retry_after().map(|d| d.value),
        });
    }
    if let Some(bulkhead) = operation
        .bulkhead
        .as_ref()
        .and_then(|name| spec.bulkheads.get(&name.value))
    {
        steps.push(Step::BulkheadPermit {
            name: bulkhead.name.value.clone(),
            max_concurrent: bulkhead.max_concurrent().value,
            max_queued: bulkhead.max_queued().value,
            adaptive_min: bulkhead.config.adaptive.map(|adaptive| adaptive.min),
        });
    }
    if let Some(chaos) = operation
        .chaos
        .as_ref()
        .and_then(|name| spec.chaos.get(&name.value))
    {
        steps.push(Step::Chaos {
            name: chaos.name.value.clone(),
            faults: chaos.faults.iter().map(chaos_fault).collect(),
            off: chaos.enabled.as_ref().is_some_and(|on| !on.value),
        });
    }
    let attempt_timeout = retry.and_then(|retry| retry.config.attempt_timeout);
    let deadline = spec.effective_deadline(operation);
    steps.push(Step::Run {
        attempt_timeout,
        deadline,
        poll_budget: operation.poll_budget.as_ref().map(|d| d.value),
    });
    if let Some(breaker) = breaker {
        steps.push(Step::RecordOutcome {
            breaker: breaker.name.value.clone(),
        });
    }
    if operation.fallback.is_some() || operation.stale_if_error.is_some() {
        steps.push(Step::Answer {
            fallback: operation.fallback.as_ref().map(|f| f.value.clone()),
            on_failure: operation.fallback_on_failure.is_some(),
            stale_if_error: operation.stale_if_error.as_ref().map(|d| d.value),
        });
    }

    let attempts = retry.map_or(1, |retry| retry.config.attempts);
    let backoffs: Vec<Duration> = retry.map_or_else(Vec::new, |retry| {
        (1..attempts)
            .map(|k| retry.config.backoff.max_delay_after(k))
            .collect()
    });
    let per_attempt = attempt_timeout
        .or_else(|| operation.deadline.as_ref().map(|d| d.value))
        .or(deadline);
    // A hedged attempt ends by `t + (M - 1) × H` at worst; a percentile `H` counts as `t`.
    let hedging = hedge
        .filter(|hedge| hedge.config.max > 1)
        .map(|hedge| (hedge.config.max - 1, hedge.config.after));
    let hedge_delay = |t: Duration| match hedging {
        Some((_, HedgeDelay::After(h))) => h,
        _ => t,
    };
    let attempt_bound = |t: Duration| match hedging {
        Some((extra, _)) => t.saturating_add(hedge_delay(t).saturating_mul(extra)),
        None => t,
    };
    let bound_without_propagation = per_attempt.map(|t| {
        backoffs
            .iter()
            .fold(attempt_bound(t).saturating_mul(attempts), |sum, b| {
                sum.saturating_add(*b)
            })
    });
    let attempt_text = |t: Duration| match hedging {
        Some((extra, after)) => {
            let h = format_duration(hedge_delay(t));
            let h = match after {
                HedgeDelay::After(_) => h,
                HedgeDelay::Percentile(p) => format!("{h} for p{p}"),
            };
            let hedges = if extra == 1 {
                h
            } else {
                format!("{extra} × {h}")
            };
            format!("({} + {hedges})", format_duration(t))
        }
        None => format_duration(t),
    };
    let sum = match per_attempt {
        Some(t) => std::iter::once(format!("{attempts} × {}", attempt_text(t)))
            .chain(backoffs.iter().map(|b| format_duration(*b)))
            .collect::<Vec<_>>()
            .join(" + "),
        None => "no timeout anywhere".to_owned(),
    };
    let bound = [deadline, bound_without_propagation]
        .into_iter()
        .flatten()
        .min();
    let mut flags = Vec::new();
    if operation.is_idempotent() {
        flags.push("idempotent");
    }
    if operation.is_durable() {
        flags.push("durable");
    }
    Explanation {
        operation: operation.name.value.clone(),
        class,
        flags,
        steps,
        attempts,
        bound,
        bound_without_propagation,
        sum,
    }
}

fn bound_text(bound: Option<Duration>) -> String {
    bound.map_or_else(|| "unbounded".to_owned(), format_duration)
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Shed {
                class,
                load_threshold,
                min_budget,
                expected_cost,
            } => {
                match load_threshold {
                    None => write!(f, "shedding: never shed for load ({class})")?,
                    Some(threshold) => write!(
                        f,
                        "shedding: shed when load reaches {} ({class})",
                        format_ratio(*threshold)
                    )?,
                }
                if let Some(min_budget) = min_budget {
                    write!(
                        f,
                        "; refused if less than {} of the deadline remains",
                        format_duration(*min_budget)
                    )?;
                }
                if let Some(cost) = expected_cost {
                    write!(
                        f,
                        "; shed if {} of expected cost does not fit",
                        format_duration(*cost)
                    )?;
                }
                Ok(())
            }
            Step::RateLimit {
                name,
                rate,
                on_timeout,
                on_error,
                local_rate,
            } => {
                write!(
                    f,
                    "ratelimit `{name}`: admit {} per {}, refuse past that with the wait; on each instance, or across the fleet with a limiter store: when the store is slow: {on_timeout}, when it is down: {on_error}",
                    rate.count,
                    format_duration(rate.per)
                )?;
                if [on_timeout, on_error].contains(&&FailMode::Local) {
                    write!(
                        f,
                        " (locally: {} per {} on each instance)",
                        local_rate.count,
                        format_duration(local_rate.per)
                    )?;
                }
                Ok(())
            }
            Step::Retry {
                name,
                attempts,
                backoff,
            } => {
                write!(
                    f,
                    "retry `{name}`: up to {attempts} attempts, full jitter backoff (base {}, cap {}); each attempt:",
                    format_duration(backoff.base()),
                    format_duration(backoff.cap())
                )
            }
            Step::Hedge {
                name,
                after,
                max,
                shares_with,
                allowance,
            } => {
                let when = match after {
                    HedgeDelay::After(d) => format!("{} without an answer", format_duration(*d)),
                    HedgeDelay::Percentile(p) => {
                        format!("the operation's p{p} latency without an answer")
                    }
                };
                write!(
                    f,
                    "hedge `{name}`: another attempt after {when}, at most {max} in flight; the first answer wins, the others are dropped; hedges draw from "
                )?;
                match (shares_with, allowance) {
                    (Some(retry), _) => write!(f, "retry `{retry}`'s allowance")?,
                    (None, Some(a)) => write!(
                        f,
                        "an allowance of {}% + {}/s",
                        format_ratio(a.ratio * 100.0),
                        a.floor_per_second
                    )?,
                    (None, None) => f.write_str("an allowance of 20% + 10/s")?,
                }
                f.write_str("; each attempt:")
            }
            Step::Chaos { name, faults, off } => write!(
                f,
                "chaos `{name}` (feature `chaos`{}): inject {}, marked injected",
                if *off { ", declared off" } else { "" },
                faults.join(", ")
            ),
            Step::BreakerCheck {
                name,
                max_retry_after,
            } => {
                write!(f, "breaker `{name}`: refuse while open")?;
                if let Some(max) = max_retry_after {
                    write!(
                        f,
                        " (a `Retry-After` opens it for at most {})",
                        format_duration(*max)
                    )?;
                }
                Ok(())
            }
            Step::BulkheadPermit {
                name,
                max_concurrent,
                max_queued,
                adaptive_min: None,
            } => write!(
                f,
                "bulkhead `{name}`: take a permit ({max_concurrent} at once, {max_queued} queued, refuse past that)"
            ),
            Step::BulkheadPermit {
                name,
                max_concurrent,
                max_queued,
                adaptive_min: Some(min),
            } => write!(
                f,
                "bulkhead `{name}`: take a permit (between {min} and {max_concurrent} at once, following the dependency's latency; {max_queued} queued, refuse past that)"
            ),
            Step::Run {
                attempt_timeout,
                deadline,
                poll_budget,
            } => {
                match (attempt_timeout, deadline) {
                    (Some(timeout), Some(deadline)) => write!(
                        f,
                        "deadline: run for at most {} per attempt, within what remains of {}",
                        format_duration(*timeout),
                        format_duration(*deadline)
                    ),
                    (Some(timeout), None) => write!(
                        f,
                        "deadline: run for at most {} per attempt",
                        format_duration(*timeout)
                    ),
                    (None, Some(deadline)) => write!(
                        f,
                        "deadline: run within what remains of {}",
                        format_duration(*deadline)
                    ),
                    (None, None) => write!(f, "run with no deadline"),
                }?;
                if let Some(budget) = poll_budget {
                    write!(
                        f,
                        "; a poll longer than {} is reported as blocking its worker",
                        format_duration(*budget)
                    )?;
                }
                Ok(())
            }
            Step::RecordOutcome { breaker } => write!(f, "breaker `{breaker}`: record the outcome"),
            Step::Answer {
                fallback,
                on_failure,
                stale_if_error,
            } => {
                if let Some(window) = stale_if_error {
                    write!(
                        f,
                        "when refused, expired or failed: the last good result, if at most {} old",
                        format_duration(*window)
                    )?;
                    if fallback.is_some() {
                        f.write_str("; otherwise ")?;
                    }
                }
                if let Some(fallback) = fallback {
                    let whom = if *on_failure {
                        "refused, expired or failed"
                    } else {
                        "refused or expired"
                    };
                    write!(f, "when {whom}: answered by `{fallback}`")?;
                }
                Ok(())
            }
            Step::Enqueue {
                queue,
                declared,
                max_len,
                visibility_timeout,
                max_deliveries,
                task_deadline,
                concurrency,
            } => write!(
                f,
                "queue `{queue}`: enqueue the arguments on the durable queue (acknowledged by Redis, or refused when full or unreachable: at most {max_len} unfinished tasks); a worker on any instance runs the rest, at least once ({concurrency} at once per instance, each delivery within {}, claimed again after {} unacknowledged, dead-lettered after {max_deliveries} deliveries{}) (the in-process pool while no queue is installed)",
                format_duration(*task_deadline),
                format_duration(*visibility_timeout),
                if *declared {
                    ""
                } else {
                    "; the runtime's defaults: no `queue` stanza declares it"
                }
            ),
            Step::Isolate {
                pool,
                max_concurrent,
                max_queued,
            } => {
                write!(f, "isolate: run on the `{pool}` pool (")?;
                match max_concurrent {
                    Some(n) => write!(f, "{n} at once")?,
                    None => f.write_str("as many at once as the machine has CPUs")?,
                }
                write!(
                    f,
                    ", {} queued, refuse past that), waited for at most until the caller's deadline",
                    max_queued.unwrap_or(0)
                )
            }
        }
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "operation {}: {}", self.operation, self.class)?;
        for flag in &self.flags {
            write!(f, ", {flag}")?;
        }
        writeln!(f)?;
        let mut number = 0;
        let mut letter = None;
        for step in &self.steps {
            if matches!(step, Step::Answer { .. }) {
                // What answers comes after the attempts, once.
                letter = None;
            }
            match letter.as_mut() {
                None => {
                    number += 1;
                    writeln!(f, "  {number}. {step}")?;
                }
                Some(letter) => {
                    writeln!(f, "     {letter}. {step}")?;
                    *letter = char::from_u32(u32::from(*letter) + 1).unwrap_or('?');
                }
            }
            if matches!(step, Step::Retry { .. })
                || (letter.is_none() && matches!(step, Step::Hedge { .. }))
            {
                letter = Some('a');
            }
        }
        writeln!(
            f,
            "  worst case with deadline propagation:    {}",
            bound_text(self.bound)
        )?;
        writeln!(
            f,
            "  worst case if each timeout stood alone:  {} ({})",
            bound_text(self.bound_without_propagation),
            self.sum
        )
    }
}

/// A chaos fault as the stanza writes it.
fn chaos_fault(fault: &crate::spec::ChaosFault) -> String {
    use crate::spec::{ChaosFaultKind, ChaosLatency};
    let rate = format!("{}%", format_ratio(fault.rate.value * 100.0));
    match fault.kind {
        ChaosFaultKind::Latency(ChaosLatency::Fixed(d)) => {
            format!("latency {} at {rate}", format_duration(d))
        }
        ChaosFaultKind::Latency(ChaosLatency::Uniform { min, max }) => format!(
            "latency {} to {} at {rate}",
            format_duration(min),
            format_duration(max)
        ),
        ChaosFaultKind::Latency(ChaosLatency::LogNormal { p50, p99 }) => format!(
            "latency p50 {} p99 {} at {rate}",
            format_duration(p50),
            format_duration(p99)
        ),
        ChaosFaultKind::TooManyRequests { retry_after } => {
            format!("429 retry after {} at {rate}", format_duration(retry_after))
        }
        ChaosFaultKind::Error => format!("error at {rate}"),
        ChaosFaultKind::Refuse => format!("refusal at {rate}"),
    }
}
