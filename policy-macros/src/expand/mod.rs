//! Phase 4: the expansion, a short and readable sequence of named calls into the runtime's
//! separate mechanisms:
//!
//! 1. the mechanisms' handles, each registered once in a `static` ([`handles`]);
//! 2. the operation's deadline, a child of the current one, refused below the minimum useful
//!    budget; then the shedding decision, when there is one to make ([`sequence`]);
//! 3. for each attempt (inside `retry_within_self_bounded` when retried): `breaker.check()`,
//!    `bulkhead.acquire(..)`, `deadline.run_in_scope(body)`, then `breaker.observe(ran)`;
//! 4. for critical work that has one, what answers when it cannot run: stale-if-error, its
//!    fallback ([`answer`]).
//!
//! `#[isolate]` expands apart ([`isolate`]); `operation_layer!` expands to a builder chain over
//! the same handles ([`layer`]). A refusal ends the sequence at once. Nothing here
//! can fail: [`crate::valid`] checked everything the expansion relies on. Generated locals use
//! mixed-site hygiene, and the statics live inside a block of their own, so nothing clashes
//! with the user's names. Every path goes through the facade (`::policy::...`).

mod answer;
mod handles;
mod isolate;
mod layer;
mod sequence;

pub(crate) use layer::operation_layer;

use std::time::Duration;

