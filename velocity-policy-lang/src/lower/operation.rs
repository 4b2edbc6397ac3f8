//! Lowering `operation NAME: CLASS[, flags] { ... }`: the class and flags of the header, and
//! the mechanisms and deadlines it names.

use super::{Lowering, insert};
use crate::ast::{Stanza, Term, Value};
use crate::diagnostic::{Diagnostic, Kind};
use crate::source::Located;
use crate::spec::{IsolateSpec, OperationSpec, PoolKind, WorkClass};
use crate::suggest;

/// The flags an operation's header may carry besides its class.
pub const OPERATION_FLAGS: &[&str] = &["idempotent", "durable"];
pub(super) const FLAGS: &[&str] = OPERATION_FLAGS;

/// Every statement an operation's body may hold: its settings (`key = value`) and its phrases
/// (`fallback_on_failure`).
pub const OPERATION_STATEMENTS: &[&str] = &[
    "breaker",
    "bulkhead",
    "retry",
    "hedge",
    "ratelimit",
    "deadline",
    "min_budget",
    "expected_cost",
    "shed_at",
    "fallback",
    "fallback_on_failure",
    "stale_if_error",
    "poll_budget",
    "isolate",
    "queue",
    "chaos",
];

pub(super) fn lower_operation(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &[
        "breaker",
        "bulkhead",
        "retry",
        "hedge",
        "ratelimit",
        "deadline",
        "min_budget",
        "expected_cost",
        "shed_at",
        "fallback",
        "stale_if_error",
        "poll_budget",
        "isolate",
        "queue",
        "chaos",
    ];
    /// The keys and phrases, for "did you mean".
    const STATEMENTS: &[&str] = OPERATION_STATEMENTS;
    let name = lowering.name(stanza);
    let operation_name = name
        .as_ref()
        .map_or("", |name| name.value.as_str())
        .to_owned();
    let mut class: Option<Located<WorkClass>> = None;
    let (mut idempotent, mut durable) = (None, None);
    let mut header_ok = true;
    // An unknown flag is reported and left out; the rest of the operation is still read and
    // validated, so a typo in the header does not hide the body's problems until it is fixed.
    let mut flags_ok = true;
    for tag in &stanza.tags {
        if let Some(found) = WorkClass::from_name(&tag.text) {
            match &class {
                Some(first) => {
                    header_ok = false;
                    lowering.push(
                        Diagnostic::new(
                            Kind::ConflictingClasses {
                                operation: operation_name.clone(),
                                first: first.value.to_string(),
                                second: tag.text.clone(),
                            },
                            tag.loc,
                            "second class",
                        )
                        .with_label(first.loc, "first class"),
                    );
                }
                None => class = Some(Located::new(found, tag.loc)),
            }
        } else if tag.text == "idempotent" {
            idempotent = Some(tag.loc);
        } else if tag.text == "durable" {
            durable = Some(tag.loc);
        } else {
            flags_ok = false;
            let candidates = [
                "critical",
                "deferred",
                "background",
                "idempotent",
                "durable",
            ];
            // Read as the flag it is closest to, so the misspelling is the only error it
            // causes (not also "retried but not marked `idempotent`"); the build still fails.
            match suggest::closest(&tag.text, FLAGS.iter().copied()) {
                Some("idempotent") => idempotent = idempotent.or(Some(tag.loc)),
                Some("durable") => durable = durable.or(Some(tag.loc)),
                _ => {}
            }
            lowering.push(Diagnostic::new(
                Kind::UnknownFlag {
                    operation: operation_name.clone(),
                    flag: tag.text.clone(),
                    help: suggest::did_you_mean(&tag.text, candidates, "the classes and flags", ""),
                },
                tag.loc,
                "unknown",
            ));
        }
    }
    // An unknown word may be the class misspelled (`deferd`): one error for it, not two.
    if class.is_none() && header_ok && flags_ok {
        lowering.push(Diagnostic::new(
            Kind::MissingClass {
                operation: operation_name.clone(),
            },
            name.as_ref().map_or(stanza.keyword.loc, |name| name.loc),
            "no class",
        ));
    }
    let body = lowering.body(stanza, KEYS);
    let mut fallback_on_failure = None;
    for phrase in &body.phrases {
        match phrase.terms.as_slice() {
            [Term::Word(word)] if word.text == "fallback_on_failure" => match fallback_on_failure {
                Some(first) => lowering.push(
                    Diagnostic::new(
                        Kind::DuplicateSetting {
                            key: "fallback_on_failure".to_owned(),
                        },
                        phrase.loc,
                        "set again here",
                    )
                    .with_label(first, "first set here"),
                ),
                None => fallback_on_failure = Some(phrase.loc),
            },
            _ => lowering.unknown_phrase(stanza, phrase, STATEMENTS),
        }
    }
    let (Some(name), Some(class)) = (name, class) else {
        return;
    };
    let mut operation = OperationSpec::new(name, class, stanza.loc);
    operation.idempotent = idempotent;
    operation.durable = durable;
    operation.fallback_on_failure = fallback_on_failure;
    let mut complete = header_ok;
    for (key, value) in &body.settings {
        let key = key.text.as_str();
        let lowered = match key {
            "breaker" => lowering
                .reference(key, value)
                .map(|r| operation.breaker = Some(r)),
            "bulkhead" => lowering
                .reference(key, value)
                .map(|r| operation.bulkhead = Some(r)),
            "retry" => lowering
                .reference(key, value)
                .map(|r| operation.retry = Some(r)),
            "hedge" => lowering
                .reference(key, value)
                .map(|r| operation.hedge = Some(r)),
            "ratelimit" => lowering
                .reference(key, value)
                .map(|r| operation.ratelimit = Some(r)),
            "queue" => lowering
                .reference(key, value)
                .map(|r| operation.queue = Some(r)),
            "chaos" => lowering
                .reference(key, value)
                .map(|r| operation.chaos = Some(r)),
            "deadline" => lowering
                .duration(key, value)
                .map(|d| operation.deadline = Some(d)),
            "min_budget" => lowering
                .duration(key, value)
                .map(|d| operation.min_budget = Some(d)),
            "expected_cost" => lowering
                .duration(key, value)
                .map(|d| operation.expected_cost = Some(d)),
            "stale_if_error" => lowering
                .duration(key, value)
                .map(|d| operation.stale_if_error = Some(d)),
            "shed_at" => lowering
                .ratio(key, value)
                .map(|r| operation.shed_at = Some(r)),
            "fallback" => lowering
                .string(key, value)
                .map(|s| operation.fallback = Some(s)),
            "poll_budget" => lowering
                .duration(key, value)
                .map(|d| operation.poll_budget = Some(d)),
            "isolate" => lower_isolate(lowering, key, value).map(|i| operation.isolate = Some(i)),
            _ => Some(()),
        };
        complete &= lowered.is_some();
    }
    // An operation with a statement that failed to read is left out: validating what remains
    // would report consequences of the syntax error (a retry whose deadline failed to parse).
    if complete && !stanza.has_errors {
        insert(
            &mut lowering.spec.operations,
            operation,
            &mut lowering.diagnostics,
        );
    }
}

