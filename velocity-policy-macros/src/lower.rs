//! Step 2 begins: the attributes lowered to the same model as `.policy` files.
//!
//! The function becomes an [`OperationSpec`] (bound to the file's operation of the same name,
//! or the one `#[operation("..")]` names), inline mechanisms become named items, and every
//! value an attribute gave gets a [`Loc::External`] location whose span is kept here, so the
//! one validator's diagnostics can point back at the right token.

use std::path::PathBuf;
use std::time::Duration;

use proc_macro2::Span;
use velocity_policy_lang::{
    AdaptiveSpec, Backoff, BreakerSpec, BulkheadSpec, HedgeSpec, IsolateSpec, Loc, Located,
    OpenAfter, OperationSpec, PolicySet, PoolKind, RetrySpec, Sharing, WorkClass,
};

use crate::args::{
    Args, Errors, InlineBreaker, InlineBulkhead, InlineHedge, InlineRetry, Ref, Spanned,
};
use crate::files::Loaded;

/// The model for one function, and the spans its external locations stand for.
pub(crate) struct Lowered {
    pub(crate) set: PolicySet,
    pub(crate) spans: Vec<Span>,
    /// The operation's name in the model.
    pub(crate) op: String,
    /// Where diagnostics about the files themselves are reported.
    pub(crate) anchor: Span,
    pub(crate) files: Vec<PathBuf>,
    /// Which mechanisms were given inline (their runtime names are made unique per function).
    pub(crate) inline: InlineFlags,
    /// What is wrong in the files on their own (see [`Loaded::problems`]).
    pub(crate) problems: Vec<String>,
    /// Where the file's operation this function bound to is declared (`policies/a.policy:3:11`,
    /// relative to the package), when it bound to one.
    pub(crate) bound: Option<String>,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct InlineFlags {
    pub(crate) breaker: bool,
    pub(crate) bulkhead: bool,
    pub(crate) retry: bool,
    pub(crate) hedge: bool,
}

/// Hands out external locations.
struct Locs {
    spans: Vec<Span>,
}

impl Locs {
    fn at(&mut self, span: Span) -> Loc {
        let id = u32::try_from(self.spans.len()).unwrap_or(u32::MAX);
        self.spans.push(span);
        Loc::External(id)
    }

