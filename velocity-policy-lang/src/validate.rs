//! The one validator: rules that hold for a [`Spec`] whichever front end built it.
//!
//! Each rule is one function, with one code and one test. Rules read the spec and push
//! diagnostics; [`validate`] runs them all, so every problem is reported in one run.

use std::collections::HashMap;
use std::time::Duration;

use crate::diagnostic::{Diagnostic, Kind, Report};
use crate::source::{Loc, Located};
use crate::spec::HopSpec;
use crate::spec::{
    Backoff, Items, MechanismSpec, Named, Number, OpenAfter, OperationSpec, Range, Sharing, Spec,
    WorkClass,
};
use crate::suggest;
use crate::units::{format_duration, format_ratio, format_size};
use velocity_policy_model::queue_defaults;

type Rule = fn(&Spec, &mut Vec<Diagnostic>);

/// Every rule, in the order they run.
const RULES: &[Rule] = &[
    references_exist,
    retry_requires_idempotent,
    hedge_requires_idempotent,
    settings_in_range,
    chaos_well_formed,
    deferred_requires_idempotent,
    durable_requires_critical,
    retry_requires_deadline,
    min_budget_within_deadline,
    attempt_timeout_within_deadline,
    request_min_budget_within_deadline,
    durations_positive,
    attempts_at_least_one,
    counts_at_least_one,
    adaptive_or_fixed,
    adaptive_bounds_ordered,
    ratios_in_range,
    headrooms_in_range,
    shedding_thresholds_in_range,
    shedding_thresholds_ordered,
    critical_never_shed_for_load,
    critical_ratelimit_chooses_fail_modes,
    fallbacks_answer_a_caller,
    isolate_stands_alone,
    queue_is_for_background_work,
    task_deadline_within_visibility,
    queue_declared,
    backoff_base_within_cap,
    asset_sizes_positive,
    one_hop_per_variable,
    deadline_within_request,
    attempts_reachable,
    queue_absorbs_burst,
    large_image_below_max,
];

/// A queue longer than this many times the concurrency stores a backlog
/// (`policy::queue-stores-backlog`).
pub const BACKLOG_FACTOR: u32 = 4;

/// Checks every rule against `spec`; errors and warnings come back separately.
#[must_use]
pub fn validate(spec: &Spec) -> Report {
    let mut diagnostics = Vec::new();
    for rule in RULES {
        rule(spec, &mut diagnostics);
    }
    Report::from_diagnostics(diagnostics)
}

fn effective_deadline(spec: &Spec, operation: &OperationSpec) -> Option<Located<Duration>> {
    spec.governing_deadline(operation).cloned()
}

// ---- errors -----------------------------------------------------------------------------------

/// `policy::unknown-name`: an operation names a breaker, bulkhead, retry, hedge or rate limit that is
/// not defined.
///
/// Each reference is one hash lookup; only an unknown name is compared with the names of its
/// kind, for the "did you mean". Those comparisons are the one cost that grows with the product
/// of two counts (unknown references × names), so they are remembered per name and bounded by
/// [`SUGGESTION_BUDGET`]: past it, in a file of thousands of unknown names, the help names the
/// fix without a suggestion.
fn references_exist(spec: &Spec, out: &mut Vec<Diagnostic>) {
    let mut suggestions = Suggestions::default();
    for operation in &spec.operations {
        reference_exists(out, &mut suggestions, &operation.breaker, &spec.breakers);
        reference_exists(out, &mut suggestions, &operation.bulkhead, &spec.bulkheads);
        reference_exists(out, &mut suggestions, &operation.retry, &spec.retries);
        reference_exists(out, &mut suggestions, &operation.hedge, &spec.hedges);
        reference_exists(out, &mut suggestions, &operation.chaos, &spec.chaos);
        reference_exists(
            out,
            &mut suggestions,
            &operation.ratelimit,
            &spec.ratelimits,
        );
    }
}

/// The work the "did you mean" of unknown names may do in one validation, in comparisons of
/// two names: one for short names, up to 65 for names of 64 characters (the longest compared).
/// About 25 ms in a release build.
pub const SUGGESTION_BUDGET: usize = 100_000;

/// [`SUGGESTION_BUDGET`] units one comparison of two names costs.
fn comparison_cost(a: usize, b: usize) -> usize {
    1 + a.min(64) * b.min(64) / 64
}

/// The "did you mean" of unknown names found so far, and what is left of the budget.
struct Suggestions<'s> {
    known: HashMap<(&'static str, &'s str), Option<&'s str>>,
    left: usize,
}

impl Default for Suggestions<'_> {
    fn default() -> Self {
        Suggestions {
            known: HashMap::new(),
            left: SUGGESTION_BUDGET,
        }
    }
}

impl<'s> Suggestions<'s> {
    /// The name of `items` closest to `name`, if one is close and the budget allows the search.
    fn closest<T: Named>(&mut self, name: &'s str, items: &'s Items<T>) -> Option<&'s str> {
        if let Some(known) = self.known.get(&(T::KIND, name)) {
            return *known;
        }
        let length = name.chars().count();
        let cost = items
            .names()
            .map(|candidate| comparison_cost(length, candidate.len()))
            .sum::<usize>();
        let found = if cost <= self.left {
            self.left -= cost;
            suggest::closest(name, items.names())
        } else {
            None
        };
        self.known.insert((T::KIND, name), found);
        found
    }
}

