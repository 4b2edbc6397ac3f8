//! The whole macro, in three steps (thiserror's and tokio-macros' shape): parse the attributes
//! and the function ([`crate::args`], [`crate::func`]), validate everything at once into a plan
//! ([`crate::lower`] to the model, then [`crate::valid`]), and expand the plan
//! ([`crate::expand`], which cannot fail). Any error anywhere: the function as written, plus
//! every error ([`crate::fallback`]), so the editor keeps working.

use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;
use quote::ToTokens;

use crate::args::{self, AttrKind, Errors};
use crate::func::Func;
use crate::{expand, fallback, files, lower, valid};

/// One policy attribute on `item`, with its siblings; `source_file` is where the annotated code
/// lives, to find the nearest `policies/` directory.
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
    // A method of an `#[async_trait]` impl (tonic's service traits): expanded as the `async fn`
    // it was written as, then put back in the trait's form.
    match crate::func::unwrap_async_trait(&mut func.item) {
        Some(output) => {
            let expanded = expand_func(kind, args, func, source_file);
            crate::func::rewrap(expanded, &output)
        }
        None => expand_func(kind, args, func, source_file),
    }
}

/// [`attribute`] on the function as parsed (an `async fn`, or what a caller read back into one).
fn expand_func(
    kind: AttrKind,
    args: TokenStream,
    mut func: Func,
    source_file: Option<&Path>,
) -> TokenStream {
    let mut errors = Errors::default();
    let args = args::parse(kind, args, &mut func, &mut errors);
    if !args.declares_work() {
        // Only `#[idempotent]`: a declaration, nothing to expand.
        return match errors.combined() {
            Some(error) => fallback::emit(&func.item, error, &[]),
            None => func.item.to_token_stream(),
        };
    }
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let dir = files::locate(manifest_dir.as_deref(), source_file);
    let loaded = files::load(dir).unwrap_or_else(|message| {
        errors.at(valid::anchor_of(&args, &func), message);
        files::Loaded::default()
    });
    let binding = files::binding(manifest_dir.as_deref()).unwrap_or_else(|message| {
        errors.at(valid::anchor_of(&args, &func), message);
        files::Binding::ByName
    });
    let lowered = lower::lower(
        &args,
        &func.name(),
        func.ident_span(),
        loaded,
        binding,
        &mut errors,
    );
    match (
        valid::validate(&args, &func, &lowered, &mut errors),
        errors.combined(),
    ) {
        (Some(plan), None) => expand::expand(&func, &plan),
        (_, Some(error)) => fallback::emit(&func.item, error, &lowered.files),
        (None, None) => fallback::emit(
            &func.item,
            syn::Error::new(func.ident_span(), "internal: no plan and no error"),
            &lowered.files,
        ),
    }
}
