//! Phase 5: the expansion, a short and readable sequence of calls into the runtime's separate
//! mechanisms, in the order DESIGN.md gives:
//!
//! 1. take a child of the current deadline, refuse below the minimum useful budget;
//! 2. the shedding decision (when there is one to make);
//! 3. for each attempt (inside `retry_within` when retried): breaker check, bulkhead permit,
//!    `deadline.run(..)` with the deadline in scope, then the outcome recorded in the breaker.
//!
//! A refusal ends the sequence at once. Generated locals use mixed-site hygiene, and the named
//! mechanisms are statics inside their own blocks, so nothing clashes with the user's names.
//! Every path goes through the facade (`::policy::...`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use policy_lang::{Backoff, BreakerSpec, BulkheadSpec, OpenAfter, RetrySpec, Sharing, WorkClass};
use proc_macro2::{Ident, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned as _;

use crate::args::{self, Args, AttrKind, Errors};
use crate::fallback;
use crate::files;
use crate::func::{Func, Param};
use crate::lower;
use crate::valid::{self, Plan};

/// The whole macro: parse, merge sibling attributes, validate, expand (or fall back).
pub(crate) fn attribute(
    kind: AttrKind,
    args: TokenStream,
    item: TokenStream,
    source_file: Option<&Path>,
) -> TokenStream {
    let mut func = match Func::parse(item.clone()) {
        Ok(func) => func,
        Err(error) => return fallback::emit_tokens(item, error),
    };
    let mut errors = Errors::default();
    let mut all = Args::default();
    all.add(kind, Span::call_site(), args, &mut errors);
    for (sibling, attr) in args::take_policy_attrs(&mut func.item.attrs) {
        match args::attr_tokens(&attr) {
            Ok(tokens) => all.add(sibling, attr.path().span(), tokens, &mut errors),
            Err(error) => errors.push(error),
        }
    }
    if let Some(span) = all.isolate {
        let result = if all.class.is_some() || all.resilient.is_some() || all.operation.is_some() {
            Err(syn::Error::new(
                span,
                "`#[isolate]` stands alone: it turns a synchronous function into an async one that runs on a pool; call that function from a `#[critical]` or `#[resilient]` one",
            ))
        } else {
            expand_isolate(&func, &all)
        };
        return match (errors.combined(), result) {
            (None, Ok(tokens)) => tokens,
            (Some(mut error), Err(more)) => {
                error.combine(more);
                fallback::emit(&func.item, error, &[])
            }
            (Some(error), Ok(_)) | (None, Err(error)) => fallback::emit(&func.item, error, &[]),
        };
    }
    if all.class.is_none() && all.resilient.is_none() && all.operation.is_none() {
        // Only `#[idempotent]`: a declaration, nothing to expand.
        return match errors.combined() {
            Some(error) => fallback::emit(&func.item, error, &[]),
            None => func.item.to_token_stream(),
        };
    }
    valid::check_function(&all, &func, &mut errors);
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let dir = files::locate(manifest_dir.as_deref(), source_file);
    let loaded = match files::load(dir) {
        Ok(loaded) => loaded,
        Err(message) => {
            errors.at(valid::anchor_of(&all, &func), message);
            files::Loaded {
                set: policy_lang::PolicySet::new(),
                files: Vec::new(),
                dir: None,
            }
        }
    };
    let lowered = lower::lower(&all, &func.name(), func.ident_span(), loaded, &mut errors);
    valid::report(&lowered, &mut errors);
    if let Some(error) = errors.combined() {
        return fallback::emit(&func.item, error, &lowered.files);
    }
    match valid::plan(&lowered, &all) {
        Some(plan) => expand(&func, &plan),
        None => fallback::emit(
            &func.item,
            syn::Error::new(func.ident_span(), "internal: the operation was not lowered"),
            &lowered.files,
        ),
    }
}

/// `const _: &[u8] = include_bytes!(..)` for every policy file read, so Cargo rebuilds the
/// crate when one changes. Emitted as the first statements of the function's body (an item
/// inside a block is allowed wherever the function is: free, in an impl, in a trait impl).
pub(crate) fn track(files: &[PathBuf]) -> TokenStream {
    let files = files.iter().filter_map(|f| f.to_str());
    quote! {
        #( const _: &[u8] = ::core::include_bytes!(#files); )*
    }
}

fn nanos(d: Duration) -> TokenStream {
    let n = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    quote!(::core::time::Duration::from_nanos(#n))
}

/// A local the user's code cannot see or shadow.
fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

/// The runtime name of a mechanism: its name in the files, or for an inline one, a name made
/// unique by the module path.
fn runtime_name(name: &str, inline: bool) -> TokenStream {
    if inline {
        quote!(::core::concat!(::core::module_path!(), "::", #name))
    } else {
        quote!(#name)
    }
}

fn breaker_static(spec: &BreakerSpec, inline: bool) -> TokenStream {
    let name = runtime_name(&spec.name.value, inline);
    let open_after = match spec.open_after.value {
        OpenAfter::Count { failures, window } => {
            let window = nanos(window);
            quote!(.open_after_failures(#failures, #window))
        }
        OpenAfter::Ratio {
            ratio,
            min_calls,
            window,
        } => {
            let window = nanos(window);
            quote!(.open_after_ratio(#ratio, #min_calls, #window))
        }
        _ => quote!(),
    };
    let cooldown = nanos(spec.cooldown.value);
    let sharing = match spec.sharing.value {
        Sharing::Shared { quorum } => {
            quote!(.sharing(::policy::Sharing::Openings { quorum: #quorum }))
        }
        Sharing::TripsOnly => quote!(.sharing(::policy::Sharing::TripsOnly)),
        _ => quote!(),
    };
    quote! {{
        static BREAKER: ::policy::__private::LazyLock<::policy::Breaker> =
            ::policy::__private::LazyLock::new(|| {
                ::policy::Registry::global()
                    .breaker(#name, |breaker| breaker #open_after .cooldown(#cooldown) #sharing)
            });
        &*BREAKER
    }}
}

fn bulkhead_static(spec: &BulkheadSpec, inline: bool) -> TokenStream {
    let name = runtime_name(&spec.name.value, inline);
    let max_concurrent = spec.max_concurrent.value;
    let max_queued = spec.max_queued.value;
    quote! {{
        static BULKHEAD: ::policy::__private::LazyLock<::policy::Bulkhead> =
            ::policy::__private::LazyLock::new(|| {
                ::policy::Registry::global().bulkhead(#name, |bulkhead| {
                    bulkhead.max_concurrent(#max_concurrent).max_queued(#max_queued)
                })
            });
        &*BULKHEAD
    }}
}

fn retry_static(spec: &RetrySpec, inline: bool) -> TokenStream {
    let name = runtime_name(&spec.name.value, inline);
    let attempts = spec.attempts.value;
    let backoff = match spec.backoff.value {
        Backoff::FullJitter { base, cap } => {
            let (base, cap) = (nanos(base), nanos(cap));
            quote!(.backoff(#base, #cap))
        }
        _ => quote!(),
    };
    let timeout = spec.attempt_timeout.as_ref().map(|t| {
        let t = nanos(t.value);
        quote!(.attempt_timeout(#t))
    });
    let allowance = spec.allowance.as_ref().map(|a| {
        let (ratio, floor) = (a.value.ratio, a.value.floor_per_second);
        quote!(.allowance(::policy::__private::retry_allowance(#ratio, #floor)))
    });
    quote! {{
        static RETRY: ::policy::__private::LazyLock<::policy::__private::Arc<::policy::RetryPolicy>> =
            ::policy::__private::LazyLock::new(|| {
                ::policy::Registry::global()
                    .retry(#name, |retry| retry.attempts(#attempts) #backoff #timeout #allowance)
            });
        &**RETRY
    }}
}

fn shedder_static(plan: &Plan) -> TokenStream {
    let name = &plan.op;
    let (mut deferred, mut background) = plan.thresholds;
    if let Some(shed_at) = plan.shed_at {
        match plan.class {
            WorkClass::Deferred => deferred = shed_at,
            WorkClass::Background => background = shed_at,
            _ => {}
        }
    }
    quote! {{
        static SHEDDER: ::policy::__private::LazyLock<::policy::__private::Arc<::policy::Shedder>> =
            ::policy::__private::LazyLock::new(|| {
                ::policy::Registry::global().shedder(
                    ::core::concat!(::core::module_path!(), "::", #name),
                    ::policy::shedding::Thresholds { deferred: #deferred, background: #background },
                )
            });
        &**SHEDDER
    }}
}

fn work_class(class: WorkClass) -> TokenStream {
    match class {
        WorkClass::Deferred => quote!(::policy::WorkClass::Deferred),
        WorkClass::Background => quote!(::policy::WorkClass::Background),
        _ => quote!(::policy::WorkClass::Critical),
    }
}

/// Idents bound by a parameter pattern, for re-binding a copy per attempt.
fn bound_idents(pat: &syn::Pat, out: &mut Vec<(Ident, bool)>) -> bool {
    match pat {
        syn::Pat::Ident(p) if p.subpat.is_none() => {
            out.push((p.ident.clone(), p.mutability.is_some()));
            true
        }
        syn::Pat::Tuple(t) => t.elems.iter().all(|p| bound_idents(p, out)),
        syn::Pat::TupleStruct(t) => t.elems.iter().all(|p| bound_idents(p, out)),
        syn::Pat::Struct(s) => s.fields.iter().all(|f| bound_idents(&f.pat, out)),
        syn::Pat::Wild(_) => true,
        syn::Pat::Paren(p) => bound_idents(&p.pat, out),
        _ => false,
    }
}

/// `let x = RetryArg::for_attempt(&x);` for every parameter: each attempt gets its own copy.
fn per_attempt_copies(func: &Func) -> Result<TokenStream, syn::Error> {
    let mut copies = TokenStream::new();
    for param in func.params() {
        match param {
            Param::Receiver(receiver) => {
                if receiver.reference.is_none() {
                    return Err(syn::Error::new(
                        receiver.span(),
                        "a retried method takes `&self`: each attempt needs its own access, and `self` by value can be used only once",
                    ));
                }
            }
            Param::Typed(pat, ty) => {
                let mut idents = Vec::new();
                if !bound_idents(&pat, &mut idents) {
                    return Err(syn::Error::new(
                        pat.span(),
                        "a retried function's parameters must be names or simple patterns, so each attempt can get its own copy",
                    ));
                }
                for (ident, mutable) in idents {
                    let mutability = mutable.then(|| quote!(mut));
                    copies.extend(quote_spanned! {ty.span()=>
                        let #mutability #ident = ::policy::__private::RetryArg::for_attempt(&#ident);
                    });
                }
            }
        }
    }
    Ok(copies)
}

/// The function's body, typed, so `?` inside it converts to the declared error; watched by a
/// poll monitor when the attribute sets `poll_budget`.
fn body(func: &Func, ret: &TokenStream, plan: &Plan) -> TokenStream {
    let block = &func.item.block;
    let body = quote!(::policy::__private::typed::<#ret, _>(async move #block));
    match plan.poll_budget {
        None => body,
        Some(budget) => {
            let op = &plan.op;
            let budget = nanos(budget);
            quote! {{
                static MONITOR: ::policy::__private::LazyLock<::policy::__private::Arc<::policy::isolate::PollMonitor>> =
                    ::policy::__private::LazyLock::new(|| {
                        ::policy::Registry::global()
                            .poll_monitor(::core::concat!(::core::module_path!(), "::", #op), #budget)
                    });
                MONITOR.watch(#body)
            }}
        }
    }
}

/// `#[isolate]`: the synchronous function becomes an async one whose body runs on a bounded
/// pool, waited for at most until the current deadline.
fn expand_isolate(func: &Func, args: &Args) -> Result<TokenStream, syn::Error> {
    if func.is_async() {
        return Err(syn::Error::new(
            func.fn_span(),
            "`#[isolate]` goes on a synchronous function: it moves CPU work off the async workers; an `async fn` already yields at its awaits",
        ));
    }
    if let Some(receiver) = func.receiver() {
        return Err(syn::Error::new(
            receiver.span(),
            "isolated work runs on another thread and may outlive its caller: take owned arguments instead of `self` (an associated function taking an `Arc` works)",
        ));
    }
    for param in func.params() {
        if let Param::Typed(_, ty) = param
            && let syn::Type::Reference(reference) = &*ty
            && reference
                .lifetime
                .as_ref()
                .is_none_or(|l| l.ident != "static")
        {
            return Err(syn::Error::new(
                ty.span(),
                "isolated work runs on another thread and may outlive its caller: take an owned value (`String` for `&str`, `Vec<T>` for `&[T]`, an `Arc`)",
            ));
        }
    }
    let output = match func.output() {
        Some(ty) => ty.to_token_stream(),
        None => quote!(()),
    };
    let name = func.name();
    let max_concurrent = args.max_concurrent.as_ref().map(|m| {
        let m = m.value;
        quote!(.max_concurrent(#m))
    });
    let max_queued = args.max_queued.as_ref().map(|m| {
        let m = m.value;
        quote!(.max_queued(#m))
    });
    let kind = match args.pool.as_ref().map(|p| (p.value.as_str(), p.span)) {
        Some(("rayon", span)) => {
            Some(quote_spanned!(span=> .kind(::policy::isolate::PoolKind::Rayon)))
        }
        _ => None,
    };
    let pool = local("pool");
    let block = &func.item.block;
    let item = &func.item;
    let attrs = &item.attrs;
    let vis = &item.vis;
    let mut sig = item.sig.clone();
    sig.asyncness = Some(syn::Token![async](sig.fn_token.span));
    sig.output =
        syn::parse_quote!(-> ::core::result::Result<#output, ::policy::isolate::IsolateError>);
    Ok(quote! {
        #(#attrs)*
        #vis #sig {
            // A bulkhead for CPU: its own slots and queue, waited for until the current deadline.
            let #pool: &'static ::policy::isolate::IsolatedPool = {
                static POOL: ::policy::__private::LazyLock<::policy::isolate::IsolatedPool> =
                    ::policy::__private::LazyLock::new(|| {
                        ::policy::Registry::global().isolated_pool(
                            ::core::concat!(::core::module_path!(), "::", #name),
                            |pool| pool #max_concurrent #max_queued #kind,
                        )
                    });
                &*POOL
            };
            #pool.run(move || -> #output #block).await
        }
    })
}

/// The expansion.
fn expand(func: &Func, plan: &Plan) -> TokenStream {
    let result = match plan.class {
        WorkClass::Deferred | WorkClass::Background => expand_scheduled(func, plan),
        _ => expand_awaited(func, plan),
    };
    match result {
        Ok(tokens) => tokens,
        Err(error) => fallback::emit(&func.item, error, &plan.files),
    }
}

/// The mechanisms' handles: `let breaker = { static .. };` etc.
struct Handles {
    setup: TokenStream,
    breaker: Option<Ident>,
    bulkhead: Option<Ident>,
    retry: Option<Ident>,
    shedder: Option<Ident>,
}

fn handles(plan: &Plan) -> Handles {
    let mut setup = TokenStream::new();
    let breaker = plan.breaker.as_ref().map(|spec| {
        let ident = local("breaker");
        let value = breaker_static(spec, plan.inline.breaker);
        setup.extend(quote!(let #ident: &'static ::policy::Breaker = #value;));
        ident
    });
    let bulkhead = plan.bulkhead.as_ref().map(|spec| {
        let ident = local("bulkhead");
        let value = bulkhead_static(spec, plan.inline.bulkhead);
        setup.extend(quote!(let #ident: &'static ::policy::Bulkhead = #value;));
        ident
    });
    let retry = plan.retry.as_ref().map(|spec| {
        let ident = local("retry");
        let value = retry_static(spec, plan.inline.retry);
        setup.extend(quote!(let #ident: &'static ::policy::RetryPolicy = #value;));
        ident
    });
    // A decision to make: optional work against its compartment's load, or any work with a
    // known cost against the budget left.
    let shedder = ((plan.class != WorkClass::Critical && plan.bulkhead.is_some())
        || plan.expected_cost.is_some())
    .then(|| {
        let ident = local("shedder");
        let value = shedder_static(plan);
        setup.extend(quote!(let #ident: &'static ::policy::Shedder = #value;));
        ident
    });
    Handles {
        setup,
        breaker,
        bulkhead,
        retry,
        shedder,
    }
}

/// Steps 1 and 2: the deadline, the minimum budget, the shedding decision. `?` converts the
/// refusal into `refused`'s error type.
///
/// Deferred and background work runs in its own task, after the response: no deadline is in
/// scope there, so the same `Deadline::leaf` call gives it a fresh budget of its own.
///
/// `lift` goes between each refusal and its `?`: `.map_err(CarriesRefusals::refused)` when the
/// function's own error type carries it, nothing when the sequence's error is a `CallError`.
fn admission(plan: &Plan, h: &Handles, deadline: &Ident, lift: &TokenStream) -> TokenStream {
    let op = &plan.op;
    let budget = plan
        .deadline
        .map_or_else(|| quote!(::policy::Deadline::MAX_BUDGET), nanos);
    let min_budget = nanos(plan.min_budget.unwrap_or_default());
    let shed = h.shedder.as_ref().map(|shedder| {
        let class = work_class(plan.class);
        let load = match &h.bulkhead {
            Some(bulkhead) => quote!(#bulkhead.load()),
            None => quote!(0.0),
        };
        let cost = nanos(plan.expected_cost.unwrap_or_default());
        quote! {
            // Is this work worth doing under the current pressure?
            #shedder.admit(#class, #load, &#deadline, #cost) #lift ?;
        }
    });
    quote! {
        // How long may this take? A child of the current deadline, never longer, and refused
        // below the minimum useful budget.
        let #deadline = ::policy::Deadline::leaf(#op, #budget, #min_budget) #lift ?;
        #shed
    }
}

/// Step 3 for one attempt: breaker check, bulkhead permit, the run, the outcome recorded.
/// `wrap_failure` turns the function's own error into the sequence's error type.
fn attempt(
    h: &Handles,
    deadline: &TokenStream,
    lift: &TokenStream,
    body: &TokenStream,
    wrap_failure: impl Fn(TokenStream) -> TokenStream,
    wrap_expired: impl Fn(TokenStream) -> TokenStream,
) -> TokenStream {
    let slot = local("slot");
    let (value, error, expired) = (local("value"), local("error"), local("expired"));
    let check = h.breaker.as_ref().map(|breaker| {
        quote! {
            // Should we call this at all right now?
            #breaker.check() #lift ?;
        }
    });
    let permit = h.bulkhead.as_ref().map(|bulkhead| {
        quote! {
            // How much of the pool may this dependency hold?
            let #slot = #bulkhead.acquire(&#deadline).await #lift ?;
        }
    });
    let failed = wrap_failure(quote!(#error));
    let timed_out = wrap_expired(quote!(#expired));
    let run = match &h.breaker {
        Some(breaker) => quote! {
            match #deadline.run(#deadline.scope(#body)).await {
                ::core::result::Result::Ok(::core::result::Result::Ok(#value)) => {
                    #breaker.record_success();
                    ::core::result::Result::Ok(#value)
                }
                ::core::result::Result::Ok(::core::result::Result::Err(#error)) => {
                    #breaker.record_failure();
                    ::core::result::Result::Err(#failed)
                }
                ::core::result::Result::Err(#expired) => {
                    #breaker.record_failure();
                    ::core::result::Result::Err(#timed_out)
                }
            }
        },
        None => {
            let result = local("result");
            let own = wrap_failure(quote!(#error));
            let returned = if error == own.to_string() {
                quote!(#result)
            } else {
                quote!(#result.map_err(|#error| #own))
            };
            quote! {
                match #deadline.run(#deadline.scope(#body)).await {
                    ::core::result::Result::Ok(#result) => #returned,
                    ::core::result::Result::Err(#expired) => ::core::result::Result::Err(#timed_out),
                }
            }
        }
    };
    quote! {
        #check
        #permit
        #run
    }
}

/// Step 3 when the sequence's error is a `CallError`: one attempt, or every attempt inside
/// `retry_within_self_bounded`, each with its own copy of the arguments and the attempt's
/// deadline. `attempted` is the type each attempt's future is checked at; `own` is the
/// function's own result type, whose error decides what is worth repeating.
fn call_error_sequence(
    func: &Func,
    h: &Handles,
    deadline: &Ident,
    body: &TokenStream,
    attempted: &TokenStream,
    own: &TokenStream,
    own_span: proc_macro2::Span,
) -> Result<TokenStream, syn::Error> {
    let failed = |error: TokenStream| quote!(::policy::CallError::Failed(#error));
    let expired = |expired: TokenStream| quote!(::policy::CallError::DeadlineExceeded(#expired));
    let Some(retry) = &h.retry else {
        return Ok(attempt(
            h,
            &quote!(#deadline),
            &TokenStream::new(),
            body,
            failed,
            expired,
        ));
    };
    let attempt_ident = local("attempt");
    let copies = per_attempt_copies(func)?;
    let inner = attempt(
        h,
        &quote!(#attempt_ident.deadline),
        &TokenStream::new(),
        body,
        failed,
        expired,
    );
    let classify = local("is_transient");
    let transient = quote_spanned! {own_span=>
        let #classify = ::policy::__private::classifier::<#own>();
    };
    Ok(quote! {
        #transient
        // Is this failure worth repeating? Every attempt draws from the same deadline.
        ::policy::retry_within_self_bounded(&#deadline, #retry, #classify, ::policy::Idempotent::claim(|#attempt_ident: ::policy::retry::Attempt| {
            #copies
            ::policy::__private::typed::<#attempted, _>(async move {
                #inner
            })
        }))
        .await
    })
}

/// The parameters a fallback or a stale key is made of: every parameter but `self`, each a
/// plain name, with its type.
fn answer_params(func: &Func, what: &str) -> Result<Vec<(Ident, syn::Type)>, syn::Error> {
    let mut params = Vec::new();
    for param in func.params() {
        if let Param::Typed(pat, ty) = param {
            let syn::Pat::Ident(ident) = &*pat else {
                return Err(syn::Error::new(
                    pat.span(),
                    format!(
                        "{what} needs plain parameter names: it is given the arguments by name"
                    ),
                ));
            };
            if matches!(&*ty, syn::Type::ImplTrait(_)) {
                return Err(syn::Error::new(
                    ty.span(),
                    format!(
                        "{what} cannot name an `impl Trait` argument's type: use a type parameter or a concrete type"
                    ),
                ));
            }
            params.push((ident.ident.clone(), *ty));
        }
    }
    Ok(params)
}

/// Critical work with an answer when it cannot run: its own fallback function, and/or
/// stale-if-error. The sequence runs as usual, its outcome kept as a `CallError`; then this
/// leaf's answer (never a caller's: a nested call's refusal reaches this function as its own
/// error, not as its refusal).
fn expand_answered(func: &Func, plan: &Plan) -> Result<TokenStream, syn::Error> {
    let ret_ty = func
        .output()
        .ok_or_else(|| syn::Error::new(func.output_span(), "expected a return type"))?;
    let ret = ret_ty.to_token_stream();
    let ret_span = ret_ty.span();
    let h = handles(plan);
    let deadline = local("deadline");
    let carrier = local("carrier");
    let carry = quote_spanned! {ret_span=>
        let #carrier = ::policy::__private::carrier::<#ret>();
    };
    let admission = admission(plan, &h, &deadline, &TokenStream::new());
    let body = body(func, &ret, plan);
    let sequence = call_error_sequence(
        func,
        &h,
        &deadline,
        &body,
        &quote!(::policy::__private::Attempted<#ret>),
        &ret,
        ret_span,
    )?;

    let what = if plan.fallback.is_some() {
        "a fallback"
    } else {
        "`stale_if_error`"
    };
    let params = answer_params(func, what)?;
    let names: Vec<&Ident> = params.iter().map(|(name, _)| name).collect();
    let types: Vec<&syn::Type> = params.iter().map(|(_, ty)| ty).collect();
    let kept = local("kept");
    let op = &plan.op;
    let answered_by = plan
        .fallback
        .as_ref()
        .map_or_else(|| "stale-if-error".to_owned(), |f| f.0.clone());
    let record = local("fallback");
    let record_static = quote! {
        let #record: &'static ::policy::fallback::Fallback = {
            static FALLBACK: ::policy::__private::LazyLock<::policy::__private::Arc<::policy::fallback::Fallback>> =
                ::policy::__private::LazyLock::new(|| {
                    ::policy::Registry::global().fallback(
                        ::core::concat!(::core::module_path!(), "::", #op),
                        #answered_by,
                    )
                });
            &**FALLBACK
        };
    };
    let (outcome, value, reason, age, stored) = (
        local("outcome"),
        local("value"),
        local("reason"),
        local("age"),
        local("stored"),
    );

    let stale = match plan.stale_if_error {
        Some((window, span)) => {
            if func.item.sig.generics.type_params().next().is_some() {
                return Err(syn::Error::new(
                    span,
                    "`stale_if_error` keeps results in a cache built once per function, so the function cannot have type parameters",
                ));
            }
            for ty in &types {
                if let syn::Type::Reference(reference) = ty
                    && reference
                        .lifetime
                        .as_ref()
                        .is_none_or(|l| l.ident != "static")
                {
                    return Err(syn::Error::new(
                        ty.span(),
                        "`stale_if_error` keys its cache on the arguments, so they must be owned (`String` for `&str`)",
                    ));
                }
            }
            let window = nanos(window);
            let cache = local("stale");
            let value_ty = quote!(<#ret as ::policy::__private::PolicyResult>::Value);
            let setup = quote_spanned! {span=>
                #[allow(clippy::type_complexity, reason = "the cache's key and value types, spelled out")]
                let #cache: &'static ::policy::__private::StaleCache<(#(#types,)*), #value_ty> = {
                    static STALE: ::policy::__private::LazyLock<::policy::__private::StaleCache<(#(#types,)*), #value_ty>> =
                        ::policy::__private::LazyLock::new(|| ::policy::__private::stale_cache(#window, 10_000));
                    &*STALE
                };
            };
            let store = quote! {
                #cache.store(::core::clone::Clone::clone(&#kept), ::core::clone::Clone::clone(&#value));
            };
            let serve = quote! {
                // Stale-if-error: the last good result for these arguments, marked as stale.
                if let ::core::option::Option::Some((#stored, #age)) = #cache.get(&#kept) {
                    #record.serving_stale(&#reason, #age);
                    return ::core::result::Result::Ok(#stored);
                }
            };
            Some((setup, store, serve))
        }
        None => None,
    };
    let (stale_setup, stale_store, stale_serve) = match stale {
        Some((a, b, c)) => (Some(a), Some(b), Some(c)),
        None => (None, None, None),
    };

    let fallback = plan.fallback.as_ref().map(|(name, span)| {
        let path: TokenStream = match syn::parse_str::<syn::Path>(name) {
            Ok(path) => {
                // The function's name, at the literal that named it.
                let tokens = path.to_token_stream();
                tokens
                    .into_iter()
                    .map(|mut t| {
                        t.set_span(*span);
                        t
                    })
                    .collect()
            }
            Err(_) => quote_spanned!(*span=> ::core::compile_error!("the fallback must name a function in scope, such as `anonymous` or `Self::anonymous`")),
        };
        let answer = local("answer");
        let on_failure = plan.fallback_on_failure;
        let index = (0..names.len()).map(syn::Index::from);
        let expected = quote_spanned! {*span=>
            #[allow(clippy::type_complexity, reason = "the fallback's expected signature, spelled out")]
            let #answer: fn(#(&#types,)* ::policy::CallError<<#ret as ::policy::__private::PolicyResult>::Error>) -> #ret = #path;
        };
        quote! {
            // This leaf's own fallback, for its own refusals and expiries.
            if #record.covers(&#reason, #on_failure) {
                #expected
                #record.answering(&#reason);
                return #answer(#(&#kept.#index,)* #reason);
            }
        }
    });

    let tracked = track(&plan.files);
    let setup = &h.setup;
    let item = &func.item;
    let attrs = &item.attrs;
    let vis = &item.vis;
    let sig = &item.sig;
    let keep = quote! {
        // The arguments, kept for this leaf's answer when it cannot run.
        let #kept = (#(::policy::__private::RetryArg::for_attempt(&#names),)*);
    };
    Ok(quote! {
        #(#attrs)*
        #vis #sig {
            #tracked
            #carry
            #setup
            #record_static
            #stale_setup
            #keep
            let #outcome = ::policy::__private::typed::<::policy::__private::Attempted<#ret>, _>(async move {
                #admission
                #sequence
            })
            .await;
            match #outcome {
                ::core::result::Result::Ok(#value) => {
                    #stale_store
                    ::core::result::Result::Ok(#value)
                }
                ::core::result::Result::Err(#reason) => {
                    #stale_serve
                    #fallback
                    ::core::result::Result::Err(#carrier.flatten(#reason))
                }
            }
        }
    })
}

/// Critical and resilient work: awaited by the caller.
fn expand_awaited(func: &Func, plan: &Plan) -> Result<TokenStream, syn::Error> {
    if plan.fallback.is_some() || plan.stale_if_error.is_some() {
        return expand_answered(func, plan);
    }
    let ret_ty = func
        .output()
        .ok_or_else(|| syn::Error::new(func.output_span(), "expected a return type"))?;
    let ret = ret_ty.to_token_stream();
    let h = handles(plan);
    let deadline = local("deadline");
    // Refusals and expiries become the function's own error, checked at its return type.
    let ret_span = ret_ty.span();
    let carrier = local("carrier");
    let refused = quote!(.map_err(#carrier.refused));
    let admission = admission(plan, &h, &deadline, &refused);
    let body = body(func, &ret, plan);
    let assert = quote_spanned! {ret_span=>
        let #carrier = ::policy::__private::carrier::<#ret>();
    };
    let sequence = if h.retry.is_some() {
        let error = local("error");
        let sequence = call_error_sequence(
            func,
            &h,
            &deadline,
            &body,
            &quote!(::policy::__private::Attempted<#ret>),
            &ret,
            ret_span,
        )?;
        quote! {
            #sequence
            .map_err(|#error| #carrier.flatten(#error))
        }
    } else {
        attempt(
            &h,
            &quote!(#deadline),
            &refused,
            &body,
            |error| error,
            |expired| quote!((#carrier.expired)(#expired)),
        )
    };
    let setup = &h.setup;
    let item = &func.item;
    let attrs = &item.attrs;
    let vis = &item.vis;
    let sig = &item.sig;
    let tracked = track(&plan.files);
    Ok(quote! {
        #(#attrs)*
        #vis #sig {
            #tracked
            #assert
            #setup
            #admission
            #sequence
        }
    })
}

/// Deferred and background work: calling it schedules it and returns `()` at once.
fn expand_scheduled(func: &Func, plan: &Plan) -> Result<TokenStream, syn::Error> {
    let h = handles(plan);
    let deadline = local("deadline");
    let work = local("work");
    let (ret, unit) = match func.output() {
        Some(ty) => (ty.to_token_stream(), false),
        None => (quote!(()), true),
    };
    // The work's own error type: the function's, or `Infallible` for `()`.
    let body = if unit {
        let inner = body(func, &ret, plan);
        quote!(::policy::__private::unit_ok(#inner))
    } else {
        body(func, &ret, plan)
    };
    let outcome_ty = if unit {
        quote!(
            ::policy::__private::ScheduledResult<
                ::core::result::Result<(), ::core::convert::Infallible>,
            >
        )
    } else {
        quote!(::policy::__private::ScheduledResult<#ret>)
    };
    let admission = admission(plan, &h, &deadline, &TokenStream::new());
    let own = if unit {
        quote!(::core::result::Result<(), ::core::convert::Infallible>)
    } else {
        ret.clone()
    };
    let sequence = call_error_sequence(
        func,
        &h,
        &deadline,
        &body,
        &outcome_ty,
        &own,
        proc_macro2::Span::call_site(),
    )?;
    let op = &plan.op;
    let schedule = match plan.class {
        WorkClass::Background => quote! {
            // Handed to the bounded background pool; a shed is logged there with its reason.
            let _ = ::policy::background(::core::concat!(::core::module_path!(), "::", #op), #work);
        },
        _ => quote! {
            // Runs after the response is finished (or on the process-level platform).
            ::policy::defer(::core::concat!(::core::module_path!(), "::", #op), #work);
        },
    };
    let setup = &h.setup;
    let item = &func.item;
    let attrs = &item.attrs;
    let vis = &item.vis;
    let mut sig = item.sig.clone();
    sig.asyncness = None;
    sig.output = syn::ReturnType::Default;
    let sig_span = item.sig.ident.span();
    let deferrable = quote_spanned! {sig_span=>
        let #work = ::policy::__private::deferrable(::policy::__private::scheduled(#work));
    };
    let tracked = track(&plan.files);
    Ok(quote! {
        #(#attrs)*
        #vis #sig {
            #tracked
            let #work = ::policy::__private::typed::<#outcome_ty, _>(async move {
                #setup
                #admission
                #sequence
            });
            #deferrable
            #schedule
        }
    })
}

#[cfg(test)]
mod tests {
    //! The expansion, read as code: `prettyplease` output compared with checked-in files.
    //! Regenerate with `UPDATE_SNAPSHOTS=1 cargo test -p policy-macros` and review the diff.

    use std::path::Path;

    use proc_macro2::TokenStream;
    use quote::quote;

    use super::attribute;
    use crate::args::AttrKind;

    fn expand(kind: AttrKind, args: TokenStream, item: TokenStream) -> String {
        let manifest = env!("CARGO_MANIFEST_DIR");
        // As if written in tests/expand/: its `policies/` directory is the one read.
        let source = Path::new(manifest).join("tests/expand/input.rs");
        let tokens = attribute(kind, args, item, Some(&source));
        let file = syn::parse2::<syn::File>(tokens).expect("the expansion parses as items");
        prettyplease::unparse(&file).replace(manifest, "$CARGO_MANIFEST_DIR")
    }

    fn check(name: &str, actual: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/expand")
            .join(format!("{name}.expanded.rs"));
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(&path, actual).expect("write the snapshot");
            return;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            expected == actual,
            "the expansion of `{name}` changed; run with UPDATE_SNAPSHOTS=1 and review\n--- expected\n{expected}\n--- actual\n{actual}"
        );
    }

    #[test]
    fn resilient_reads_as_the_documented_sequence_of_calls() {
        let out = expand(
            AttrKind::Resilient,
            quote!(breaker = "search", bulkhead = "search", retry = "transient"),
            quote! {
                #[policy::idempotent]
                /// Pushes a document to the search index.
                pub async fn push_to_index(id: DocId) -> Result<(), SearchError> {
                    search_client().put(id).await?;
                    Ok(())
                }
            },
        );
        // The order DESIGN.md gives: deadline, then per attempt breaker, bulkhead, run, record.
        let at = |needle: &str| {
            out.find(needle)
                .unwrap_or_else(|| panic!("`{needle}` in\n{out}"))
        };
        assert!(at("Deadline::leaf") < at("retry_within"));
        assert!(at("retry_within") < at("breaker.check()"));
        assert!(at("breaker.check()") < at("bulkhead.acquire"));
        assert!(at("bulkhead.acquire") < at(".run("));
        assert!(at(".run(") < at("record_success"));
        check("resilient", &out);
    }

    #[test]
    fn critical_takes_a_child_deadline_and_runs_the_body_in_its_scope() {
        let out = expand(
            AttrKind::Critical,
            quote!(deadline = "3s", min_budget = "200ms"),
            quote! {
                async fn save_document(doc: Doc) -> Result<DocId, AppError> {
                    db().insert(doc).await
                }
            },
        );
        check("critical", &out);
    }

    #[test]
    fn deferred_schedules_and_returns_unit() {
        let out = expand(
            AttrKind::Deferred,
            quote!(),
            quote! {
                #[policy::idempotent]
                async fn index_document(id: DocId) -> Result<(), SearchError> {
                    search().index(id).await
                }
            },
        );
        assert!(out.contains("fn index_document(id: DocId) {"), "{out}");
        check("deferred", &out);
    }

    #[test]
    fn errors_keep_the_function_and_report_every_mistake_at_once() {
        let out = expand(
            AttrKind::Resilient,
            quote!(retry = "transent", deadlin = "3s", bulkhead = "search"),
            quote! {
                async fn push(id: u64) -> Result<(), SearchError> { Ok(()) }
            },
        );
        assert!(out.contains("async fn push(id: u64)"), "{out}");
        assert!(out.contains("did you mean `deadline`"), "{out}");
        assert!(out.contains("did you mean `transient`"), "{out}");
        assert!(
            !out.contains("retry_within"),
            "no expansion on errors:\n{out}"
        );
    }
}
