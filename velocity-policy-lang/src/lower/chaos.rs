//! Lowering `chaos NAME { ... }`: the faults a drill injects, each `at` a rate, and when and
//! where it is on.
//!
//! ```text
//! chaos search_drill {
//!     latency = uniform(200ms, 800ms) at 10%
//!     error at 5%
//!     refuse at 1%
//!     status 429 retry_after 5s at 2%
//!     during = 10m to 40m
//!     instances = 30%
//! }
//! ```

use std::time::Duration;

use super::{Lowering, insert};
use crate::ast::{Call, Stanza, Term, Value};
use crate::source::{Loc, Located};
use crate::spec::{ChaosFault, ChaosFaultKind, ChaosLatency, ChaosSpec};

const KEYS: &[&str] = &["latency", "during", "instances", "enabled"];
/// Every statement, for "did you mean".
const STATEMENTS: &[&str] = &[
    "latency",
    "error",
    "refuse",
    "status",
    "during",
    "instances",
    "enabled",
];
const RATE_HELP: &str = "end the fault with its rate: `error at 5%`";

pub(super) fn lower_chaos(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    let mut complete = true;
    let mut faults: Vec<ChaosFault> = Vec::new();
    let mut push = |lowering: &mut Lowering<'_>, fault: Option<ChaosFault>| match fault {
        Some(fault) => {
            if let Some(first) = faults
                .iter()
                .find(|f| f.kind.keyword() == fault.kind.keyword())
            {
                lowering.push(
                    crate::diagnostic::Diagnostic::new(
                        crate::diagnostic::Kind::DuplicateSetting {
                            key: fault.kind.keyword().to_owned(),
                        },
                        fault.loc,
                        "set again here",
                    )
                    .with_label(first.loc, "first set here"),
                );
                false
            } else {
                faults.push(fault);
                true
            }
        }
        None => false,
    };
    if let Some((key, value)) = body.get("latency") {
        let fault = lower_latency(lowering, &key.text, value, key.loc);
        complete &= push(lowering, fault);
    }
    for phrase in &body.phrases {
        let fault = match phrase.terms.first().and_then(Term::as_word) {
            Some("error") => rated(lowering, "error", phrase, 1)
                .map(|rate| ChaosFault::new(ChaosFaultKind::Error, rate, phrase.loc)),
            Some("refuse") => rated(lowering, "refuse", phrase, 1)
                .map(|rate| ChaosFault::new(ChaosFaultKind::Refuse, rate, phrase.loc)),
            Some("status") => lower_status(lowering, phrase),
            _ => {
                lowering.unknown_phrase(stanza, phrase, STATEMENTS);
                complete = false;
                continue;
            }
        };
        complete &= push(lowering, fault);
    }
    let during = body
        .get("during")
        .map(|(key, value)| lower_during(lowering, &key.text, value));
    let instances = body
        .get("instances")
        .map(|(key, value)| lowering.ratio(&key.text, value));
    let enabled = body
        .get("enabled")
        .map(|(key, value)| lower_bool(lowering, &key.text, value));
    match (name, complete, during, instances, enabled) {
        (
            Some(name),
            true,
            during @ (None | Some(Some(_))),
            instances @ (None | Some(Some(_))),
            enabled @ (None | Some(Some(_))),
        ) => {
            let mut chaos = ChaosSpec::new(name, stanza.loc);
            chaos.faults = faults;
            chaos.during = during.flatten();
            chaos.instances = instances.flatten();
            chaos.enabled = enabled.flatten();
            insert(&mut lowering.spec.chaos, chaos, &mut lowering.diagnostics);
        }
        (name, ..) => lowering.drop_item("chaos", name),
    }
}

/// The rate after `at`, the terms of `value` from `from` on being `at RATE` exactly.
fn rated(
    lowering: &mut Lowering<'_>,
    key: &str,
    value: &Value,
    from: usize,
) -> Option<Located<f64>> {
    match value.terms.get(from..) {
        Some([Term::Word(at), Term::Quantity(rate)]) if at.text == "at" => {
            lowering.quantity_ratio(key, rate)
        }
        _ => {
            lowering.invalid(
                key,
                "a fault followed by `at` and its rate",
                value,
                value.loc,
                RATE_HELP.to_owned(),
            );
            None
        }
    }
}

