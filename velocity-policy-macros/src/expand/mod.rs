//! Phase 4: the expansion, a short and readable sequence of named calls into the runtime's
//! separate mechanisms:
//!
//! 1. the mechanisms' handles, each registered once in a `static` ([`handles`]);
//! 2. the operation's deadline, a child of the current one, refused below the minimum useful
//!    budget; then the shedding decision, when there is one to make; then the rate limit,
//!    `ratelimit.acquire().await`, once per call, when the operation names one ([`sequence`]);
//! 3. for each attempt (inside `retry_within_self_bounded` when retried): `breaker.check()`,
//!    `bulkhead.acquire(..)`, `deadline.run_in_scope(body)`, then `breaker.observe(ran)`;
//! 4. for critical work that has one, what answers when it cannot run: stale-if-error, its
//!    fallback ([`answer`]).
//!
//! `#[isolate]` expands apart ([`isolate`]); `operation_layer!` expands to a builder chain over
//! the same handles ([`layer`]). A refusal ends the sequence at once. Nothing here
//! can fail: [`crate::valid`] checked everything the expansion relies on. Generated locals use
//! mixed-site hygiene, and the statics live inside a block of their own, so nothing clashes
//! with the user's names. Every path goes through the facade's hidden module
//! (`::velocity_policy::__private0::...` under the user's name for the facade: [`crate::facade`]).

mod answer;
mod handles;
mod isolate;
mod layer;
mod sequence;

pub(crate) use layer::operation_layer;

use std::time::Duration;

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::quote;
use velocity_policy_lang::WorkClass;

use crate::func::Func;
use crate::valid::Plan;

/// The expansion of a validated function.
pub(crate) fn expand(func: &Func, plan: &Plan) -> TokenStream {
    // A binding to a file's operation is said where the function is documented (its rustdoc
    // page, an editor's hover), so that running behind the file's breaker and retry is never a
    // surprise.
    let bound;
    let func = match &plan.bound {
        Some(at) => {
            let mut item = func.item.clone();
            let text = format!(
                " Policy: bound to the operation `{}` declared at `{at}`: what it declares applies, and the attribute's values override the file's.",
                plan.op
            );
            let separator: syn::Attribute = syn::parse_quote!(#[doc = ""]);
            let doc: syn::Attribute = syn::parse_quote!(#[doc = #text]);
            if item.attrs.iter().any(|attr| attr.path().is_ident("doc")) {
                item.attrs.push(separator);
            }
            item.attrs.push(doc);
            bound = Func { item };
            &bound
        }
        None => func,
    };
    if let Some(isolate) = &plan.isolate {
        return isolate::expand(func, plan, isolate);
    }
    match (plan.class, &plan.answer) {
        (WorkClass::Deferred | WorkClass::Background, _) => sequence::scheduled(func, plan),
        (WorkClass::Critical, Some(answer)) => answer::expand(func, plan, answer),
        (WorkClass::Critical, None) => sequence::awaited(func, plan),
    }
}

/// A local the user's code cannot see or shadow.
fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

/// A duration in its exact unit: `::core::time::Duration::from_secs(30)`.
pub(crate) fn duration(d: Duration) -> TokenStream {
    let exact = exact_unit(d);
    quote!(::core::time::Duration::#exact)
}

/// `from_secs(30)`, `from_millis(50)`, `ZERO`: what follows `Duration::`.
fn exact_unit(d: Duration) -> TokenStream {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return quote!(ZERO);
    }
    let (unit, per) = [
        ("from_secs", 1_000_000_000),
        ("from_millis", 1_000_000),
        ("from_micros", 1_000),
    ]
    .into_iter()
    .find(|(_, per)| nanos.is_multiple_of(*per))
    .unwrap_or(("from_nanos", 1));
    let unit = Ident::new(unit, Span::call_site());
    let value = Literal::u64_unsuffixed(u64::try_from(nanos / per).unwrap_or(u64::MAX));
    quote!(#unit(#value))
}

/// The name the registry knows this function's own mechanisms by (its shedder, its fallback
/// record, its pool): the operation's name, made unique by the module path.
fn operation_name(op: &str) -> TokenStream {
    quote!(::core::concat!(::core::module_path!(), "::", #op))
}