/// `isolate = blocking`, `isolate = rayon(max_concurrent = 2, max_queued = 4)`.
fn lower_isolate(lowering: &mut Lowering<'_>, key: &str, value: &Value) -> Option<IsolateSpec> {
    const EXPECTED: &str = "a pool like `blocking(max_concurrent = 2, max_queued = 4)`";
    let pools = PoolKind::ALL.map(PoolKind::as_str);
    let (pool, args) = match value.terms.as_slice() {
        [Term::Word(word)] => (word, &[][..]),
        [Term::Call(call)] => (&call.name, call.args.as_slice()),
        _ => {
            lowering.invalid(
                key,
                EXPECTED,
                value,
                value.loc,
                format!(
                    "write `{key} = blocking` (tokio's blocking threads) or `{key} = rayon` (a dedicated pool), with `(max_concurrent = N, max_queued = N)` if needed"
                ),
            );
            return None;
        }
    };
    let Some(kind) = PoolKind::from_name(&pool.text) else {
        let help = suggest::did_you_mean(&pool.text, pools, "the pools", "");
        lowering.invalid(key, "`blocking` or `rayon`", &pool.text, pool.loc, help);
        return None;
    };
    let mut isolate = IsolateSpec::new(Located::new(kind, pool.loc), value.loc);
    let mut complete = true;
    for arg in args {
        let slot = match arg.key.as_ref().map(|key| key.text.as_str()) {
            Some("max_concurrent") if isolate.max_concurrent.is_none() => {
                &mut isolate.max_concurrent
            }
            Some("max_queued") if isolate.max_queued.is_none() => &mut isolate.max_queued,
            _ => {
                complete = false;
                let key_text = arg
                    .key
                    .as_ref()
                    .map_or_else(|| arg.value.to_string(), |key| key.text.clone());
                let help = suggest::did_you_mean(
                    &key_text,
                    ["max_concurrent", "max_queued"],
                    &format!("the arguments of `{}`", pool.text),
                    "",
                );
                lowering.push(Diagnostic::new(
                    Kind::UnknownSetting {
                        keyword: pool.text.clone(),
                        key: key_text,
                        help,
                    },
                    arg.loc,
                    "unknown or repeated",
                ));
                continue;
            }
        };
        let name = arg.key.as_ref().map_or("", |key| key.text.as_str());
        *slot = lowering.count(name, &arg.value);
        complete &= slot.is_some();
    }
    complete.then_some(isolate)
}
