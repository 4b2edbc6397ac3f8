//! Step 2: every rule, in one step, returning the validated [`Plan`] the expansion reads.
//!
//! The combination rules live in `velocity-policy-lang` and run on the lowered model, exactly as they do
//! for `.policy` files; here are only the rules a file cannot know: which attributes are on the
//! function, and its shape (is it async, what does it return, does it borrow, can each attempt
//! have its own copy of the arguments). Every rule runs and every error is collected, so a user
//! fixes them all in one build; each is spanned at the offending token and says the fix.
//!
//! The plan is read from the model alone, never from the attribute's arguments: what an
//! attribute and a `.policy` operation say is expanded the same way.

use std::path::PathBuf;
use std::time::Duration;

use proc_macro2::{Ident, Span, TokenStream};
use quote::{ToTokens, quote_spanned};
use syn::spanned::Spanned as _;
use syn::{Pat, Type};
use velocity_policy_lang::{
    BreakerSpec, BulkheadSpec, Diagnostic, HedgeSpec, Loc, OperationSpec, PoolKind, QueueSpec,
    RatelimitSpec, RetrySpec, Spec, WorkClass,
};

use crate::args::{Args, Errors};
use crate::func::{Func, Param, is_unit_result};
use crate::lower::{InlineFlags, Lowered};

/// What the expansion needs, validated: nothing in it can make the expansion fail.
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
    /// The hedge each attempt runs under: the attempt again when it is slow.
    pub(crate) hedge: Option<HedgeSpec>,
    /// The rate limit that admits each call, after the deadline and shedding.
    pub(crate) ratelimit: Option<RatelimitSpec>,
    /// The chaos drill injected inside each attempt (feature `chaos`).
    pub(crate) chaos: Option<velocity_policy_lang::ChaosSpec>,
    pub(crate) inline: InlineFlags,
    pub(crate) files: Vec<PathBuf>,
    /// The budget per poll of the function's body, when monitored.
    pub(crate) poll_budget: Option<Duration>,
    /// What answers when the work cannot run.
    pub(crate) answer: Option<Answer>,
    /// Each attempt's copy of the arguments, when retried or hedged: `(name, mutable, type's
    /// span)`.
    pub(crate) per_attempt: Vec<(Ident, bool, Span)>,
    /// The pool, for isolated work.
    pub(crate) isolate: Option<Isolate>,
    /// Where the file's operation it bound to is declared, if it bound to one.
    pub(crate) bound: Option<String>,
    /// The durable queue background work goes to when one is installed.
    pub(crate) queue: Option<Queued>,
}

/// Background work on a durable queue: the queue's name and the arguments it encodes.
pub(crate) struct Queued {
    pub(crate) name: String,
    pub(crate) span: Span,
    /// The numbers of its `queue NAME { ... }` stanza, when the files declare one.
    pub(crate) settings: Option<QueueSpec>,
    /// Every parameter, by name and type: the task's arguments, in order.
    pub(crate) params: Vec<(Ident, Type)>,
}

/// A fallback function, stale-if-error, or both.
pub(crate) struct Answer {
    /// The fallback function's path, spanned at the literal that named it.
    pub(crate) fallback: Option<Fallback>,
    /// Stale-if-error's window, where it was written.
    pub(crate) stale_if_error: Option<(Duration, Span)>,
    /// The arguments the fallback is given and the stale cache is keyed on.
    pub(crate) params: Vec<(Ident, Type)>,
}

/// The function that answers instead.
pub(crate) struct Fallback {
    /// Its name as written, for the fallback record.
    pub(crate) name: String,
    /// Its path, spanned at the literal.
    pub(crate) path: TokenStream,
    pub(crate) span: Span,
    /// Whether it also answers the work's own failures.
    pub(crate) on_failure: bool,
}

/// Where isolated work runs.
pub(crate) struct Isolate {
    pub(crate) pool: PoolKind,
    /// Where the pool was chosen, for the error when the facade lacks the `rayon` feature.
    pub(crate) pool_span: Span,
    pub(crate) max_concurrent: Option<u32>,
    pub(crate) max_queued: Option<u32>,
}

