//! Steps 2 and 3: the operation's deadline, the shedding decision and the rate limit, then
//! each attempt:
//! `breaker.check()`, `bulkhead.acquire(..)`, `deadline.run_in_scope(body)`,
//! `breaker.observe(ran)` (`injection.observe(breaker, ran)` with a chaos drill); inside `hedge_within` when hedged (each hedge is such an attempt,
//! through the breaker and the bulkhead), and inside `retry_within_self_bounded` when retried
//! (a hedged operation's retry attempt is then the hedged call, `hedge_within_retry`). Critical work is
//! awaited by its caller ([`awaited`]); deferred and background work is scheduled
//! ([`scheduled`]).

use proc_macro2::{Ident, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use velocity_policy_lang::WorkClass;

use super::handles::Handles;
use super::{duration, local, operation_name};
use crate::facade::private;
use crate::files::track;
use crate::func::Func;
use crate::valid::Plan;

/// How an attempt's `ran` (the body's result under the deadline, or the expiry) ends it.
#[derive(Clone, Copy)]
pub(super) enum Finish {
    /// As the function's own return value, through the carrier (one attempt, awaited).
    Returned,
    /// As a success or a `CallError` (retried, scheduled, or answered by a fallback).
    CallError,
}

/// The function's body, its output pinned by `typed` so `?` inside converts to the declared
/// error; watched by the poll monitor when the operation sets `poll_budget`.
pub(super) fn body(
    func: &Func,
    h: &Handles,
    typed: impl Fn(TokenStream) -> TokenStream,
) -> TokenStream {
    let block = &func.item.block;
    let body = typed(quote!(async move #block));
    match &h.monitor {
        Some(monitor) => quote!(#monitor.watch(#body)),
        None => body,
    }
}

/// Step 2: the deadline (refused below the minimum useful budget), the shedding decision, then
/// the rate limit.
/// `lift` goes between each refusal and its `?`: `.map_err(carrier.refused)` when the
/// function's own error carries it, nothing when the sequence's error is a `CallError`.
///
/// Deferred and background work runs in its own task, after the response: no deadline is in
/// scope there, so the same `Deadline::for_named` gives it a fresh budget of its own.
pub(super) fn admission(
    plan: &Plan,
    h: &Handles,
    deadline: &Ident,
    lift: &TokenStream,
) -> TokenStream {
    let operation = &h.operation;
    let shed = h.shedder.as_ref().map(|shedder| {
        let class = match plan.class {
            WorkClass::Critical => quote!(#private::WorkClass::Critical),
            WorkClass::Deferred => quote!(#private::WorkClass::Deferred),
            WorkClass::Background => quote!(#private::WorkClass::Background),
        };
        let load = match &h.bulkhead {
            Some(bulkhead) => quote!(#bulkhead.load()),
            None => quote!(0.0),
        };
        let cost = duration(plan.expected_cost.unwrap_or_default());
        quote!(#shedder.admit(#class, #load, &#deadline, #cost) #lift ?;)
    });
    // Then the rate limit, once per call: a refusal carries the wait that would admit it.
    let limit = h
        .ratelimit
        .as_ref()
        .map(|ratelimit| quote!(#ratelimit.acquire().await #lift ?;));
    quote! {
        let #deadline = #private::Deadline::for_named(#operation) #lift ?;
        #shed
        #limit
    }
}

/// Step 3 for one attempt under `deadline`.
fn attempt(
    h: &Handles,
    deadline: &TokenStream,
    lift: &TokenStream,
    body: &TokenStream,
    finish: Finish,
) -> TokenStream {
    let (slot, ran, carrier) = (local("slot"), local("ran"), local("carrier"));
    let (decided, queued) = (local("decided"), local("queued"));
    let check = h
        .breaker
        .as_ref()
        .map(|breaker| quote!(#breaker.check() #lift ?;));
    // The slot as a plain call when it was free (or the refusal of a caller that may not
    // queue): only a caller in the queue awaits a future.
    let permit = h.bulkhead.as_ref().map(|bulkhead| {
        quote! {
            let #slot = match #bulkhead.acquire(&#deadline).decided() {
                Ok(#decided) => #decided,
                Err(#queued) => #queued.await,
            } #lift ?;
        }
    });
    // Fault injection (feature `chaos`), only for an operation that names a drill: after the
    // check and the permit, inside the deadline; the breaker then learns the outcome through
    // the injection, which says which failure it injected.
    let (inject, body, observer) = chaos_step(h, lift, body);
    let observed = h.breaker.as_ref().map(|breaker| match &observer {
        Some(injection) => quote!(#injection.observe(#breaker, #ran)),
        None => quote!(#breaker.observe(#ran)),
    });
    let end = match (finish, observed) {
        (Finish::Returned, Some(observed)) => quote!(#carrier.outcome(#observed)),
        (Finish::Returned, None) => quote!(#carrier.ran(#ran)),
        (Finish::CallError, Some(observed)) => observed,
        (Finish::CallError, None) => quote!(#private::CallError::from_run(#ran)),
    };
    quote! {
        #check
        #permit
        #inject
        let #ran = #deadline.run_in_scope(#body).await;
        #end
    }
}

/// The chaos drill's draw (a refusal or a 429 ends the attempt like the breaker's), the body
/// run through the injection (latency, then the injected error or the real call), and the
/// injection, which records the outcome in the breaker; nothing when the operation names no
/// drill.
fn chaos_step(
    h: &Handles,
    lift: &TokenStream,
    body: &TokenStream,
) -> (TokenStream, TokenStream, Option<Ident>) {
    let Some(chaos) = &h.chaos else {
        return (TokenStream::new(), body.clone(), None);
    };
    let injection = local("injection");
    let breaker = match &h.breaker {
        Some(breaker) => quote!(::core::option::Option::Some(#breaker)),
        None => quote!(::core::option::Option::None),
    };
    (
        quote!(let #injection = #chaos.draw(#breaker) #lift ?;),
        quote!(#injection.run(#body)),
        Some(injection),
    )
}

/// Step 3 when the sequence's error is a `CallError`: one attempt, or every attempt inside
/// `retry_within_self_bounded`, each with its own copy of the arguments and its own deadline
/// (a child of the operation's). `typed_attempt` pins each attempt's output; `own` is the
/// function's own result type, whose error decides what is worth repeating. Statements, then
/// the outcome as the last expression.
pub(super) fn call_error_sequence(
    plan: &Plan,
    h: &Handles,
    deadline: &Ident,
    body: &TokenStream,
    typed_attempt: impl Fn(TokenStream) -> TokenStream,
    own: &TokenStream,
    own_span: Span,
) -> TokenStream {
    if h.retry.is_none() && h.hedge.is_none() {
        return attempt(
            h,
            &quote!(#deadline),
            &TokenStream::new(),
            body,
            Finish::CallError,
        );
    }
    retried(plan, h, deadline, body, typed_attempt, own, own_span)
}

/// Every attempt inside `retry_within_self_bounded` and/or `hedge_within`, its outcome a
/// `CallError`. The retried function's classifier is checked at its return type (`own`, at
/// `own_span`).
fn retried(
    plan: &Plan,
    h: &Handles,
    deadline: &Ident,
    body: &TokenStream,
    typed_attempt: impl Fn(TokenStream) -> TokenStream,
    own: &TokenStream,
    own_span: Span,
) -> TokenStream {
    let copies: Vec<TokenStream> = plan
        .per_attempt
        .iter()
        .map(|(ident, mutable, span)| {
            let mutability = mutable.then(|| quote!(mut));
            let private_at = private.at(*span);
            quote_spanned! {*span=>
                let #mutability #ident = #private_at::RetryArg::for_attempt(&#ident);
            }
        })
        .collect();
    // Each attempt's own deadline shadows the operation's.
    let inner = attempt(
        h,
        &quote!(#deadline),
        &TokenStream::new(),
        body,
        Finish::CallError,
    );
    let mut attempt_future = typed_attempt(quote!(async move { #inner }));
    if let Some(hedge) = &h.hedge {
        // The attempt, and a hedge of it each time it is slow: one budget with the retries.
        let (call, retry) = match &h.retry {
            Some(retry) => (quote!(hedge_within_retry), Some(quote!(#retry,))),
            None => (quote!(hedge_within), None),
        };
        let hedged = quote! {
            #private::hedge::#call(&#deadline, #hedge, #retry #private::Idempotent::claim(|#private::retry::Attempt { #deadline, .. }| {
                #(#copies)*
                #attempt_future
            }))
            .await
        };
        if h.retry.is_none() {
            return hedged;
        }
        attempt_future = typed_attempt(quote!(async move { #hedged }));
    }
    let retry = h.retry.clone();
    let private_at = private.at(own_span);
    let classify = quote_spanned!(own_span=> #private_at::classifier::<#own>());
    quote! {
        #private::retry::retry_within_self_bounded(&#deadline, #retry, #classify, #private::Idempotent::claim(|#private::retry::Attempt { #deadline, .. }| {
            #(#copies)*
            #attempt_future
        }))
        .await
    }
}

/// The function's item with a new body.
pub(super) fn with_body(func: &Func, sig: &syn::Signature, body: TokenStream) -> TokenStream {
    let item = &func.item;
    let attrs = &item.attrs;
    let vis = &item.vis;
    quote! {
        #(#attrs)*
        #vis #sig {
            #body
        }
    }
}

/// Critical work without an answer of its own: awaited by the caller, refusals and expiries
/// its own error.
pub(super) fn awaited(func: &Func, plan: &Plan) -> TokenStream {
    let ret_ty = func.output();
    let ret = ret_ty.map_or_else(|| quote!(()), ToTokens::to_token_stream);
    let ret_span = ret_ty.map_or_else(Span::call_site, syn::spanned::Spanned::span);
    let h = Handles::of(plan);
    let (deadline, carrier) = (local("deadline"), local("carrier"));
    // Refusals and expiries become the function's own error, checked at its return type.
    let private_at = private.at(ret_span);
    let carry = quote_spanned! {ret_span=>
        let #carrier = #private_at::carrier::<#ret>();
    };
    let refused = quote!(.map_err(#carrier.refused));
    let admission = admission(plan, &h, &deadline, &refused);
    let body = body(func, &h, |body| quote!(#carrier.body(#body)));
    let sequence = if h.retry.is_some() || h.hedge.is_some() {
        let outcome = local("outcome");
        let retried = retried(
            plan,
            &h,
            &deadline,
            &body,
            |attempt| quote!(#carrier.attempt(#attempt)),
            &ret,
            ret_span,
        );
        quote! {
            let #outcome = #retried;
            #carrier.outcome(#outcome)
        }
    } else {
        attempt(&h, &quote!(#deadline), &refused, &body, Finish::Returned)
    };
    let tracked = track(&plan.files);
    let setup = h.setup(&plan.op);
    let call = traced(
        plan,
        quote!(#carrier.body(async move {
            #admission
            #sequence
        })),
    );
    with_body(
        func,
        &func.item.sig,
        quote! {
            #tracked
            #carry
            #setup
            #call
        },
    )
}

/// The call of critical work, awaited inside its span: one INFO span named after the
/// operation, with its `operation` and `class`, and the operation in scope for the
/// mechanisms' events.
pub(super) fn traced(plan: &Plan, call: TokenStream) -> TokenStream {
    let op = &plan.op;
    quote! {
        #private::traced(
            {
                static CALLS: #private::Calls = #private::Calls::new(#op);
                &CALLS
            },
            #private::tracing::info_span!(
                target: "policy",
                #op,
                operation = #op,
                class = "critical",
                "otel.status_code" = #private::tracing::field::Empty,
                "error.type" = #private::tracing::field::Empty,
            ),
            #call,
        )
        .await
    }
}

/// Deferred and background work: calling it schedules it and returns `()` at once.
pub(super) fn scheduled(func: &Func, plan: &Plan) -> TokenStream {
    let h = Handles::of(plan);
    let (deadline, work) = (local("deadline"), local("work"));
    let (ret, unit) = match func.output() {
        Some(ty) => (ty.to_token_stream(), false),
        None => (quote!(()), true),
    };
    // The work's own error type: the function's, or `Infallible` for `()`.
    let own = if unit {
        quote!(::core::result::Result<(), ::core::convert::Infallible>)
    } else {
        ret.clone()
    };
    let body = body(func, &h, |body| {
        let typed = quote!(#private::typed::<#ret, _>(#body));
        if unit {
            quote!(#private::unit_ok(#typed))
        } else {
            typed
        }
    });
    let outcome_ty = quote!(#private::ScheduledResult<#own>);
    let admission = admission(plan, &h, &deadline, &TokenStream::new());
    let sequence = call_error_sequence(
        plan,
        &h,
        &deadline,
        &body,
        |attempt| quote!(#private::typed::<#outcome_ty, _>(#attempt)),
        &own,
        Span::call_site(),
    );
    let name = operation_name(&plan.op);
    let schedule = match plan.class {
        // Handed to the bounded background pool; a shed is logged there with its reason.
        WorkClass::Background => quote!(let _ = #private::background(#name, #work);),
        // Runs after the response is finished (or on the process-level platform).
        _ => quote!(#private::defer(#name, #work);),
    };
    let mut sig = func.item.sig.clone();
    sig.asyncness = None;
    sig.output = syn::ReturnType::Default;
    let sig_span = func.item.sig.ident.span();
    let private_at = private.at(sig_span);
    let deferrable = quote_spanned! {sig_span=>
        let #work = #private_at::deferrable(#private_at::scheduled(
            #work,
            #private_at::logged(),
        ));
    };
    let tracked = track(&plan.files);
    let setup = h.setup(&plan.op);
    let scheduling = quote! {
        let #work = #private::typed::<#outcome_ty, _>(async move {
            #setup
            #admission
            #sequence
        });
        #deferrable
    };
    let Some(queued) = &plan.queue else {
        return with_body(
            func,
            &sig,
            quote! {
                #tracked
                #scheduling
                #schedule
            },
        );
    };
    // On a durable queue: the call enqueues the arguments when the queue is installed, and runs
    // on the in-process pool (as above) when it is not; `name::task()` is what a worker runs.
    let (slot, args) = (local("QUEUE"), local("args"));
    let names: Vec<_> = queued.params.iter().map(|(name, _)| name).collect();
    let types: Vec<_> = queued.params.iter().map(|(_, ty)| ty).collect();
    let op = &plan.op;
    let queue = &queued.name;
    let queue_span = queued.span;
    let private_at = private.at(queue_span);
    let enqueue = quote_spanned! {queue_span=>
        static #slot: #private_at::QueueSlot = #private_at::QueueSlot::new(#queue);
        let Some(#args) = #slot.enqueue(#op, (#(#names,)*)) else {
            return;
        };
    };
    let function = with_body(
        func,
        &sig,
        quote! {
            #tracked
            #enqueue
            let (#(#names,)*) = #args;
            #scheduling
            #schedule
        },
    );
    let vis = &func.item.vis;
    let ident = &func.item.sig.ident;
    let doc = format!(
        "The worker's side of [`{ident}`] on queue `{queue}`: give `{ident}::task()` to the queue's worker."
    );
    let handler_doc = format!(
        "What a worker of queue `{queue}` runs for a task of `{ident}`: its arguments decoded, then the same sequence as a call on the in-process pool. It carries `queue_settings()`, for the worker to start from."
    );
    let settings_doc = match &queued.settings {
        Some(_) => format!(
            "The numbers of queue `{queue}` from its `queue {queue} {{ ... }}` stanza: build the queue with `TaskQueue::configured({ident}::queue_settings())`."
        ),
        None => format!(
            "The numbers of queue `{queue}`: no `queue {queue} {{ ... }}` stanza declares it, so each is the runtime's default."
        ),
    };
    let settings = queue_settings(queued);
    quote! {
        #function

        #[doc = #doc]
        #vis mod #ident {
            #[allow(unused_imports, reason = "the arguments' types, as the function names them")]
            use super::*;

            #[doc = #settings_doc]
            pub fn queue_settings() -> #private::queue::QueueSettings {
                #settings
            }

            #[doc = #handler_doc]
            pub fn task() -> #private::queue::Handler {
                #private::queue_handler(#op, |(#(#names,)*): (#(#types,)*)| {
                    #scheduling
                    #work
                })
                .with_settings(queue_settings())
            }
        }
    }
}

/// The body of `fn_name::queue_settings()`: the queue's name and each number its stanza sets.
fn queue_settings(queued: &crate::valid::Queued) -> TokenStream {
    let queue = &queued.name;
    let Some(spec) = &queued.settings else {
        return quote!(#private::queue::QueueSettings::new(#queue));
    };
    let settings = local("settings");
    let mut set = Vec::new();
    if let Some(max_len) = &spec.max_len {
        let max_len = u64::from(max_len.value);
        set.push(quote!(#settings.max_len = ::core::option::Option::Some(#max_len);));
    }
    if let Some(visibility) = &spec.visibility_timeout {
        let visibility = duration(visibility.value);
        set.push(quote!(#settings.visibility_timeout = ::core::option::Option::Some(#visibility);));
    }
    if let Some(deliveries) = &spec.max_deliveries {
        let deliveries = deliveries.value;
        set.push(quote!(#settings.max_deliveries = ::core::option::Option::Some(#deliveries);));
    }
    if let Some(deadline) = &spec.task_deadline {
        let deadline = duration(deadline.value);
        set.push(quote!(#settings.task_deadline = ::core::option::Option::Some(#deadline);));
    }
    if let Some(concurrency) = &spec.concurrency {
        let concurrency = concurrency.value;
        set.push(quote!(#settings.concurrency = ::core::option::Option::Some(#concurrency);));
    }
    quote! {
        let mut #settings = #private::queue::QueueSettings::new(#queue);
        #(#set)*
        #settings
    }
}
