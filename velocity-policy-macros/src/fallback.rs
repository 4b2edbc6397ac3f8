//! On errors: the original function, unchanged, plus the errors.
//!
//! Never panic, never print, always expand: the editor keeps working, and one mistake in an
//! attribute does not cascade into twenty errors about a function that no longer exists.

use std::path::PathBuf;

use proc_macro2::TokenStream;
use quote::quote;

/// The function as written (its policy attributes taken off), the errors, and the tracked
/// policy files (so fixing a file triggers a rebuild).
pub(crate) fn emit(item: &syn::ItemFn, error: syn::Error, files: &[PathBuf]) -> TokenStream {
    let errors = error.to_compile_error();
    let mut item = item.clone();
    if !files.is_empty() {
        let tracked = crate::files::track(files);
        if let Ok(block) = syn::parse2::<syn::Block>(quote!({ #tracked })) {
            let mut stmts = block.stmts;
            stmts.append(&mut item.block.stmts);
            item.block.stmts = stmts;
        }
    }
    quote! {
        #errors
        #item
    }
}

/// When even the item could not be read: its tokens as they were, and the error.
pub(crate) fn emit_tokens(item: TokenStream, error: syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    quote! {
        #errors
        #item
    }
}