/// `300ms at 10%`, `uniform(200ms, 800ms) at 10%` or `lognormal(p50 = 100ms, p99 = 2s) at 10%`.
fn lower_latency(
    lowering: &mut Lowering<'_>,
    key: &str,
    value: &Value,
    loc: Loc,
) -> Option<ChaosFault> {
    const EXPECTED: &str =
        "a duration, `uniform(MIN, MAX)` or `lognormal(p50 = .., p99 = ..)`, then `at` a rate";
    let latency = match value.terms.first() {
        Some(Term::Quantity(quantity)) => lowering
            .quantity_duration(key, quantity)
            .map(|d| ChaosLatency::Fixed(d.value)),
        Some(term @ Term::Call(call)) => lower_distribution(lowering, key, term, call),
        _ => {
            lowering.invalid(
                key,
                EXPECTED,
                value,
                value.loc,
                "write it as `latency = 300ms at 10%` or `latency = uniform(200ms, 800ms) at 10%`"
                    .to_owned(),
            );
            return None;
        }
    };
    let rate = rated(lowering, key, value, 1);
    Some(ChaosFault::new(
        ChaosFaultKind::Latency(latency?),
        rate?,
        loc.to(value.loc),
    ))
}

fn lower_distribution(
    lowering: &mut Lowering<'_>,
    key: &str,
    term: &Term,
    call: &Call,
) -> Option<ChaosLatency> {
    let durations: Vec<(Option<&str>, Option<Duration>)> = call
        .args
        .iter()
        .map(|arg| {
            let duration = match arg.value.terms.as_slice() {
                [Term::Quantity(quantity)] => {
                    lowering.quantity_duration(key, quantity).map(|d| d.value)
                }
                _ => {
                    lowering.invalid(
                        key,
                        "a duration like `200ms`",
                        &arg.value,
                        arg.value.loc,
                        "each argument is a duration".to_owned(),
                    );
                    None
                }
            };
            (arg.key.as_ref().map(|k| k.text.as_str()), duration)
        })
        .collect();
    match (call.name.text.as_str(), durations.as_slice()) {
        ("uniform", [(None, min), (None, max)]) => Some(ChaosLatency::Uniform {
            min: (*min)?,
            max: (*max)?,
        }),
        ("lognormal", [(Some("p50"), p50), (Some("p99"), p99)]) => Some(ChaosLatency::LogNormal {
            p50: (*p50)?,
            p99: (*p99)?,
        }),
        _ => {
            lowering.invalid(
                key,
                "`uniform(MIN, MAX)` or `lognormal(p50 = .., p99 = ..)`",
                term,
                call.loc,
                "write `uniform(200ms, 800ms)` (evenly between the two) or `lognormal(p50 = 100ms, p99 = 2s)` (a long tail)"
                    .to_owned(),
            );
            None
        }
    }
}

/// `status 429 retry_after 5s at 2%`.
fn lower_status(lowering: &mut Lowering<'_>, phrase: &Value) -> Option<ChaosFault> {
    match phrase.terms.as_slice() {
        [
            _,
            Term::Quantity(status),
            Term::Word(retry_after),
            Term::Quantity(after),
            ..,
        ] if status.number == "429"
            && status.unit.is_none()
            && retry_after.text == "retry_after" =>
        {
            let after = lowering.quantity_duration("retry_after", after);
            let rate = rated(lowering, "status", phrase, 4);
            Some(ChaosFault::new(
                ChaosFaultKind::TooManyRequests {
                    retry_after: after?.value,
                },
                rate?,
                phrase.loc,
            ))
        }
        _ => {
            lowering.invalid(
                "status",
                "`status 429 retry_after DURATION at RATE`",
                phrase,
                phrase.loc,
                "a 429 with its Retry-After: `status 429 retry_after 5s at 2%` (other statuses are the function's own error: `error at 5%`)"
                    .to_owned(),
            );
            None
        }
    }
}

/// `10m to 40m`: from, until, after the drill is first used.
fn lower_during(
    lowering: &mut Lowering<'_>,
    key: &str,
    value: &Value,
) -> Option<Located<(Duration, Duration)>> {
    match value.terms.as_slice() {
        [Term::Quantity(from), Term::Word(to), Term::Quantity(until)] if to.text == "to" => {
            let from = lowering.quantity_duration(key, from);
            let until = lowering.quantity_duration(key, until);
            Some(Located::new((from?.value, until?.value), value.loc))
        }
        _ => {
            lowering.invalid(
                key,
                "a window like `10m to 40m`",
                value,
                value.loc,
                "write when it starts and ends, after the drill is first used: `during = 10m to 40m`"
                    .to_owned(),
            );
            None
        }
    }
}

fn lower_bool(lowering: &mut Lowering<'_>, key: &str, value: &Value) -> Option<Located<bool>> {
    match value.terms.as_slice() {
        [Term::Word(word)] if word.text == "true" => Some(Located::new(true, word.loc)),
        [Term::Word(word)] if word.text == "false" => Some(Located::new(false, word.loc)),
        _ => {
            lowering.invalid(
                key,
                "`true` or `false`",
                value,
                value.loc,
                format!("write `{key} = false` to declare it off and switch it on at run time"),
            );
            None
        }
    }
}