/// Runs every rule; returns the plan when none failed.
pub(crate) fn validate(
    args: &Args,
    func: &Func,
    lowered: &Lowered,
    errors: &mut Errors,
) -> Option<Plan> {
    attributes_combine(args, errors);
    match args.isolate {
        Some(_) => isolated_function(func, errors),
        None => function_fits_its_class(args, func, errors),
    }
    report(lowered, errors);
    let plan = plan(args, func, lowered, errors);
    if errors.is_empty() { plan } else { None }
}

/// `#[isolate]` stands alone; a class is declared once.
fn attributes_combine(args: &Args, errors: &mut Errors) {
    if let Some(span) = args.isolate
        && (args.class.is_some() || args.resilient.is_some() || args.operation.is_some())
    {
        errors.at(
            span,
            "`#[isolate]` stands alone: it turns a synchronous function into an async one that runs on a pool; call that function from a `#[critical]` or `#[resilient]` one",
        );
    }
}

/// `#[isolate]` goes on a synchronous function that owns its inputs.
fn isolated_function(func: &Func, errors: &mut Errors) {
    if func.is_async() {
        errors.at(
            func.fn_span(),
            "`#[isolate]` goes on a synchronous function: it moves CPU work off the async workers; an `async fn` already yields at its awaits",
        );
    }
    if let Some(receiver) = func.receiver() {
        errors.at(
            receiver.span(),
            "isolated work runs on another thread and may outlive its caller: take owned arguments instead of `self` (an associated function taking an `Arc` works)",
        );
    }
    for param in func.params() {
        if let Param::Typed(_, ty) = param
            && borrows(&ty)
        {
            errors.at(
                ty.span(),
                "isolated work runs on another thread and may outlive its caller: take an owned value (`String` for `&str`, `Vec<T>` for `&[T]`, an `Arc`)",
            );
        }
    }
}

/// A reference that is not `'static`.
fn borrows(ty: &Type) -> bool {
    matches!(ty, Type::Reference(reference)
        if reference.lifetime.as_ref().is_none_or(|l| l.ident != "static"))
}

/// The macro-only rules: the shape of the function for its class.
fn function_fits_its_class(args: &Args, func: &Func, errors: &mut Errors) {
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
                "`#[{attr_name}]` needs an `async fn`: its mechanisms wait (for a bulkhead slot, a deadline, a backoff)\nhelp: make it `async fn`; to keep CPU work off the async workers, put `#[velocity_policy::isolate]` on the synchronous function instead"
            ),
        );
    }
    let borrows_self = func
        .receiver()
        .is_some_and(|r| matches!(r.kind, syn::ReceiverKind::Reference(..)));
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
                    receiver.span(),
                    format!(
                        "a `#[{what}]` method cannot borrow `self`: the work runs after the caller is done with the borrow\nhelp: take `self` by value (an `Arc` or a cheap clone)"
                    ),
                );
            }
            for param in func.params() {
                if let Param::Typed(_, ty) = param
                    && borrows(&ty)
                {
                    errors.at(
                        ty.span(),
                        format!(
                            "`#[{what}]` work must own its inputs: it runs after the caller returns, when this borrow is over\nhelp: take an owned value (`String` for `&str`, `Vec<T>` for `&[T]`, an `Arc`)"
                        ),
                    );
                }
            }
        }
        _ => {
            if let Some(ty) = func.output()
                && mentions_impl_trait(ty.to_token_stream())
            {
                errors.at(
                    ty.span(),
                    format!(
                        "a `#[{attr_name}]` function must return `Result<T, E>` naming its types, not `impl Trait`: a refusal (`ResilienceError`) or an expiry (`DeadlineExceeded`) reaches the caller as `E`, and the expansion writes the return type out\nhelp: return `Result<T, E>` with `E: From<velocity_policy::ResilienceError> + From<velocity_policy::DeadlineExceeded>`, for a handler `async fn handler() -> Result<Json<Doc>, AppError>` (with `impl IntoResponse for AppError`), or keep the handler plain and call a `#[{attr_name}]` function from it"
                    ),
                );
            }
            if func.output().is_none() && func.is_async() {
                errors.at(
                    func.output_span(),
                    format!(
                        "a `#[{attr_name}]` function must return `Result<T, E>`: a refusal (`ResilienceError`) or an expiry (`DeadlineExceeded`) reaches the caller as its error\nhelp: return `Result<T, E>` with `E: From<velocity_policy::ResilienceError> + From<velocity_policy::DeadlineExceeded>`"
                    ),
                );
            }
        }
    }
}

