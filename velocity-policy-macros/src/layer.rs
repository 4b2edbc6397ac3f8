//! `operation_layer!("name")`: a `.policy` operation as an `OperationLayer`, found and checked
//! exactly as `#[velocity_policy::operation("name")]` is: the same files ([`crate::files`]), the same
//! lowering ([`crate::lower`], whose unknown-name error names the files searched and the closest
//! name), the same validator ([`crate::valid`]), and the same registry handles
//! ([`crate::expand`]), so a layer and an attribute that name one breaker share its state.

use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;

use crate::args::{Args, Errors, Spanned};
use crate::{expand, files, lower, valid};

/// The expansion of `operation_layer!(input)`, written in `source_file`.
pub(crate) fn operation_layer(input: TokenStream, source_file: Option<&Path>) -> TokenStream {
    let name = match syn::parse2::<syn::LitStr>(input) {
        Ok(name) => name,
        Err(error) => {
            return syn::Error::new(
                error.span(),
                "expected the operation's name as a string literal: `velocity_policy::operation_layer!(\"index_document\")`\nnote: the operation is looked up in the crate's `.policy` files at compile time, so its name must be written out",
            )
            .to_compile_error();
        }
    };
    let (op, span) = (name.value(), name.span());
    let mut errors = Errors::default();
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let dir = files::locate(manifest_dir.as_deref(), source_file);
    let loaded = files::load(dir).unwrap_or_else(|message| {
        errors.at(span, message);
        files::Loaded::default()
    });
    let args = Args {
        operation: Some(Spanned {
            value: op.clone(),
            span,
        }),
        ..Args::default()
    };
    // The macro names its operation: it binds to it whatever the crate's `bind` says.
    let lowered = lower::lower(
        &args,
        &op,
        span,
        loaded,
        files::Binding::ByName,
        &mut errors,
    );
    match (
        valid::validate_layer(&lowered, &mut errors),
        errors.combined(),
    ) {
        (Some(plan), None) => expand::operation_layer(&plan),
        (_, Some(error)) => error.to_compile_error(),
        (None, None) => syn::Error::new(span, "internal: no plan and no error").to_compile_error(),
    }
}