fn reference_exists<'s, T: Named>(
    out: &mut Vec<Diagnostic>,
    suggestions: &mut Suggestions<'s>,
    reference: &'s Option<Located<String>>,
    items: &'s Items<T>,
) {
    let Some(reference) = reference else { return };
    if items.get(&reference.value).is_some() {
        return;
    }
    let kind = T::KIND;
    let help = match suggestions.closest(&reference.value, items) {
        Some(name) => format!("did you mean `{name}`?"),
        None => format!(
            "define it with `{kind} {} {{ ... }}`, or name an existing {kind}",
            reference.value
        ),
    };
    out.push(Diagnostic::new(
        Kind::UnknownName {
            kind: kind.to_owned(),
            name: reference.value.clone(),
            help,
        },
        reference.loc,
        format!("no {kind} has this name"),
    ));
}

/// `policy::retry-not-idempotent`: retrying work that may have succeeded unseen.
fn retry_requires_idempotent(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        if let (Some(retry), false) = (&operation.retry, operation.is_idempotent()) {
            out.push(
                Diagnostic::new(
                    Kind::RetryNotIdempotent {
                        operation: operation.name.value.clone(),
                        retry: retry.value.clone(),
                    },
                    retry.loc,
                    "retried here",
                )
                .with_label(operation.name.loc, "not marked `idempotent`"),
            );
        }
    }
}

/// `policy::hedge-not-idempotent`: a hedge runs the work twice at once, on purpose.
fn hedge_requires_idempotent(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        if let (Some(hedge), false) = (&operation.hedge, operation.is_idempotent()) {
            out.push(
                Diagnostic::new(
                    Kind::HedgeNotIdempotent {
                        operation: operation.name.value.clone(),
                        hedge: hedge.value.clone(),
                    },
                    hedge.loc,
                    "hedged here",
                )
                .with_label(operation.name.loc, "not marked `idempotent`"),
            );
        }
    }
}

/// `policy::chaos-rate-out-of-range`, `policy::chaos-empty`, `policy::chaos-range-reversed`:
/// a drill's rates are shares from 0 to 100%, it injects something, and its ranges run forward.
fn chaos_well_formed(spec: &Spec, out: &mut Vec<Diagnostic>) {
    use crate::spec::{ChaosFaultKind, ChaosLatency};
    for chaos in &spec.chaos {
        let name = &chaos.name.value;
        let mut check = |what: &str, rate: &Located<f64>| {
            if !(0.0..=1.0).contains(&rate.value) {
                out.push(Diagnostic::new(
                    Kind::ChaosRateOutOfRange {
                        chaos: name.clone(),
                        what: what.to_owned(),
                        found: format!("{}%", format_ratio(rate.value * 100.0)),
                    },
                    rate.loc,
                    "out of range",
                ));
            }
        };
        for fault in &chaos.faults {
            check(fault.kind.keyword(), &fault.rate);
        }
        if let Some(instances) = &chaos.instances {
            check("instances", instances);
        }
        if chaos.faults.is_empty() {
            out.push(Diagnostic::new(
                Kind::ChaosEmpty {
                    chaos: name.clone(),
                },
                chaos.name.loc,
                "no fault",
            ));
        }
        let mut reversed = |what: &str, example: String, loc: Loc| {
            out.push(Diagnostic::new(
                Kind::ChaosRangeReversed {
                    chaos: name.clone(),
                    what: what.to_owned(),
                    example,
                },
                loc,
                "reversed",
            ));
        };
        if let Some(during) = &chaos.during {
            let (from, until) = during.value;
            if until <= from {
                reversed(
                    "during",
                    format!(
                        "during = {} to {}",
                        format_duration(until),
                        format_duration(from)
                    ),
                    during.loc,
                );
            }
        }
        for fault in &chaos.faults {
            match fault.kind {
                ChaosFaultKind::Latency(ChaosLatency::Uniform { min, max }) if max < min => {
                    reversed(
                        "uniform",
                        format!(
                            "uniform({}, {})",
                            format_duration(max),
                            format_duration(min)
                        ),
                        fault.loc,
                    );
                }
                ChaosFaultKind::Latency(ChaosLatency::LogNormal { p50, p99 }) if p99 < p50 => {
                    reversed(
                        "lognormal",
                        format!(
                            "lognormal(p50 = {}, p99 = {})",
                            format_duration(p99),
                            format_duration(p50)
                        ),
                        fault.loc,
                    );
                }
                _ => {}
            }
        }
    }
}

/// Each setting of a mechanism's table within its row's [`Range`], as the model describes it:
/// `policy::duration-not-positive` for a zero `attempt_timeout` or `max_retry_after`,
/// `policy::hedge-max-out-of-range` for a hedge's `max`, and whatever a new row says. The value
/// in force is checked, at where it was written (at the stanza, for a default).
fn settings_in_range(spec: &Spec, out: &mut Vec<Diagnostic>) {
    table_in_range(&spec.breakers, out);
    table_in_range(&spec.bulkheads, out);
    table_in_range(&spec.retries, out);
    table_in_range(&spec.hedges, out);
}

