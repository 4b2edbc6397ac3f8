//! `operation_layer!("index_document")`: the operation as an `OperationLayer` builder chain,
//! over the same handles an attribute naming that operation uses ([`Handles`]):
//!
//! ```text
//! {
//!     const _: &[u8] = ::core::include_bytes!("…/policies/service.policy");
//!     let (breaker, bulkhead, retry) = { /* the statics, as in an attribute's expansion */ };
//!     ::velocity_policy::__private0::layer::OperationLayer::new("index_document", Duration::from_millis(300))
//!         .span(|_| info_span!(target: "policy", "index_document", operation = "index_document", class = "critical"))
//!         .calls({ static CALLS: Calls = Calls::new("index_document"); &CALLS })
//!         .min_budget(Duration::from_millis(50))
//!         .breaker(::core::clone::Clone::clone(breaker))
//!         .bulkhead(::core::clone::Clone::clone(bulkhead))
//!         .retry(::core::clone::Clone::clone(retry))
//! }
//! ```
//!
//! The order of the calls is the builder's: the bulkhead before the shedding decision (its
//! load is the signal), retry last (it changes the layer's type). The layer itself applies
//! them in the documented order.

use proc_macro2::TokenStream;
use quote::quote;
use velocity_policy_lang::WorkClass;

use super::duration;
use super::handles::Handles;
use crate::facade::private;
use crate::files::track;
use crate::valid::Plan;

/// The expression `operation_layer!` expands to (a critical operation: see
/// [`crate::valid::validate_layer`]).
pub(crate) fn operation_layer(plan: &Plan) -> TokenStream {
    let h = Handles::of(plan);
    let op = &plan.op;
    let budget = plan
        .deadline
        .map_or_else(|| quote!(#private::Deadline::MAX_BUDGET), duration);
    let clone = |handle: &proc_macro2::Ident| quote!(::core::clone::Clone::clone(#handle));
    let min_budget = plan.min_budget.map(|min| {
        let min = duration(min);
        quote!(.min_budget(#min))
    });
    let breaker = h.breaker.as_ref().map(|b| {
        let b = clone(b);
        quote!(.breaker(#b))
    });
    let bulkhead = h.bulkhead.as_ref().map(|b| {
        let b = clone(b);
        quote!(.bulkhead(#b))
    });
    let shed = h.shedder.as_ref().map(|s| {
        let (s, cost) = (clone(s), duration(plan.expected_cost.unwrap_or_default()));
        let class = match plan.class {
            WorkClass::Deferred => quote!(#private::WorkClass::Deferred),
            WorkClass::Background => quote!(#private::WorkClass::Background),
            WorkClass::Critical => quote!(#private::WorkClass::Critical),
        };
        quote!(.shed(#s, #class, #cost))
    });
    let ratelimit = h.ratelimit.as_ref().map(|r| {
        let r = clone(r);
        quote!(.ratelimit(#r))
    });
    let chaos = h.chaos.as_ref().map(|c| {
        let c = clone(c);
        quote!(.chaos(#c))
    });
    let named = h.operation.as_ref().map(|o| {
        let o = clone(o);
        quote!(.deadline_of(#o))
    });
    let retry = h.retry.as_ref().map(|r| {
        let r = clone(r);
        quote!(.retry(#r))
    });
    let tracked = track(&plan.files);
    let setup = h.setup(op);
    quote! {
        {
            #tracked
            #setup
            #private::layer::OperationLayer::new(#op, #budget)
                .span(|_| #private::tracing::info_span!(
                    target: "policy",
                    #op,
                    operation = #op,
                    class = "critical",
                    "otel.status_code" = #private::tracing::field::Empty,
                    "error.type" = #private::tracing::field::Empty,
                ))
                .calls({
                    static CALLS: #private::Calls = #private::Calls::new(#op);
                    &CALLS
                })
                #min_budget
                #named
                #breaker
                #bulkhead
                #shed
                #ratelimit
                #chaos
                #retry
        }
    }
}