use policy_lang::WorkClass;
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::quote;

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
fn duration(d: Duration) -> TokenStream {
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

#[cfg(test)]
mod tests {
    //! The expansion, read as code: `prettyplease` output compared with checked-in files.
    //! Regenerate with `UPDATE_SNAPSHOTS=1 cargo test -p policy-macros` and review the diff.

    use std::path::Path;

    use proc_macro2::TokenStream;
    use quote::quote;

    use crate::args::AttrKind;
    use crate::entry::attribute;

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
        // The documented order: deadline, then per attempt breaker, bulkhead, run, record.
        let at = |needle: &str| {
            out.find(needle)
                .unwrap_or_else(|| panic!("`{needle}` in\n{out}"))
        };
        assert!(at("Deadline::for_operation") < at("retry_within"));
        assert!(at("retry_within") < at("breaker.check()"));
        assert!(at("breaker.check()") < at("bulkhead.acquire"));
        assert!(at("bulkhead.acquire") < at(".run_in_scope("));
        assert!(at(".run_in_scope(") < at("breaker.observe("));
        check("resilient", &out);
    }

    #[test]
    fn operation_layer_is_a_builder_chain_over_the_attributes_handles() {
        let manifest = env!("CARGO_MANIFEST_DIR");
        let source = Path::new(manifest).join("tests/expand/input.rs");
        let tokens = crate::layer::operation_layer(quote!("reindex_all"), Some(&source));
        let expr = syn::parse2::<syn::Expr>(tokens).expect("the expansion parses as an expression");
        // As a `let`, so prettyplease prints it as code.
        let file: syn::File = syn::parse_quote!(fn layer() { let layer = #expr; });
        let out = prettyplease::unparse(&file).replace(manifest, "$CARGO_MANIFEST_DIR");
        // The same statics an attribute naming these mechanisms declares.
        for handle in [
            "Handle::breaker(\"search\", BY)",
            "Handle::bulkhead(\"search\", BY)",
            "Handle::retry(\"transient\", BY)",
        ] {
            assert!(out.contains(handle), "{handle} in\n{out}");
        }
        assert!(
            out.contains("include_bytes!"),
            "the files are tracked:\n{out}"
        );
        check("operation_layer", &out);
    }

    #[test]
    fn operation_layer_refuses_what_it_cannot_be_with_the_fix() {
        let manifest = env!("CARGO_MANIFEST_DIR");
        let source = Path::new(manifest).join("tests/expand/input.rs");
        let out = crate::layer::operation_layer(quote!("reindex_al"), Some(&source)).to_string();
        assert!(out.contains("unknown operation `reindex_al`"), "{out}");
        assert!(out.contains("searched `search.policy`"), "{out}");
        assert!(out.contains("did you mean `reindex_all`?"), "{out}");
        let out = crate::layer::operation_layer(quote!("warm_cache"), Some(&source)).to_string();
        assert!(
            out.contains("operation `warm_cache` is deferred work"),
            "{out}"
        );
        assert!(out.contains("search.policy:"), "where it says so: {out}");
        let out = crate::layer::operation_layer(quote!(NAME), Some(&source)).to_string();
        assert!(
            out.contains("expected the operation's name as a string literal"),
            "{out}"
        );
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
    fn a_binding_by_name_is_said_in_the_functions_docs() {
        let out = expand(
            AttrKind::Critical,
            quote!(deadline = "2s"),
            quote! {
                /// The price, from the pricing service.
                async fn fetch_price(sku: u64) -> Result<u64, AppError> {
                    pricing().get(sku).await
                }
            },
        );
        // Bound to the file's operation of the same name: its breaker applies, and the docs
        // say where it was declared.
        assert!(out.contains("breaker.check()"), "{out}");
        assert!(
            out.contains(
                "/// Policy: bound to the operation `fetch_price` declared at `tests/expand/policies/search.policy:23:11`"
            ),
            "{out}"
        );
        assert!(
            out.starts_with("/// The price, from the pricing service.\n///\n/// Policy:"),
            "{out}"
        );
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

    #[test]
    fn rules_about_the_functions_shape_are_reported_with_the_others() {
        // Before the rules were one step, the first of these stopped the macro and the others
        // waited for the next build.
        let out = expand(
            AttrKind::Critical,
            quote!(
                deadline = "1s",
                retry = "transient",
                stale_if_error = "30s",
                fallback = "not a path!"
            ),
            quote! {
                async fn lookup<T>((a, b): (u8, u8), key: &str) -> Result<T, AppError> {
                    todo!()
                }
            },
        );
        for message in [
            "operation `lookup` is retried but not marked `idempotent`",
            "a fallback needs plain parameter names",
            "`stale_if_error` keeps results in a cache built once per function",
            "`stale_if_error` keys its cache on the arguments, so they must be owned",
            "`not a path!` is not a function's name",
        ] {
            assert!(out.contains(message), "{message:?} in\n{out}");
        }
        assert!(out.contains("async fn lookup<T>"), "{out}");
    }

    #[test]
    fn a_broken_policy_file_is_reported_by_every_expansion_in_one_process() {
        // As rust-analyzer's proc-macro server does: one process expands function after
        // function (and the same one again after each edit). Each expansion that reads the
        // broken file shows its error, the second from the files' cache.
        let root =
            std::env::temp_dir().join(format!("policy-macros-broken-{}", std::process::id()));
        std::fs::create_dir_all(root.join("policies")).expect("a temporary directory");
        std::fs::write(
            root.join("policies/broken.policy"),
            "bulkhead search { max_concurent = 4 }\n",
        )
        .expect("write the policy file");
        let source = root.join("src/lib.rs");
        for function in ["save", "load", "save"] {
            let ident = syn::Ident::new(function, proc_macro2::Span::call_site());
            let tokens = attribute(
                AttrKind::Critical,
                quote!(deadline = "1s"),
                quote!(async fn #ident(id: u64) -> Result<(), AppError> { Ok(()) }),
                Some(&source),
            )
            .to_string();
            assert!(
                tokens.contains("unknown setting `max_concurent` in `bulkhead`"),
                "{function}: {tokens}"
            );
            assert!(
                tokens.contains("broken.policy:1:19"),
                "{function}: {tokens}"
            );
            assert!(tokens.contains(&format!("async fn {function}")), "{tokens}");
        }
        std::fs::remove_dir_all(&root).expect("remove the temporary directory");
    }

    #[test]
    fn durations_are_written_in_their_exact_unit() {
        use std::time::Duration;
        let written = |d: Duration| super::duration(d).to_string().replace(' ', "");
        assert_eq!(written(Duration::ZERO), "::core::time::Duration::ZERO");
        assert_eq!(
            written(Duration::from_secs(30)),
            "::core::time::Duration::from_secs(30)"
        );
        assert_eq!(
            written(Duration::from_millis(1500)),
            "::core::time::Duration::from_millis(1500)"
        );
        assert_eq!(
            written(Duration::from_micros(250)),
            "::core::time::Duration::from_micros(250)"
        );
        assert_eq!(
            written(Duration::from_nanos(7)),
            "::core::time::Duration::from_nanos(7)"
        );
    }
}