fn table_in_range<S: MechanismSpec + Named>(items: &Items<S>, out: &mut Vec<Diagnostic>) {
    for item in items {
        for setting in S::SETTINGS {
            let Some(value) = setting.get(item.config()) else {
                continue;
            };
            if setting.range.admits(value) {
                continue;
            }
            let loc = item
                .written()
                .get(setting.key)
                .unwrap_or_else(|| item.loc());
            out.push(match setting.range {
                Range::Within {
                    least,
                    most,
                    code,
                    help,
                } => Diagnostic::new(
                    Kind::SettingOutOfRange {
                        keyword: S::KIND.to_owned(),
                        name: item.name().value.clone(),
                        key: setting.key.to_owned(),
                        found: format_number(value),
                        least: format_number(least),
                        most: format_number(most),
                        code,
                        help: help
                            .replace("{least}", &format_number(least))
                            .replace("{most}", &format_number(most)),
                    },
                    loc,
                    "out of range",
                ),
                // `Positive`, and any range a later model adds: a zero duration.
                _ => Diagnostic::new(
                    Kind::DurationNotPositive {
                        key: setting.key.to_owned(),
                        found: format_number(value),
                    },
                    loc,
                    "zero",
                ),
            });
        }
    }
}

/// A setting's value as the language writes it: `0s`, `5`, `0.5`.
fn format_number(value: Number) -> String {
    match value {
        Number::Duration(d) => format_duration(d),
        Number::Count(n) => n.to_string(),
        Number::Share(share) => format_ratio(share),
    }
}

/// `policy::deferred-not-idempotent`: deferred and background work is delivered at least once.
fn deferred_requires_idempotent(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        if operation.class.value != WorkClass::Critical && !operation.is_idempotent() {
            let class = operation.class.value.as_str();
            out.push(
                Diagnostic::new(
                    Kind::DeferredNotIdempotent {
                        operation: operation.name.value.clone(),
                        class: class.to_owned(),
                    },
                    operation.class.loc,
                    format!("{class} work may run more than once"),
                )
                .with_label(operation.name.loc, "not marked `idempotent`"),
            );
        }
    }
}

/// `policy::durable-not-critical`: a write that must be acknowledged happens before the response.
fn durable_requires_critical(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        if let (Some(durable), true) = (
            operation.durable,
            operation.class.value != WorkClass::Critical,
        ) {
            let class = operation.class.value.as_str();
            out.push(
                Diagnostic::new(
                    Kind::DurableNotCritical {
                        operation: operation.name.value.clone(),
                        class: class.to_owned(),
                    },
                    durable,
                    "must be acknowledged",
                )
                .with_label(
                    operation.class.loc,
                    format!(
                        "but runs {}",
                        if class == "deferred" {
                            "after the response"
                        } else {
                            "in the background"
                        }
                    ),
                ),
            );
        }
    }
}

/// `policy::retry-without-deadline`: nothing bounds the retries.
fn retry_requires_deadline(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        if let (Some(retry), None) = (&operation.retry, effective_deadline(spec, operation)) {
            out.push(
                Diagnostic::new(
                    Kind::RetryWithoutDeadline {
                        operation: operation.name.value.clone(),
                        retry: retry.value.clone(),
                    },
                    retry.loc,
                    "retried here",
                )
                .with_label(operation.name.loc, "no `deadline`, and no request deadline"),
            );
        }
    }
}

/// `policy::min-budget-exceeds-deadline`: the operation could never start.
fn min_budget_within_deadline(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        let (Some(min_budget), Some(deadline)) =
            (&operation.min_budget, effective_deadline(spec, operation))
        else {
            continue;
        };
        if min_budget.value > deadline.value {
            out.push(
                Diagnostic::new(
                    Kind::MinBudgetExceedsDeadline {
                        operation: operation.name.value.clone(),
                        min_budget: format_duration(min_budget.value),
                        deadline: format_duration(deadline.value),
                    },
                    min_budget.loc,
                    "more than the deadline allows",
                )
                .with_label(deadline.loc, "the deadline"),
            );
        }
    }
}

/// `policy::attempt-timeout-exceeds-deadline`: an attempt that could never run to its timeout.
fn attempt_timeout_within_deadline(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        let Some(retry) = operation
            .retry
            .as_ref()
            .and_then(|name| spec.retries.get(&name.value))
        else {
            continue;
        };
        let (Some(timeout), Some(deadline)) =
            (retry.attempt_timeout(), effective_deadline(spec, operation))
        else {
            continue;
        };
        if timeout.value > deadline.value {
            out.push(
                Diagnostic::new(
                    Kind::AttemptTimeoutExceedsDeadline {
                        retry: retry.name.value.clone(),
                        operation: operation.name.value.clone(),
                        attempt_timeout: format_duration(timeout.value),
                        deadline: format_duration(deadline.value),
                    },
                    timeout.loc,
                    "longer than the deadline",
                )
                .with_label(deadline.loc, "the deadline"),
            );
        }
    }
}

