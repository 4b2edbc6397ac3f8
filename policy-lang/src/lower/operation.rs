//! Lowering `operation NAME: CLASS[, flags] { ... }`: the class and flags of the header, and
//! the mechanisms and deadlines it names.

use super::{Lowering, insert};
use crate::ast::Stanza;
use crate::diagnostic::{Diagnostic, Kind};
use crate::source::Located;
use crate::spec::{Class, OperationSpec};
use crate::suggest;

/// The flags an operation's header may carry besides its class.
pub(super) const FLAGS: &[&str] = &["idempotent", "durable"];

pub(super) fn lower_operation(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &[
        "breaker",
        "bulkhead",
        "retry",
        "ratelimit",
        "deadline",
        "min_budget",
        "expected_cost",
        "shed_at",
        "fallback",
        "stale_if_error",
    ];
    let name = lowering.name(stanza);
    let operation_name = name
        .as_ref()
        .map_or("", |name| name.value.as_str())
        .to_owned();
    let mut class: Option<Located<Class>> = None;
    let (mut idempotent, mut durable) = (None, None);
    let mut header_ok = true;
    for tag in &stanza.tags {
        if let Some(found) = Class::from_name(&tag.text) {
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
            header_ok = false;
            let candidates = [
                "critical",
                "deferred",
                "background",
                "idempotent",
                "durable",
            ];
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
    if class.is_none() && header_ok {
        lowering.push(Diagnostic::new(
            Kind::MissingClass {
                operation: operation_name.clone(),
            },
            name.as_ref().map_or(stanza.keyword.loc, |name| name.loc),
            "no class",
        ));
    }
    let body = lowering.body(stanza, KEYS);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, KEYS);
    }
    let (Some(name), Some(class)) = (name, class) else {
        return;
    };
    let mut operation = OperationSpec::new(name, class, stanza.loc);
    operation.idempotent = idempotent;
    operation.durable = durable;
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
            "ratelimit" => lowering
                .reference(key, value)
                .map(|r| operation.ratelimit = Some(r)),
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
