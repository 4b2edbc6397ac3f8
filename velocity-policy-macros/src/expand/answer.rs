//! Step 4: critical work with an answer when it cannot run, its own fallback function and/or
//! stale-if-error. The sequence runs as usual, its outcome kept as a `CallError`; then this
//! operation's answer (never a caller's: a nested call's refusal reaches this function as its
//! own error, not as its refusal).

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned as _;

use super::handles::Handles;
use super::sequence::{admission, body, call_error_sequence, traced, with_body};
use super::{duration, local};
use crate::facade::private;
use crate::files::track;
use crate::func::Func;
use crate::valid::{Answer, Plan};

/// What the stale cache holds at most, per function: argument sets, least recently used
/// evicted first.
const STALE_CAPACITY: u64 = 10_000;

pub(super) fn expand(func: &Func, plan: &Plan, answer: &Answer) -> TokenStream {
    let ret_ty = func.output();
    let ret = ret_ty.map_or_else(|| quote!(()), ToTokens::to_token_stream);
    let ret_span = ret_ty.map_or_else(Span::call_site, |ty| ty.span());
    let mut h = Handles::of(plan);
    let answered_by = answer
        .fallback
        .as_ref()
        .map_or("stale-if-error", |f| f.name.as_str());
    h.add_fallback(plan, answered_by);
    let record = h.fallback.clone().unwrap_or_else(|| local("fallback"));
    let (deadline, carrier) = (local("deadline"), local("carrier"));
    let private_at = private.at(ret_span);
    let carry = quote_spanned! {ret_span=>
        let #carrier = #private_at::carrier::<#ret>();
    };
    let admission = admission(plan, &h, &deadline, &TokenStream::new());
    let body = body(func, &h, |body| quote!(#carrier.body(#body)));
    let sequence = call_error_sequence(
        plan,
        &h,
        &deadline,
        &body,
        |attempt| quote!(#carrier.attempt(#attempt)),
        &ret,
        ret_span,
    );

    let names: Vec<_> = answer.params.iter().map(|(name, _)| name).collect();
    let types: Vec<_> = answer.params.iter().map(|(_, ty)| ty).collect();
    let (kept, outcome, value, reason) = (
        local("kept"),
        local("outcome"),
        local("value"),
        local("reason"),
    );
    let (stale_setup, stale_store, stale_serve) = match answer.stale_if_error {
        Some((window, span)) => {
            let (cache, age, stored) = (local("stale"), local("age"), local("stored"));
            let window = duration(window);
            let key = quote!((#(#types,)*));
            let value_ty = quote!(<#ret as #private::PolicyResult>::Value);
            // Its own block: the key and value are the user's types, kept apart from the
            // handles' `use`s.
            let private_at = private.at(span);
            let setup = quote_spanned! {span=>
                #[allow(clippy::type_complexity, reason = "the cache's key and value types, spelled out")]
                let #cache = {
                    static STALE: #private_at::LazyLock<#private_at::StaleCache<#key, #value_ty>> =
                        #private_at::LazyLock::new(|| #private_at::stale_cache(#window, #STALE_CAPACITY));
                    &*STALE
                };
            };
            let store = quote! {
                #cache.store(::core::clone::Clone::clone(&#kept), ::core::clone::Clone::clone(&#value));
            };
            let serve = quote! {
                if let ::core::option::Option::Some((#stored, #age)) = #cache.get(&#kept) {
                    #record.serving_stale(&#reason, #age);
                    return ::core::result::Result::Ok(#stored);
                }
            };
            (Some(setup), Some(store), Some(serve))
        }
        None => (None, None, None),
    };
    let fallback = answer.fallback.as_ref().map(|fallback| {
        let (path, span) = (&fallback.path, fallback.span);
        let answer = local("answer");
        let on_failure = fallback.on_failure;
        let index = (0..names.len()).map(syn::Index::from);
        // The fallback's expected signature, at the literal that named it.
        let private_at = private.at(span);
        let expected = quote_spanned! {span=>
            #[allow(clippy::type_complexity, reason = "the fallback's expected signature, spelled out")]
            let #answer: fn(#(&#types,)* #private_at::CallError<<#ret as #private_at::PolicyResult>::Error>) -> #ret = #path;
        };
        quote! {
            if #record.covers(&#reason, #on_failure) {
                #expected
                #record.answering(&#reason);
                return #answer(#(&#kept.#index,)* #reason);
            }
        }
    });
    let tracked = track(&plan.files);
    let setup = h.setup(&plan.op);
    let call = traced(
        plan,
        quote!(#private::typed::<#ret, _>(async move {
            let #outcome = #carrier.attempt(async move {
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
        })),
    );
    let kept_args = names
        .iter()
        .map(|name| quote!(#private::RetryArg::for_attempt(&#name)));
    with_body(
        func,
        &func.item.sig,
        quote! {
            #tracked
            #carry
            #setup
            #stale_setup
            let #kept = (#(#kept_args,)*);
            #call
        },
    )
}