/// `policy::request-min-budget-exceeds-deadline`: no request could ever start.
fn request_min_budget_within_deadline(spec: &Spec, out: &mut Vec<Diagnostic>) {
    let Some(request) = &spec.request else {
        return;
    };
    let (Some(min_budget), Some(deadline)) = (&request.min_budget, &request.deadline) else {
        return;
    };
    if min_budget.value > deadline.value {
        out.push(
            Diagnostic::new(
                Kind::RequestMinBudgetExceedsDeadline {
                    min_budget: format_duration(min_budget.value),
                    deadline: format_duration(deadline.value),
                },
                min_budget.loc,
                "more than the deadline allows",
            )
            .with_label(deadline.loc, "the request deadline"),
        );
    }
}

/// `policy::duration-not-positive`: a zero duration can never be met (negative ones are caught
/// when the text is read). The durations of a mechanism's table are its rows' ranges, checked
/// by [`settings_in_range`].
fn durations_positive(spec: &Spec, out: &mut Vec<Diagnostic>) {
    let mut durations: Vec<(&str, Duration, Loc)> = Vec::new();
    let optional = |key: &'static str, duration: &Option<Located<Duration>>| {
        duration
            .as_ref()
            .map(|duration| (key, duration.value, duration.loc))
    };
    if let Some(request) = &spec.request {
        durations.extend(optional("deadline", &request.deadline));
        durations.extend(optional("min_budget", &request.min_budget));
    }
    for operation in &spec.operations {
        durations.extend(optional("deadline", &operation.deadline));
        durations.extend(optional("min_budget", &operation.min_budget));
        durations.extend(optional("expected_cost", &operation.expected_cost));
        durations.extend(optional("stale_if_error", &operation.stale_if_error));
        durations.extend(optional("poll_budget", &operation.poll_budget));
    }
    for queue in &spec.queues {
        durations.extend(optional("visibility_timeout", &queue.visibility_timeout));
        durations.extend(optional("task_deadline", &queue.task_deadline));
    }
    for retry in &spec.retries {
        let backoff = retry.backoff();
        durations.push(("base", backoff.value.base(), backoff.loc));
        durations.push(("cap", backoff.value.cap(), backoff.loc));
    }
    for hedge in &spec.hedges {
        if let Some(after) = hedge.config.after.fixed() {
            durations.push(("after", after, hedge.at.after));
        }
    }
    for breaker in &spec.breakers {
        durations.push(("cooldown", breaker.config.cooldown, breaker.at.cooldown));
        durations.push((
            "open_after",
            breaker.config.open_after.window(),
            breaker.at.open_after,
        ));
    }
    for ratelimit in &spec.ratelimits {
        let rate = ratelimit.rate();
        durations.push(("per", rate.value.per, rate.loc));
        if let Some(local) = &ratelimit.local_rate() {
            durations.push(("local_rate", local.value.per, local.loc));
        }
    }
    for (key, duration, loc) in durations {
        if duration.is_zero() {
            out.push(Diagnostic::new(
                Kind::DurationNotPositive {
                    key: key.to_owned(),
                    found: format_duration(duration),
                },
                loc,
                "zero",
            ));
        }
    }
}

/// `policy::zero-attempts`: `attempts` counts the first attempt too.
fn attempts_at_least_one(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for retry in &spec.retries {
        if retry.config.attempts == 0 {
            out.push(Diagnostic::new(
                Kind::ZeroAttempts {
                    retry: retry.name.value.clone(),
                },
                retry.at.attempts,
                "the work would never run",
            ));
        }
    }
}

/// `policy::zero-count`: concurrency, quorum, failure threshold, minimum calls and rate counts
/// must be at least one.
fn counts_at_least_one(spec: &Spec, out: &mut Vec<Diagnostic>) {
    let mut zero = |key: &str, loc: Loc, help: &str| {
        out.push(Diagnostic::new(
            Kind::ZeroCount {
                key: key.to_owned(),
                help: help.to_owned(),
            },
            loc,
            "zero",
        ));
    };
    for bulkhead in &spec.bulkheads {
        if let Some(adaptive) = bulkhead.adaptive_bounds() {
            if adaptive.min.value == 0 {
                zero(
                    "min",
                    adaptive.min.loc,
                    "an adaptive bulkhead never goes below `min` slots, and with none it would refuse every call: allow at least one",
                );
            }
            continue;
        }
        if bulkhead.max_concurrent().value == 0 {
            zero(
                "max_concurrent",
                bulkhead.max_concurrent().loc,
                "a bulkhead with no slots refuses every call: allow at least one",
            );
        }
    }
    for breaker in &spec.breakers {
        if let Sharing::Openings { quorum: 0 } = breaker.config.sharing {
            zero(
                "quorum",
                breaker.at.sharing,
                "the quorum is how many distinct instances must see failures before an opening is shared: use `shared` for 1",
            );
        }
        match breaker.config.open_after {
            OpenAfter::Failures { count: 0, .. } => {
                zero(
                    "failures",
                    breaker.at.open_after,
                    "a breaker that opens after 0 failures is always open: count at least one failure",
                );
            }
            OpenAfter::FailureRatio { min_calls: 0, .. } => {
                zero(
                    "calls",
                    breaker.at.open_after,
                    "with no minimum, one failed call is 100%: require at least one call, usually 10 or more",
                );
            }
            _ => {}
        }
    }
    for ratelimit in &spec.ratelimits {
        if ratelimit.config.limit == 0 {
            zero(
                "per",
                ratelimit.at.rate,
                "a rate of 0 refuses every call: allow at least one per period",
            );
        }
        if let Some(local) = ratelimit
            .local_rate()
            .filter(|local| local.value.count == 0)
        {
            zero(
                "local_rate",
                local.loc,
                "a local rate of 0 refuses every call while the store fails: use `on_error = closed` for that, or allow at least one per period",
            );
        }
    }
    for queue in &spec.queues {
        let counts = [
            (
                "max_len",
                &queue.max_len,
                "a queue that holds no task refuses every enqueue: allow at least one",
            ),
            (
                "max_deliveries",
                &queue.max_deliveries,
                "a task is delivered at least once: allow at least one delivery",
            ),
            (
                "concurrency",
                &queue.concurrency,
                "a worker that runs no task at once never runs one: allow at least one",
            ),
        ];
        for (key, count, help) in counts {
            if let Some(count) = count.as_ref().filter(|count| count.value == 0) {
                zero(key, count.loc, help);
            }
        }
    }
    for operation in &spec.operations {
        let slots = operation
            .isolate
            .as_ref()
            .and_then(|i| i.max_concurrent.as_ref());
        if let Some(slots) = slots.filter(|slots| slots.value == 0) {
            zero(
                "max_concurrent",
                slots.loc,
                "an isolated pool with no slots refuses all its work: allow at least one",
            );
        }
    }
}

