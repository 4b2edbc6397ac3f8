//! Phase 4: every rule in one step, returning a validated plan.
//!
//! The combination rules live in `policy-lang` and run on the lowered model, exactly as they do
//! for `.policy` files; here are only the rules a file cannot know (is the function async,
//! what does it return, does it borrow). Each error is spanned at the offending token and says
//! the fix; all are reported together.

use std::path::PathBuf;
use std::time::Duration;

use policy_lang::{BreakerSpec, BulkheadSpec, Diagnostic, Loc, RetrySpec, WorkClass};
use proc_macro2::Span;

use crate::args::{Args, Errors};
use crate::func::{Func, Param, is_unit_result};
use crate::lower::{InlineFlags, Lowered};

/// What the expansion needs, validated.
pub(crate) struct Plan {
    /// The operation's name.
    pub(crate) op: String,
    pub(crate) class: WorkClass,
    pub(crate) deadline: Option<Duration>,
    pub(crate) min_budget: Option<Duration>,
    pub(crate) expected_cost: Option<Duration>,
    pub(crate) shed_at: Option<f64>,
    /// The crate's deferred and background thresholds.
    pub(crate) thresholds: (f64, f64),
    pub(crate) breaker: Option<BreakerSpec>,
    pub(crate) bulkhead: Option<BulkheadSpec>,
    pub(crate) retry: Option<RetrySpec>,
    pub(crate) inline: InlineFlags,
    pub(crate) files: Vec<PathBuf>,
    /// The fallback function's name, where it was written.
    pub(crate) fallback: Option<(String, Span)>,
    pub(crate) fallback_on_failure: bool,
    /// Stale-if-error's window, where it was written.
    pub(crate) stale_if_error: Option<(Duration, Span)>,
    /// The budget per poll of the function's body, when monitored.
    pub(crate) poll_budget: Option<Duration>,
}

/// The macro-only rules: shape of the function for its class.
pub(crate) fn check_function(args: &Args, func: &Func, errors: &mut Errors) {
    let (attr_name, class) = match (args.class, args.resilient) {
        (Some((class, kind, _)), _) => (kind.name(), Some(class)),
        (None, Some(_)) => ("resilient", None),
        (None, None) if args.operation.is_some() => ("operation", None),
        (None, None) => return,
    };
    if !func.is_async() {
        errors.at(
            func.fn_span(),
            format!(
                "`#[{attr_name}]` needs an `async fn`: its mechanisms wait (for a bulkhead slot, a deadline, a backoff)\nhelp: make it `async fn`; to keep CPU work off the async workers, put `#[policy::isolate]` on the synchronous function instead"
            ),
        );
    }
    let borrows_self = func.receiver().is_some_and(|r| r.reference.is_some());
    let mutably = func
        .receiver()
        .is_some_and(|r| r.mutability.is_some() && r.reference.is_some());
    match class {
        Some(WorkClass::Deferred | WorkClass::Background) => {
            let what = attr_name;
            if let Some(ty) = func.output()
                && !is_unit_result(ty)
            {
                errors.at(
                    func.output_span(),
                    format!(
                        "a `#[{what}]` function cannot return a value: calling it schedules the work and returns `()` at once, so no caller can read a result\nhelp: return `()` or `Result<(), E>` (an `Err` is logged with the task's name)"
                    ),
                );
            }
            if borrows_self && let Some(receiver) = func.receiver() {
                errors.at(
                    syn::spanned::Spanned::span(receiver),
                    format!(
                        "a `#[{what}]` method cannot borrow `self`: the work runs after the caller is done with the borrow\nhelp: take `self` by value (an `Arc` or a cheap clone)"
                    ),
                );
            }
            for param in func.params() {
                if let Param::Typed(_, ty) = param
                    && let syn::Type::Reference(reference) = &*ty
                    && reference
                        .lifetime
                        .as_ref()
                        .is_none_or(|l| l.ident != "static")
                {
                    errors.at(
                        syn::spanned::Spanned::span(&*ty),
                        format!(
                            "`#[{what}]` work must own its inputs: it runs after the caller returns, when this borrow is over\nhelp: take an owned value (`String` for `&str`, `Vec<T>` for `&[T]`, an `Arc`)"
                        ),
                    );
                }
            }
        }
        _ => {
            if func.output().is_none() && func.is_async() {
                errors.at(
                    func.output_span(),
                    format!(
                        "a `#[{attr_name}]` function must return `Result<T, E>`: a refusal (`ResilienceError`) or an expiry (`DeadlineExceeded`) reaches the caller as its error\nhelp: return `Result<T, E>` with `E: From<policy::ResilienceError> + From<policy::DeadlineExceeded>`"
                    ),
                );
            }
            if let (Some(retry), true) = (&args.retry, mutably) {
                let span = match retry {
                    crate::args::Ref::Named(n) => n.span,
                    crate::args::Ref::Inline(_, span) => *span,
                };
                errors.at(
                    span,
                    "a retried method cannot take `&mut self`: each attempt needs its own access\nhelp: take `&self` (with interior mutability where needed), or remove the retry",
                );
            }
        }
    }
}