    fn located<T>(&mut self, spanned: &Spanned<T>) -> Located<T>
    where
        T: Clone,
    {
        Located::new(spanned.value.clone(), self.at(spanned.span))
    }
}

fn missing(errors: &mut Errors, span: Span, what: &str, key: &str, example: &str) {
    errors.at(
        span,
        format!("an inline {what} needs `{key}`: for example `{example}`"),
    );
}

fn inline_breaker(
    name: &str,
    b: &InlineBreaker,
    span: Span,
    locs: &mut Locs,
    errors: &mut Errors,
) -> Option<BreakerSpec> {
    const EXAMPLE: &str = "breaker(failures = 5, within = \"30s\", cooldown = \"20s\")";
    let loc = locs.at(span);
    let Some(within) = &b.within else {
        missing(errors, span, "breaker", "within", EXAMPLE);
        return None;
    };
    let Some(cooldown) = &b.cooldown else {
        missing(errors, span, "breaker", "cooldown", EXAMPLE);
        return None;
    };
    let open_after = match (&b.failures, &b.ratio) {
        (Some(failures), None) => Located::new(
            OpenAfter::Failures {
                count: failures.value,
                window: within.value,
            },
            locs.at(failures.span),
        ),
        (None, Some(ratio)) => {
            let Some(min_calls) = &b.min_calls else {
                missing(
                    errors,
                    ratio.span,
                    "failure-ratio breaker",
                    "min_calls",
                    "breaker(ratio = 0.5, min_calls = 20, within = \"30s\", cooldown = \"20s\")",
                );
                return None;
            };
            Located::new(
                OpenAfter::FailureRatio {
                    ratio: ratio.value,
                    min_calls: min_calls.value,
                    window: within.value,
                },
                locs.at(ratio.span),
            )
        }
        (Some(failures), Some(_)) => {
            errors.at(
                failures.span,
                "give `failures` or `ratio`, not both: a breaker opens on a count or on a share of calls",
            );
            return None;
        }
        (None, None) => {
            missing(errors, span, "breaker", "failures", EXAMPLE);
            return None;
        }
    };
    let sharing = match (&b.quorum, b.trips_only) {
        (Some(q), None) => Located::new(Sharing::Openings { quorum: q.value }, locs.at(q.span)),
        (None, Some(t)) => Located::new(Sharing::TripsOnly, locs.at(t)),
        (None, None) => Located::new(Sharing::Local, loc),
        (Some(q), Some(_)) => {
            errors.at(
                q.span,
                "give `quorum` or `trips_only`, not both: they are two ways to share",
            );
            return None;
        }
    };
    let mut spec = BreakerSpec::new(
        Located::new(name.to_owned(), loc),
        open_after,
        locs.located(cooldown),
        loc,
    );
    spec.set_sharing(sharing);
    if let Some(probation) = &b.probation {
        spec.set_probation(locs.located(probation));
    }
    Some(spec)
}

fn inline_bulkhead(
    name: &str,
    b: &InlineBulkhead,
    span: Span,
    locs: &mut Locs,
    errors: &mut Errors,
) -> Option<BulkheadSpec> {
    const ADAPTIVE: &str = "bulkhead(adaptive(min = 4, max = 64), max_queued = 2)";
    let loc = locs.at(span);
    let name = Located::new(name.to_owned(), loc);
    let mut spec = match (&b.adaptive, &b.max_concurrent) {
        (Some(adaptive), max_concurrent) => {
            let (Some(min), Some(max)) = (&adaptive.value.min, &adaptive.value.max) else {
                let key = if adaptive.value.min.is_none() {
                    "min"
                } else {
                    "max"
                };
                missing(errors, adaptive.span, "adaptive bulkhead", key, ADAPTIVE);
                return None;
            };
            let bounds =
                AdaptiveSpec::new(locs.located(min), locs.located(max), locs.at(adaptive.span));
            let mut spec = BulkheadSpec::adaptive(name, bounds, loc);
            // Both: kept, so that the validator names the fix.
            if let Some(max_concurrent) = max_concurrent {
                spec.set_max_concurrent(locs.located(max_concurrent));
            }
            spec
        }
        (None, Some(max_concurrent)) => BulkheadSpec::new(name, locs.located(max_concurrent), loc),
        (None, None) => {
            missing(
                errors,
                span,
                "bulkhead",
                "max_concurrent",
                "bulkhead(max_concurrent = 4, max_queued = 2)",
            );
            return None;
        }
    };
    if let Some(q) = &b.max_queued {
        spec.set_max_queued(locs.located(q));
    }
    Some(spec)
}

fn inline_retry(
    name: &str,
    r: &InlineRetry,
    span: Span,
    locs: &mut Locs,
    errors: &mut Errors,
) -> Option<RetrySpec> {
    let loc = locs.at(span);
    let Some(attempts) = &r.attempts else {
        missing(
            errors,
            span,
            "retry",
            "attempts",
            "retry(attempts = 3, base = \"50ms\", cap = \"1s\")",
        );
        return None;
    };
    let base = r
        .base
        .as_ref()
        .map_or(Duration::from_millis(50), |b| b.value);
    let cap = r.cap.as_ref().map_or(Duration::from_secs(1), |c| c.value);
    let backoff_loc = r
        .base
        .as_ref()
        .or(r.cap.as_ref())
        .map_or(loc, |s| locs.at(s.span));
    let mut spec = RetrySpec::new(
        Located::new(name.to_owned(), loc),
        locs.located(attempts),
        Located::new(Backoff::FullJitter { base, cap }, backoff_loc),
        loc,
    );
    if let Some(timeout) = &r.attempt_timeout {
        spec.set_attempt_timeout(locs.located(timeout));
    }
    Some(spec)
}

fn inline_hedge(
    name: &str,
    h: &InlineHedge,
    span: Span,
    locs: &mut Locs,
    errors: &mut Errors,
) -> Option<HedgeSpec> {
    let loc = locs.at(span);
    let Some(after) = &h.after else {
        missing(
            errors,
            span,
            "hedge",
            "after",
            "hedge(after = \"p95\", max = 2)",
        );
        return None;
    };
    let max = h
        .max
        .as_ref()
        .map_or(Located::new(2, loc), |m| locs.located(m));
    Some(HedgeSpec::new(
        Located::new(name.to_owned(), loc),
        locs.located(after),
        max,
        loc,
    ))
}

/// Builds the model for the function `fn_name` (spanned at `fn_span`) from `args` and the
/// loaded files.
pub(crate) fn lower(
    args: &Args,
    fn_name: &str,
    fn_span: Span,
    loaded: Loaded,
    binding: crate::files::Binding,
    errors: &mut Errors,
) -> Lowered {
    let Loaded {
        mut set,
        files,
        dir,
        problems,
    } = loaded;
    let mut locs = Locs { spans: Vec::new() };
    let anchor = args
        .operation
        .as_ref()
        .map(|o| o.span)
        .or(args.class.map(|c| c.2))
        .or(args.resilient)
        .or(args.isolate)
        .unwrap_or(fn_span);

    let op = args
        .operation
        .as_ref()
        .map_or_else(|| fn_name.to_owned(), |o| o.value.clone());
    // With `bind = "explicit"`, a function's own name binds nothing: only the operation it
    // names does.
    let binds = args.operation.is_some() || binding == crate::files::Binding::ByName;
    let base = binds
        .then(|| set.spec().operations.get(&op).cloned())
        .flatten();
    if let (Some(named), None) = (&args.operation, &base) {
        let known: Vec<&str> = set.spec().operations.names().collect();
        let hint = match velocity_policy_lang::suggest::closest(&named.value, known.iter().copied())
        {
            Some(close) => format!("did you mean `{close}`?"),
            None if known.is_empty() => match &dir {
                Some(dir) => format!("no operation is declared in `{}`", dir.display()),
                None => "no `policies/` directory was found beside Cargo.toml".to_owned(),
            },
            None => format!("declared operations: {}", known.join(", ")),
        };
        errors.at(
            named.span,
            format!(
                "unknown operation `{}` [policy::unknown-name]\nnote: {}\nhelp: {hint}",
                named.value,
                searched(&files, dir.as_deref())
            ),
        );
    }

    let fn_loc = locs.at(fn_span);
    let class = match (args.class, args.isolate) {
        (Some((class, _, span)), _) => Located::new(class, locs.at(span)),
        // Isolated work is waited for by its caller, within the caller's deadline.
        (None, Some(span)) => Located::new(WorkClass::Critical, locs.at(span)),
        (None, None) => base
            .as_ref()
            .map_or(Located::new(WorkClass::Critical, fn_loc), |b| {
                b.class.clone()
            }),
    };
    // The attribute's class against the file's: a function the file declares `critical` is not
    // made `deferred` by its attribute in silence (other values the attribute gives override
    // the file's; see the `policy` crate docs, "Attributes and files"). A durable operation
    // made deferred or background is left to `policy::durable-not-critical`, which says why
    // the work must be critical: one error for one mistake.
    if let (Some((attr_class, _, span)), Some(base)) = (args.class, &base)
        && attr_class != base.class.value
        && !(base.is_durable() && attr_class != WorkClass::Critical)
    {
        let declared = set.sources().position(base.class.loc).map_or_else(
            || "the policy files".to_owned(),
            |p| format!("{}:{}:{}", p.file, p.line, p.column),
        );
        errors.at(
            span,
            format!(
                "`#[{attr_class}]` on `{op}`, but `{declared}` declares operation `{op}` `{}` [policy::conflicting-classes]\nhelp: keep one class: change the attribute or the file; or bind the function to another operation with `#[velocity_policy::operation(\"...\")]`",
                base.class.value
            ),
        );
    }
    let bound = base.as_ref().and_then(|base| {
        let position = set.sources().position(base.name.loc)?;
        let file = std::path::Path::new(position.file);
        let file = std::env::var_os("CARGO_MANIFEST_DIR")
            .and_then(|dir| {
                file.strip_prefix(dir)
                    .ok()
                    .map(std::path::Path::to_path_buf)
            })
            .unwrap_or_else(|| file.to_path_buf());
        Some(format!(
            "{}:{}:{}",
            file.display(),
            position.line,
            position.column
        ))
    });
    let mut operation = match &base {
        Some(base) => {
            let mut operation = base.clone();
            operation.class = class;
            operation
        }
        None => OperationSpec::new(Located::new(op.clone(), fn_loc), class, fn_loc),
    };
    if let Some(span) = args.idempotent {
        operation.idempotent = Some(locs.at(span));
    }
    if let Some(span) = args.durable {
        operation.durable = Some(locs.at(span));
    }
    let set_duration = |slot: &mut Option<Located<Duration>>,
                        value: &Option<Spanned<Duration>>,
                        locs: &mut Locs| {
        if let Some(value) = value {
            *slot = Some(locs.located(value));
        }
    };
    set_duration(&mut operation.deadline, &args.deadline, &mut locs);
    set_duration(&mut operation.min_budget, &args.min_budget, &mut locs);
    set_duration(&mut operation.expected_cost, &args.expected_cost, &mut locs);
    if let Some(shed_at) = &args.shed_at {
        operation.shed_at = Some(locs.located(shed_at));
    }
    if let Some(fallback) = &args.fallback {
        operation.fallback = Some(locs.located(fallback));
    }
    if let Some(span) = args.fallback_on_failure {
        operation.fallback_on_failure = Some(locs.at(span));
    }
    set_duration(&mut operation.poll_budget, &args.poll_budget, &mut locs);
    if let Some(span) = args.isolate {
        operation.isolate = Some(isolate(args, span, operation.isolate.take(), &mut locs));
    }
    set_duration(
        &mut operation.stale_if_error,
        &args.stale_if_error,
        &mut locs,
    );

    if let Some(chaos) = &args.chaos {
        operation.chaos = Some(locs.located(chaos));
    }
    if let Some(ratelimit) = &args.ratelimit {
        operation.ratelimit = Some(locs.located(ratelimit));
    }
    if let Some(queue) = &args.queue {
        operation.queue = Some(locs.located(queue));
    }

    let mut inline = InlineFlags::default();
    match &args.breaker {
        Some(Ref::Named(name)) => operation.breaker = Some(locs.located(name)),
        Some(Ref::Inline(b, span)) => {
            if let Some(spec) = inline_breaker(&op, b, *span, &mut locs, errors) {
                operation.breaker = Some(spec.name.clone());
                set.add_breaker(spec);
                inline.breaker = true;
            }
        }
        None => {}
    }
    match &args.bulkhead {
        Some(Ref::Named(name)) => operation.bulkhead = Some(locs.located(name)),
        Some(Ref::Inline(b, span)) => {
            if let Some(spec) = inline_bulkhead(&op, b, *span, &mut locs, errors) {
                operation.bulkhead = Some(spec.name.clone());
                set.add_bulkhead(spec);
                inline.bulkhead = true;
            }
        }
        None => {}
    }
    match &args.retry {
        Some(Ref::Named(name)) => operation.retry = Some(locs.located(name)),
        Some(Ref::Inline(r, span)) => {
            if let Some(spec) = inline_retry(&op, r, *span, &mut locs, errors) {
                operation.retry = Some(spec.name.clone());
                set.add_retry(spec);
                inline.retry = true;
            }
        }
        None => {}
    }
    match &args.hedge {
        Some(Ref::Named(name)) => operation.hedge = Some(locs.located(name)),
        Some(Ref::Inline(h, span)) => {
            if let Some(spec) = inline_hedge(&op, h, *span, &mut locs, errors) {
                operation.hedge = Some(spec.name.clone());
                set.add_hedge(spec);
                inline.hedge = true;
            }
        }
        None => {}
    }

    match set.spec_mut().operations.get_mut(&op) {
        Some(existing) => *existing = operation,
        None => set.add_operation(operation),
    }
    Lowered {
        set,
        spans: locs.spans,
        op,
        anchor,
        files,
        inline,
        problems,
        bound,
    }
}

/// Which files an operation was looked for in, for the unknown-name error.
fn searched(files: &[PathBuf], dir: Option<&std::path::Path>) -> String {
    let Some(dir) = dir else {
        return "searched no policy files: no `policies/` directory was found".to_owned();
    };
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_name())
        .map(|f| format!("`{}`", f.to_string_lossy()))
        .collect();
    match names.as_slice() {
        [] => format!("searched `{}`: it holds no `.policy` file", dir.display()),
        _ => format!("searched {} in `{}`", names.join(", "), dir.display()),
    }
}

/// `#[isolate(pool = "..", max_concurrent = N, max_queued = N)]` over what the files say of
/// the operation: each value the attribute gives replaces the file's.
fn isolate(
    args: &Args,
    span: Span,
    from_files: Option<IsolateSpec>,
    locs: &mut Locs,
) -> IsolateSpec {
    let mut isolate = from_files.unwrap_or_else(|| {
        let loc = locs.at(span);
        IsolateSpec::new(Located::new(PoolKind::Blocking, loc), loc)
    });
    if let Some(pool) = &args.pool {
        let kind = PoolKind::from_name(&pool.value).unwrap_or_default();
        isolate.pool = Located::new(kind, locs.at(pool.span));
    }
    if let Some(max_concurrent) = &args.max_concurrent {
        isolate.max_concurrent = Some(locs.located(max_concurrent));
    }
    if let Some(max_queued) = &args.max_queued {
        isolate.max_queued = Some(locs.located(max_queued));
    }
    isolate
}