/// `policy::ratio-out-of-range`: breaker failure ratios and retry allowances are shares in (0, 1].
fn ratios_in_range(spec: &Spec, out: &mut Vec<Diagnostic>) {
    let mut check = |key: &str, ratio: f64, loc: Loc| {
        if !(ratio > 0.0 && ratio <= 1.0) {
            out.push(Diagnostic::new(
                Kind::RatioOutOfRange {
                    key: key.to_owned(),
                    found: format!("{}%", format_ratio(ratio * 100.0)),
                },
                loc,
                "out of range",
            ));
        }
    };
    for breaker in &spec.breakers {
        if let OpenAfter::FailureRatio { ratio, .. } = breaker.config.open_after {
            check("open_after", ratio, breaker.at.open_after);
        }
    }
    for retry in &spec.retries {
        if let Some(allowance) = &retry.allowance() {
            check("allowance", allowance.value.ratio, allowance.loc);
        }
    }
    for hedge in &spec.hedges {
        if let Some(allowance) = &hedge.allowance() {
            check("allowance", allowance.value.ratio, allowance.loc);
        }
    }
}

/// `policy::ratio-out-of-range`: a ceiling's headroom is a share of its measurement in (0, 100%]:
/// a negative one would ratchet the ceiling below the measurement.
fn headrooms_in_range(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for ceiling in spec.ceilings.iter().flat_map(|stanza| &stanza.lines) {
        let headroom = &ceiling.headroom;
        if !(headroom.value > 0.0 && headroom.value <= 1.0) {
            out.push(Diagnostic::new(
                Kind::RatioOutOfRange {
                    key: "headroom".to_owned(),
                    found: format!("{}%", format_ratio(headroom.value * 100.0)),
                },
                headroom.loc,
                "out of range",
            ));
        }
    }
}

/// `policy::shedding-threshold-out-of-range`: thresholds are loads strictly between 0 and 1.
fn shedding_thresholds_in_range(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        if let Some(shed_at) = &operation.shed_at
            && !(shed_at.value > 0.0 && shed_at.value < 1.0)
        {
            out.push(Diagnostic::new(
                Kind::SheddingThresholdOutOfRange {
                    class: format!("shed_at` of `{}", operation.name.value),
                    found: format_ratio(shed_at.value),
                },
                shed_at.loc,
                "outside (0, 1)",
            ));
        }
    }
    let Some(shedding) = &spec.shedding else {
        return;
    };
    for (class, threshold) in [
        ("deferred", &shedding.deferred),
        ("background", &shedding.background),
    ] {
        if !(threshold.value > 0.0 && threshold.value < 1.0) {
            out.push(Diagnostic::new(
                Kind::SheddingThresholdOutOfRange {
                    class: class.to_owned(),
                    found: format_ratio(threshold.value),
                },
                threshold.loc,
                "outside (0, 1)",
            ));
        }
    }
}

/// `policy::fallback-on-scheduled`: a fallback answers a caller; scheduled work has none.
fn fallbacks_answer_a_caller(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        if operation.class.value == WorkClass::Critical {
            continue;
        }
        let settings = [
            ("fallback", operation.fallback.as_ref().map(|f| f.loc)),
            (
                "stale_if_error",
                operation.stale_if_error.as_ref().map(|s| s.loc),
            ),
        ];
        for (setting, loc) in settings {
            if let Some(loc) = loc {
                out.push(
                    Diagnostic::new(
                        Kind::FallbackOnScheduled {
                            operation: operation.name.value.clone(),
                            class: operation.class.value.as_str().to_owned(),
                            setting: setting.to_owned(),
                        },
                        loc,
                        "nobody waits for this answer",
                    )
                    .with_label(operation.class.loc, "runs after or beside the response"),
                );
            }
        }
    }
}