/// The fix as an attribute user writes it, where it differs from the `.policy` one.
fn attribute_help(code: &str) -> Option<&'static str> {
    Some(match code {
        "policy::retry-not-idempotent" => {
            "add `#[policy::idempotent]` if running it twice is safe, or remove the retry: a network timeout is exactly when the first attempt may have succeeded unseen"
        }
        "policy::deferred-not-idempotent" => {
            "deferred and background work is delivered at least once: add `#[policy::idempotent]` once running it twice is safe, or make it `#[policy::critical]`"
        }
        "policy::durable-not-critical" => {
            "a write that must be acknowledged is critical work: use `#[policy::critical]`, or drop `durable` if nobody waits for it"
        }
        "policy::retry-without-deadline" => {
            "add `deadline = \"...\"` to the attribute, or a `request { deadline = ... }` stanza to the crate's policy files"
        }
        "policy::shed-critical" => {
            "critical work is never shed for load; remove `shed_at`, or use `#[policy::deferred]` or `#[policy::background]`"
        }
        _ => return None,
    })
}

fn external(loc: Loc) -> Option<usize> {
    match loc {
        Loc::External(id) => usize::try_from(id).ok(),
        _ => None,
    }
}

/// Turns the validator's report into spanned errors: those about the function at its tokens,
/// those about the files once per compilation at the attribute, rendered with file, line,
/// column and snippet.
pub(crate) fn report(lowered: &Lowered, errors: &mut Errors) {
    let report = lowered.set.check();
    for diagnostic in &report.errors {
        report_one(lowered, diagnostic, errors);
    }
}

fn report_one(lowered: &Lowered, diagnostic: &Diagnostic, errors: &mut Errors) {
    let code = diagnostic.code();
    let ours = diagnostic
        .primary_loc()
        .and_then(external)
        .or_else(|| diagnostic.labels.iter().find_map(|l| external(l.loc)));
    match ours {
        Some(index) => {
            let span = lowered.spans.get(index).copied().unwrap_or(lowered.anchor);
            let help = attribute_help(&code)
                .map(str::to_owned)
                .or_else(|| diagnostic.help());
            let mut message = format!("{} [{code}]", diagnostic.message());
            // Labels in the files (a bound operation's own settings) are shown by position.
            for label in &diagnostic.labels {
                if let Some(position) = lowered.set.sources().position(label.loc) {
                    message.push_str(&format!("\nnote: {}: {position}", label.text));
                }
            }
            if let Some(help) = help {
                message.push_str("\nhelp: ");
                message.push_str(&help);
            }
            errors.at(span, message);
        }
        None => {
            let rendered = lowered.set.render(diagnostic);
            if crate::files::first_report(rendered.clone()) {
                let position = diagnostic
                    .primary_loc()
                    .and_then(|loc| lowered.set.sources().position(loc))
                    .map_or_else(|| "a policy file".to_owned(), |p| p.to_string());
                errors.at(
                    lowered.anchor,
                    format!(
                        "error in {position}: {} [{code}]\n{rendered}",
                        diagnostic.message()
                    ),
                );
            }
        }
    }
}

/// The plan for the expansion, from the lowered model (valid or not: on errors the function is
/// emitted unchanged, so this is only used when the report was clean).
pub(crate) fn plan(lowered: &Lowered, args: &Args) -> Option<Plan> {
    let spec = lowered.set.spec();
    let span_of = |loc: Loc| {
        external(loc)
            .and_then(|i| lowered.spans.get(i).copied())
            .unwrap_or(lowered.anchor)
    };
    let operation = spec.operations.get(&lowered.op)?;
    let named =
        |name: &Option<policy_lang::Located<String>>| name.as_ref().map(|n| n.value.clone());
    let breaker = named(&operation.breaker).and_then(|n| spec.breakers.get(&n).cloned());
    let bulkhead = named(&operation.bulkhead).and_then(|n| spec.bulkheads.get(&n).cloned());
    let retry = named(&operation.retry).and_then(|n| spec.retries.get(&n).cloned());
    Some(Plan {
        op: lowered.op.clone(),
        class: operation.class.value,
        deadline: spec.governing_deadline(operation).map(|d| d.value),
        min_budget: operation.min_budget.as_ref().map(|d| d.value),
        expected_cost: operation.expected_cost.as_ref().map(|d| d.value),
        shed_at: operation.shed_at.as_ref().map(|r| r.value),
        thresholds: spec.shedding_thresholds(),
        breaker,
        bulkhead,
        retry,
        inline: lowered.inline,
        files: lowered.files.clone(),
        fallback: operation
            .fallback
            .as_ref()
            .map(|f| (f.value.clone(), span_of(f.loc))),
        fallback_on_failure: args.fallback_on_failure.is_some(),
        stale_if_error: operation
            .stale_if_error
            .as_ref()
            .map(|s| (s.value, span_of(s.loc))),
        poll_budget: args.poll_budget.as_ref().map(|b| b.value),
    })
}

/// Where an attribute-level error goes when there is no better token.
pub(crate) fn anchor_of(args: &Args, func: &Func) -> Span {
    args.class
        .map(|c| c.2)
        .or(args.resilient)
        .unwrap_or_else(|| func.ident_span())
}
