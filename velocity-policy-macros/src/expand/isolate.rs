//! `#[isolate]`: the synchronous function becomes an async one whose body runs on a bounded
//! pool, a bulkhead for CPU with its own slots and queue, waited for at most until the current
//! deadline.

use proc_macro2::{Literal, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use velocity_policy_lang::PoolKind;

use super::handles::Handles;
use super::sequence::with_body;
use crate::facade::private;
use crate::files::track;
use crate::func::Func;
use crate::valid::{Isolate, Plan};

pub(super) fn expand(func: &Func, plan: &Plan, isolate: &Isolate) -> TokenStream {
    let output = func
        .output()
        .map_or_else(|| quote!(()), ToTokens::to_token_stream);
    let max_concurrent = isolate.max_concurrent.map(|m| {
        let m = Literal::u32_unsuffixed(m);
        quote!(.max_concurrent(#m))
    });
    let max_queued = isolate.max_queued.map(|m| {
        let m = Literal::u32_unsuffixed(m);
        quote!(.max_queued(#m))
    });
    // At the literal that chose it: without the facade's `rayon` feature, that is where the
    // error points, and it says to turn the feature on (`RayonFeature`).
    let kind = match isolate.pool {
        PoolKind::Rayon => {
            let span = isolate.pool_span;
            Some(quote_spanned!(span=> .rayon::<()>()))
        }
        PoolKind::Blocking => None,
    };
    let mut h = Handles::default();
    h.add_pool(&plan.op, quote!(#max_concurrent #max_queued #kind));
    let pool = h.pool.clone();
    let block = &func.item.block;
    let mut sig = func.item.sig.clone();
    sig.asyncness = Some(syn::Token![async](sig.fn_token.span));
    sig.output =
        syn::parse_quote!(-> ::core::result::Result<#output, #private::isolate::IsolateError>);
    let tracked = track(&plan.files);
    let setup = h.setup(&plan.op);
    with_body(
        func,
        &sig,
        quote! {
            #tracked
            #setup
            #pool.run(move || -> #output #block).await
        },
    )
}