/// `policy::queue-not-background`: only background work goes to a durable queue.
fn queue_is_for_background_work(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        let Some(queue) = &operation.queue else {
            continue;
        };
        if operation.class.value == WorkClass::Background || operation.isolate.is_some() {
            continue;
        }
        out.push(
            Diagnostic::new(
                Kind::QueueNotBackground {
                    operation: operation.name.value.clone(),
                    class: operation.class.value.as_str().to_owned(),
                    queue: queue.value.clone(),
                },
                queue.loc,
                "a durable queue is for background work",
            )
            .with_label(operation.class.loc, "declared here"),
        );
    }
}

/// `policy::task-deadline-exceeds-visibility`: a delivery still running when another worker
/// may claim it runs twice at once; the worker lowers the deadline to four fifths of the
/// visibility timeout (`queue_defaults::task_deadline_bound`), so the file should say what
/// will happen.
fn task_deadline_within_visibility(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for queue in &spec.queues {
        let Some(task_deadline) = &queue.task_deadline else {
            continue;
        };
        let visibility = queue.effective_visibility_timeout();
        let bound = queue_defaults::task_deadline_bound(visibility);
        if task_deadline.value <= bound {
            continue;
        }
        let mut diagnostic = Diagnostic::new(
            Kind::TaskDeadlineExceedsVisibility {
                queue: queue.name.value.clone(),
                task_deadline: format_duration(task_deadline.value),
                visibility: format_duration(visibility),
                bound: format_duration(bound),
            },
            task_deadline.loc,
            "longer than four fifths of the visibility timeout",
        );
        if let Some(declared) = &queue.visibility_timeout {
            diagnostic = diagnostic.with_label(declared.loc, "the visibility timeout");
        }
        out.push(diagnostic);
    }
}

/// `policy::undeclared-queue`: declaring a queue is optional (an undeclared one runs with the
/// runtime's defaults), so only a name close to a declared queue's is reported, as the typo it
/// likely is.
fn queue_declared(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        let Some(queue) = &operation.queue else {
            continue;
        };
        if spec.queues.get(&queue.value).is_some() {
            continue;
        }
        let Some(declared) = suggest::closest(&queue.value, spec.queues.names()) else {
            continue;
        };
        out.push(Diagnostic::new(
            Kind::UndeclaredQueue {
                operation: operation.name.value.clone(),
                queue: queue.value.clone(),
                declared: declared.to_owned(),
            },
            queue.loc,
            "no queue stanza has this name",
        ));
    }
}

/// `policy::isolate-stands-alone`: isolated work is a synchronous function on a pool, waited
/// for within its caller's deadline; the caller's operation carries the mechanisms.
fn isolate_stands_alone(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        let Some(isolate) = &operation.isolate else {
            continue;
        };
        let located = |key: &'static str, loc: Option<Loc>| loc.map(|loc| (key, loc));
        let others = [
            (operation.class.value != WorkClass::Critical)
                .then(|| (operation.class.value.as_str(), operation.class.loc)),
            located("breaker", operation.breaker.as_ref().map(|n| n.loc)),
            located("bulkhead", operation.bulkhead.as_ref().map(|n| n.loc)),
            located("retry", operation.retry.as_ref().map(|n| n.loc)),
            located("ratelimit", operation.ratelimit.as_ref().map(|n| n.loc)),
            located("deadline", operation.deadline.as_ref().map(|d| d.loc)),
            located("min_budget", operation.min_budget.as_ref().map(|d| d.loc)),
            located(
                "expected_cost",
                operation.expected_cost.as_ref().map(|d| d.loc),
            ),
            located("shed_at", operation.shed_at.as_ref().map(|r| r.loc)),
            located("fallback", operation.fallback.as_ref().map(|f| f.loc)),
            located("fallback_on_failure", operation.fallback_on_failure),
            located(
                "stale_if_error",
                operation.stale_if_error.as_ref().map(|d| d.loc),
            ),
            located("poll_budget", operation.poll_budget.as_ref().map(|d| d.loc)),
            located("queue", operation.queue.as_ref().map(|q| q.loc)),
        ];
        for (other, loc) in others.into_iter().flatten() {
            out.push(
                Diagnostic::new(
                    Kind::IsolateStandsAlone {
                        operation: operation.name.value.clone(),
                        other: other.to_owned(),
                    },
                    loc,
                    "not for isolated work",
                )
                .with_label(isolate.loc, "isolated here"),
            );
        }
    }
}