/// Whether a type has `impl Trait` in it (`impl IntoResponse`, `Result<impl Display, E>`).
fn mentions_impl_trait(tokens: proc_macro2::TokenStream) -> bool {
    tokens.into_iter().any(|token| match token {
        proc_macro2::TokenTree::Ident(ident) => ident == "impl",
        proc_macro2::TokenTree::Group(group) => mentions_impl_trait(group.stream()),
        _ => false,
    })
}

/// The fix as an attribute user writes it, where it differs from the `.policy` one.
fn attribute_help(code: &str) -> Option<&'static str> {
    Some(match code {
        "policy::retry-not-idempotent" => {
            "add `#[velocity_policy::idempotent]` if running it twice is safe, or remove the retry: a network timeout is exactly when the first attempt may have succeeded unseen"
        }
        "policy::hedge-not-idempotent" => {
            "add `#[velocity_policy::idempotent]` if running it twice at once is safe, or remove the hedge: a hedge starts the work again while the first attempt may still succeed"
        }
        "policy::deferred-not-idempotent" => {
            "deferred and background work is delivered at least once: add `#[velocity_policy::idempotent]` once running it twice is safe, or make it `#[velocity_policy::critical]`"
        }
        "policy::durable-not-critical" => {
            "a write that must be acknowledged is critical work: use `#[velocity_policy::critical]`, or drop `durable` if nobody waits for it"
        }
        "policy::retry-without-deadline" => {
            "add `deadline = \"...\"` to the attribute, or a `request { deadline = ... }` stanza to the crate's policy files"
        }
        "policy::shed-critical" => {
            "critical work is never shed for load; remove `shed_at`, or use `#[velocity_policy::deferred]` or `#[velocity_policy::background]`"
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

/// The one validator's report: what the files alone get wrong at the attribute, rendered with
/// file, line, column and snippet (by every expansion that reads them), and what concerns
/// the function at its tokens.
fn report(lowered: &Lowered, errors: &mut Errors) {
    for problem in &lowered.problems {
        errors.at(lowered.anchor, problem);
    }
    for diagnostic in &lowered.set.check().errors {
        report_one(lowered, diagnostic, errors);
    }
}

fn report_one(lowered: &Lowered, diagnostic: &Diagnostic, errors: &mut Errors) {
    let code = diagnostic.code();
    let ours = diagnostic
        .primary_loc()
        .and_then(external)
        .or_else(|| diagnostic.labels.iter().find_map(|l| external(l.loc)));
    // The files' own errors are `lowered.problems`, reported above.
    let Some(index) = ours else {
        return;
    };
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

/// The plan, from the model; the rules that need both the model and the function's shape
/// (each attempt's copy of the arguments, the answer's parameters) run here.
fn plan(args: &Args, func: &Func, lowered: &Lowered, errors: &mut Errors) -> Option<Plan> {
    let spec = lowered.set.spec();
    let span_of = |loc: Loc| {
        external(loc)
            .and_then(|i| lowered.spans.get(i).copied())
            .unwrap_or(lowered.anchor)
    };
    let Some(operation) = spec.operations.get(&lowered.op) else {
        errors.at(lowered.anchor, "internal: the operation was not lowered");
        return None;
    };
    if args.isolate.is_none()
        && let Some(isolate) = &operation.isolate
    {
        errors.at(
            lowered.anchor,
            format!(
                "operation `{}` is isolated in the policy files (`isolate = {}`): put `#[velocity_policy::isolate]` on the synchronous function that does its CPU work, and call it from this one",
                lowered.op, isolate.pool.value
            ),
        );
    }
    // Each attempt, a retry's or a hedge's, gets its own copy of the arguments.
    let per_attempt = match operation.retry.as_ref().or(operation.hedge.as_ref()) {
        Some(repeated) if args.isolate.is_none() => {
            let scheduled = operation.class.value != WorkClass::Critical;
            per_attempt_copies(func, span_of(repeated.loc), scheduled, errors)
        }
        _ => Vec::new(),
    };
    Some(Plan {
        answer: answer(operation, func, &span_of, errors),
        queue: queued(spec, operation, func, &span_of, errors),
        per_attempt,
        isolate: operation.isolate.as_ref().map(|isolate| Isolate {
            pool: isolate.pool.value,
            pool_span: span_of(isolate.pool.loc),
            max_concurrent: isolate.max_concurrent.as_ref().map(|m| m.value),
            max_queued: isolate.max_queued.as_ref().map(|m| m.value),
        }),
        ..mechanisms(lowered, operation)
    })
}

/// What the operation names and sets, read from the model: its class, deadline, budgets and
/// mechanisms; no answer, no per-attempt copies and no pool (those need a function).
fn mechanisms(lowered: &Lowered, operation: &OperationSpec) -> Plan {
    let spec = lowered.set.spec();
    let named = |name: &Option<velocity_policy_lang::Located<String>>| {
        name.as_ref().map(|n| n.value.clone())
    };
    Plan {
        op: lowered.op.clone(),
        class: operation.class.value,
        deadline: spec.governing_deadline(operation).map(|d| d.value),
        min_budget: operation.min_budget.as_ref().map(|d| d.value),
        expected_cost: operation.expected_cost.as_ref().map(|d| d.value),
        shed_at: operation.shed_at.as_ref().map(|r| r.value),
        thresholds: spec.shedding_thresholds(),
        breaker: named(&operation.breaker).and_then(|n| spec.breakers.get(&n).cloned()),
        bulkhead: named(&operation.bulkhead).and_then(|n| spec.bulkheads.get(&n).cloned()),
        retry: named(&operation.retry).and_then(|n| spec.retries.get(&n).cloned()),
        hedge: named(&operation.hedge).and_then(|n| spec.hedges.get(&n).cloned()),
        ratelimit: named(&operation.ratelimit).and_then(|n| spec.ratelimits.get(&n).cloned()),
        chaos: named(&operation.chaos).and_then(|n| spec.chaos.get(&n).cloned()),
        inline: lowered.inline,
        files: lowered.files.clone(),
        bound: lowered.bound.clone(),
        poll_budget: operation.poll_budget.as_ref().map(|b| b.value),
        answer: None,
        per_attempt: Vec::new(),
        isolate: None,
        queue: None,
    }
}

/// `queue = ...` (the attribute's or the file operation's): on a free function whose arguments
/// it can encode. That only background work may name one is the validator's rule
/// (`policy::queue-not-background`), for files and attributes alike.
fn queued(
    spec: &Spec,
    operation: &OperationSpec,
    func: &Func,
    span_of: &dyn Fn(Loc) -> Span,
    errors: &mut Errors,
) -> Option<Queued> {
    let queue = operation.queue.as_ref()?;
    if operation.class.value != WorkClass::Background {
        return None;
    }
    let span = span_of(queue.loc);
    if let Some(receiver) = func.receiver() {
        errors.at(
            receiver.span(),
            "work on a queue cannot take `self`: a task is its encoded arguments, run by whichever instance takes it; pass what it needs as owned arguments",
        );
    }
    if func.item.sig.generics.params.iter().next().is_some() {
        errors.at(
            func.item.sig.generics.span(),
            "work on a queue cannot have generic parameters: a worker decodes its arguments into one concrete type",
        );
    }
    let params = answer_params(func, "work on a queue", errors);
    for (_, ty) in &params {
        if matches!(ty, Type::Reference(_)) {
            errors.at(
                ty.span(),
                "work on a queue takes owned arguments (`String` for `&str`): they are encoded and run later, elsewhere",
            );
        }
    }
    Some(Queued {
        name: queue.value.clone(),
        span,
        settings: spec.queues.get(&queue.value).cloned(),
        params,
    })
}

/// `operation_layer!("name")`: the same validator's report on the files and the operation,
/// then what a layer cannot apply. The plan when nothing failed (its answer, per-attempt
/// copies and pool are always empty: a layer has no function to read them from).
pub(crate) fn validate_layer(lowered: &Lowered, errors: &mut Errors) -> Option<Plan> {
    report(lowered, errors);
    if !errors.is_empty() {
        return None;
    }
    let Some(operation) = lowered.set.spec().operations.get(&lowered.op) else {
        errors.at(lowered.anchor, "internal: the operation was not lowered");
        return None;
    };
    let op = &lowered.op;
    let position = |loc: Loc| {
        lowered
            .set
            .sources()
            .position(loc)
            .map_or_else(String::new, |p| format!(" (at {p})"))
    };
    if operation.class.value != WorkClass::Critical {
        let class = match operation.class.value {
            WorkClass::Deferred => "deferred",
            _ => "background",
        };
        errors.at(
            lowered.anchor,
            format!(
                "operation `{op}` is {class} work{}: a layer runs the call while its caller waits, so it cannot schedule it for later\nhelp: put `#[velocity_policy::operation(\"{op}\")]` on the async function that does the work, or make the operation `critical`",
                position(operation.class.loc)
            ),
        );
    }
    let unsupported = [
        ("fallback", operation.fallback.as_ref().map(|f| f.loc)),
        (
            "stale_if_error",
            operation.stale_if_error.as_ref().map(|s| s.loc),
        ),
        ("poll_budget", operation.poll_budget.as_ref().map(|p| p.loc)),
        ("isolate", operation.isolate.as_ref().map(|i| i.pool.loc)),
    ];
    for (setting, loc) in unsupported {
        if let Some(loc) = loc {
            errors.at(
                lowered.anchor,
                format!(
                    "operation `{op}` sets `{setting}`{}, which a layer cannot apply: it needs the function's arguments or body\nhelp: put `#[velocity_policy::operation(\"{op}\")]` on the function instead, or declare an operation without `{setting}` for the layer",
                    position(loc)
                ),
            );
        }
    }
    if let Some(hedge) = &operation.hedge {
        errors.at(
            lowered.anchor,
            format!(
                "operation `{op}` sets `hedge = {}`{}, which `operation_layer!` does not apply: the operation layer has no hedging step\nhelp: put `#[velocity_policy::operation(\"{op}\")]` on the function instead, or build the stack by hand with `HedgeLayer::new(Registry::global().find_hedge(..))` above the breaker and bulkhead layers",
                hedge.value,
                position(hedge.loc)
            ),
        );
    }
    errors.is_empty().then(|| mechanisms(lowered, operation))
}

/// Idents bound by a parameter pattern, for re-binding a copy per attempt.
fn bound_idents(pat: &Pat, out: &mut Vec<(Ident, bool)>) -> bool {
    match pat {
        Pat::Ident(p) if p.subpat.is_none() => {
            out.push((p.ident.clone(), p.mutability.is_some()));
            true
        }
        Pat::Tuple(t) => t.elems.iter().all(|p| bound_idents(p, out)),
        Pat::TupleStruct(t) => t.elems.iter().all(|p| bound_idents(p, out)),
        Pat::Struct(s) => s.fields.iter().all(|f| bound_idents(&f.pat, out)),
        Pat::Wild(_) => true,
        Pat::Paren(p) => bound_idents(&p.pat, out),
        _ => false,
    }
}

/// Each attempt of a retried function gets its own copy of every argument: the names to copy.
/// (A scheduled method that borrows `self` is reported by [`function_fits_its_class`].)
fn per_attempt_copies(
    func: &Func,
    retry: Span,
    scheduled: bool,
    errors: &mut Errors,
) -> Vec<(Ident, bool, Span)> {
    let mut copies = Vec::new();
    for param in func.params() {
        match param {
            Param::Receiver(receiver) => match &receiver.kind {
                syn::ReceiverKind::Reference(_, _, Some(_)) if !scheduled => errors.at(
                    retry,
                    "a retried method cannot take `&mut self`: each attempt needs its own access\nhelp: take `&self` (with interior mutability where needed), or remove the retry",
                ),
                syn::ReceiverKind::Reference(..) => {}
                _ => errors.at(
                    receiver.span(),
                    "a retried method takes `&self`: each attempt needs its own access, and `self` by value can be used only once",
                ),
            },
            Param::Typed(pat, ty) => {
                let mut idents = Vec::new();
                if !bound_idents(&pat, &mut idents) {
                    errors.at(
                        pat.span(),
                        "a retried function's parameters must be names or simple patterns, so each attempt can get its own copy",
                    );
                }
                let span = ty.span();
                copies.extend(
                    idents
                        .into_iter()
                        .map(|(ident, mutable)| (ident, mutable, span)),
                );
            }
        }
    }
    copies
}

/// The fallback and stale-if-error of critical work, and the parameters they take.
fn answer(
    operation: &OperationSpec,
    func: &Func,
    span_of: &dyn Fn(Loc) -> Span,
    errors: &mut Errors,
) -> Option<Answer> {
    if operation.class.value != WorkClass::Critical
        || (operation.fallback.is_none() && operation.stale_if_error.is_none())
    {
        return None;
    }
    let what = if operation.fallback.is_some() {
        "a fallback"
    } else {
        "`stale_if_error`"
    };
    let params = answer_params(func, what, errors);
    let stale_if_error = operation.stale_if_error.as_ref().map(|stale| {
        let span = span_of(stale.loc);
        if func.item.sig.generics.type_params().next().is_some() {
            errors.at(
                span,
                "`stale_if_error` keeps results in a cache built once per function, so the function cannot have type parameters",
            );
        }
        for (_, ty) in &params {
            if borrows(ty) {
                errors.at(
                    ty.span(),
                    "`stale_if_error` keys its cache on the arguments, so they must be owned (`String` for `&str`)",
                );
            }
        }
        (stale.value, span)
    });
    let fallback = operation.fallback.as_ref().map(|fallback| {
        let span = span_of(fallback.loc);
        let path = match syn::parse_str::<syn::Path>(&fallback.value) {
            // The function's name, at the literal that named it.
            Ok(path) => path
                .to_token_stream()
                .into_iter()
                .map(|mut token| {
                    token.set_span(span);
                    token
                })
                .collect(),
            Err(_) => {
                errors.at(
                    span,
                    format!(
                        "`{}` is not a function's name: the fallback must name a function in scope, such as `anonymous` or `Self::anonymous`",
                        fallback.value
                    ),
                );
                quote_spanned!(span=> anonymous)
            }
        };
        Fallback {
            name: fallback.value.clone(),
            path,
            span,
            on_failure: operation.fallback_on_failure.is_some(),
        }
    });
    Some(Answer {
        fallback,
        stale_if_error,
        params,
    })
}

/// The parameters a fallback or a stale key is made of: every parameter but `self`, each a
/// plain name, with its type.
fn answer_params(func: &Func, what: &str, errors: &mut Errors) -> Vec<(Ident, Type)> {
    let mut params = Vec::new();
    for param in func.params() {
        if let Param::Typed(pat, ty) = param {
            let Pat::Ident(ident) = &*pat else {
                errors.at(
                    pat.span(),
                    format!(
                        "{what} needs plain parameter names: it is given the arguments by name"
                    ),
                );
                continue;
            };
            if matches!(&*ty, Type::ImplTrait(_)) {
                errors.at(
                    ty.span(),
                    format!(
                        "{what} cannot name an `impl Trait` argument's type: use a type parameter or a concrete type"
                    ),
                );
                continue;
            }
            params.push((ident.ident.clone(), *ty));
        }
    }
    params
}

/// Where an attribute-level error goes when there is no better token.
pub(crate) fn anchor_of(args: &Args, func: &Func) -> Span {
    args.class
        .map(|c| c.2)
        .or(args.resilient)
        .or(args.isolate)
        .unwrap_or_else(|| func.ident_span())
}