/// `policy::ratelimit-fail-mode-unset`: a rate limit guarding critical work says what happens
/// when its store is slow (`on_timeout`) and when it is down (`on_error`); best-effort work may
/// leave them to the default (`local`). Once per rate limit, at the first critical operation.
fn critical_ratelimit_chooses_fail_modes(spec: &Spec, out: &mut Vec<Diagnostic>) {
    let mut reported = std::collections::HashSet::new();
    for operation in &spec.operations {
        if operation.class.value != WorkClass::Critical {
            continue;
        }
        let Some(reference) = &operation.ratelimit else {
            continue;
        };
        let Some(ratelimit) = spec.ratelimits.get(&reference.value) else {
            continue;
        };
        let missing: Vec<&str> = [
            ("on_timeout", ratelimit.at.on_timeout.is_none()),
            ("on_error", ratelimit.at.on_error.is_none()),
        ]
        .into_iter()
        .filter_map(|(key, unset)| unset.then_some(key))
        .collect();
        if missing.is_empty() || !reported.insert(ratelimit.name.value.as_str()) {
            continue;
        }
        let quoted: Vec<String> = missing.iter().map(|key| format!("`{key}`")).collect();
        let example: Vec<String> = missing
            .iter()
            .map(|key| format!("{key} = closed"))
            .collect();
        out.push(
            Diagnostic::new(
                Kind::RatelimitFailModeUnset {
                    ratelimit: ratelimit.name.value.clone(),
                    operation: operation.name.value.clone(),
                    missing: quoted.join(" and "),
                    example: format!("`{}`", example.join("; ")),
                },
                ratelimit.name.loc,
                "its store's failures left to the default",
            )
            .with_label(reference.loc, "guards critical work here"),
        );
    }
}

/// `policy::shed-critical`: critical work is never shed for load, so it has no threshold.
fn critical_never_shed_for_load(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        if let (WorkClass::Critical, Some(shed_at)) = (operation.class.value, &operation.shed_at) {
            out.push(
                Diagnostic::new(
                    Kind::ShedCritical {
                        operation: operation.name.value.clone(),
                    },
                    shed_at.loc,
                    "a shed threshold",
                )
                .with_label(operation.class.loc, "on critical work"),
            );
        }
    }
}

/// `policy::shedding-thresholds-inverted`: background work goes first.
fn shedding_thresholds_ordered(spec: &Spec, out: &mut Vec<Diagnostic>) {
    let Some(shedding) = &spec.shedding else {
        return;
    };
    if shedding.background.value > shedding.deferred.value {
        out.push(
            Diagnostic::new(
                Kind::SheddingThresholdsInverted {
                    background: format_ratio(shedding.background.value),
                    deferred: format_ratio(shedding.deferred.value),
                },
                shedding.background.loc,
                "background threshold",
            )
            .with_label(shedding.deferred.loc, "deferred threshold"),
        );
    }
}

/// `policy::backoff-base-above-cap`: the first delay cannot exceed the largest.
fn backoff_base_within_cap(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for retry in &spec.retries {
        let (base, cap) = (retry.config.backoff.base(), retry.config.backoff.cap());
        if base > cap {
            out.push(Diagnostic::new(
                Kind::BackoffBaseAboveCap {
                    retry: retry.name.value.clone(),
                    base: format_duration(base),
                    cap: format_duration(cap),
                },
                retry.at.backoff,
                "base above cap",
            ));
        }
    }
}

/// `policy::duplicate-variable`: two hops located by one variable are one service, declared twice.
fn one_hop_per_variable(spec: &Spec, out: &mut Vec<Diagnostic>) {
    let Some(locality) = &spec.locality else {
        return;
    };
    // The first hop that named each variable: one lookup per hop, not a scan of those before.
    let mut first_named: HashMap<&str, &HopSpec> = HashMap::new();
    for hop in locality.hops.iter() {
        let first = *first_named.entry(&hop.variable.value).or_insert(hop);
        if !std::ptr::eq(first, hop) {
            out.push(
                Diagnostic::new(
                    Kind::DuplicateVariable {
                        variable: hop.variable.value.clone(),
                        first: first.name.value.clone(),
                        second: hop.name.value.clone(),
                    },
                    hop.variable.loc,
                    "named again here",
                )
                .with_label(first.variable.loc, "first named here"),
            );
        }
    }
}

// ---- warnings ---------------------------------------------------------------------------------

/// `policy::deadline-clamped` (warning): a critical operation asks for more than the request has
/// (deferred and background work runs after the response, outside the request's budget).
fn deadline_within_request(spec: &Spec, out: &mut Vec<Diagnostic>) {
    let Some(request) = spec
        .request
        .as_ref()
        .and_then(|request| request.deadline.as_ref())
    else {
        return;
    };
    for operation in &spec.operations {
        let Some(deadline) = &operation.deadline else {
            continue;
        };
        if operation.class.value == WorkClass::Critical && deadline.value > request.value {
            out.push(
                Diagnostic::new(
                    Kind::DeadlineClamped {
                        operation: operation.name.value.clone(),
                        deadline: format_duration(deadline.value),
                        request: format_duration(request.value),
                    },
                    deadline.loc,
                    "longer than the request",
                )
                .with_label(request.loc, "the request deadline"),
            );
        }
    }
}

/// How many of `attempts` can start before `deadline` when every attempt runs to its timeout
/// and every backoff waits its longest.
#[must_use]
pub fn reachable_attempts(
    attempts: u32,
    attempt_timeout: Duration,
    backoff: &Backoff,
    deadline: Duration,
) -> u32 {
    let mut start = Duration::ZERO;
    let mut reachable = 0;
    for attempt in 1..=attempts {
        if start >= deadline {
            break;
        }
        reachable += 1;
        start = start
            .saturating_add(attempt_timeout)
            .saturating_add(backoff.max_delay_after(attempt));
    }
    reachable
}

/// `policy::unreachable-attempts` (warning): attempts that cannot start within the deadline once
/// earlier attempts time out.
fn attempts_reachable(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for operation in &spec.operations {
        let Some(retry) = operation
            .retry
            .as_ref()
            .and_then(|name| spec.retries.get(&name.value))
        else {
            continue;
        };
        let (Some(timeout), Some(deadline)) =
            (retry.attempt_timeout(), effective_deadline(spec, operation))
        else {
            continue;
        };
        let attempts = retry.config.attempts;
        let reachable = reachable_attempts(
            attempts,
            timeout.value,
            &retry.config.backoff,
            deadline.value,
        );
        if reachable < attempts {
            out.push(
                Diagnostic::new(
                    Kind::UnreachableAttempts {
                        operation: operation.name.value.clone(),
                        attempts,
                        reachable,
                        deadline: format_duration(deadline.value),
                    },
                    operation
                        .retry
                        .as_ref()
                        .map_or(operation.name.loc, |reference| reference.loc),
                    format!(
                        "{} of {attempts} attempts cannot start in time",
                        attempts - reachable
                    ),
                )
                .with_label(deadline.loc, "the deadline")
                .with_label(timeout.loc, "each attempt may take this long")
                .with_label(retry.at.attempts, "attempts"),
            );
        }
    }
}

/// `policy::queue-stores-backlog` (warning): a queue past [`BACKLOG_FACTOR`] × concurrency.
fn queue_absorbs_burst(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for bulkhead in &spec.bulkheads {
        let limit = u64::from(bulkhead.max_concurrent().value) * u64::from(BACKLOG_FACTOR);
        if u64::from(bulkhead.max_queued().value) > limit && bulkhead.max_concurrent().value > 0 {
            out.push(
                Diagnostic::new(
                    Kind::QueueStoresBacklog {
                        bulkhead: bulkhead.name.value.clone(),
                        max_queued: bulkhead.max_queued().value,
                        max_concurrent: bulkhead.max_concurrent().value,
                        limit,
                    },
                    bulkhead.max_queued().loc,
                    "a backlog, not a burst",
                )
                .with_label(bulkhead.max_concurrent().loc, "slots"),
            );
        }
    }
}

/// `policy::adaptive-with-fixed-limit`: a bulkhead's slot count is fixed (`max_concurrent`) or
/// adaptive (`adaptive(min, max)`), not both.
fn adaptive_or_fixed(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for bulkhead in &spec.bulkheads {
        let Some(adaptive) = bulkhead
            .adaptive_bounds()
            .filter(|_| bulkhead.fixed_and_adaptive())
        else {
            continue;
        };
        out.push(
            Diagnostic::new(
                Kind::AdaptiveWithFixedLimit {
                    bulkhead: bulkhead.name.value.clone(),
                    max_concurrent: bulkhead.max_concurrent().value,
                },
                bulkhead.max_concurrent().loc,
                "a fixed slot count",
            )
            .with_label(adaptive.loc, "an adaptive one"),
        );
    }
}

/// `policy::adaptive-bounds-inverted`: an adaptive bulkhead's `min` is at most its `max`.
fn adaptive_bounds_ordered(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for bulkhead in &spec.bulkheads {
        let Some(adaptive) = bulkhead.adaptive_bounds() else {
            continue;
        };
        if adaptive.min.value > adaptive.max.value {
            out.push(
                Diagnostic::new(
                    Kind::AdaptiveBoundsInverted {
                        bulkhead: bulkhead.name.value.clone(),
                        min: adaptive.min.value,
                        max: adaptive.max.value,
                    },
                    adaptive.min.loc,
                    "above `max`",
                )
                .with_label(adaptive.max.loc, "`max`"),
            );
        }
    }
}

/// `policy::zero-size`: a size ceiling of zero bytes in an `assets` stanza fails every file.
fn asset_sizes_positive(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for assets in &spec.assets {
        let ceilings = [
            (
                "max_image",
                &assets.max_image,
                "every image would be over it: give a size such as `max_image = 200kb`",
            ),
            (
                "large_image",
                &assets.large_image,
                "every image would count as large: give a size such as `large_image = 50kb`",
            ),
            (
                "max_font",
                &assets.max_font,
                "every font would be over it: give a size such as `max_font = 100kb`, or forbid web fonts with `max_font_files = 0`",
            ),
        ];
        for (key, size, help) in ceilings {
            if size.value == 0 {
                out.push(Diagnostic::new(
                    Kind::ZeroSize {
                        key: key.to_owned(),
                        help: help.to_owned(),
                    },
                    size.loc,
                    "zero",
                ));
            }
        }
    }
}

/// `policy::large-image-above-max` (warning): the large-image rules only repeat the ceiling.
fn large_image_below_max(spec: &Spec, out: &mut Vec<Diagnostic>) {
    for assets in &spec.assets {
        let (large, max) = (&assets.large_image, &assets.max_image);
        if large.value >= max.value && large.value > 0 && max.value > 0 {
            out.push(
                Diagnostic::new(
                    Kind::LargeImageAboveMax {
                        large_image: format_size(large.value),
                        max_image: format_size(max.value),
                    },
                    large.loc,
                    "large from here",
                )
                .with_label(max.loc, "the ceiling"),
            );
        }
    }
}
