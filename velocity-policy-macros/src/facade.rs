//! Where the expansions find the facade: every generated path starts at [`private`], which
//! writes `::<the facade as the user's Cargo.toml names it>::__private<patch>`.
//!
//! - The name: a user may rename the dependency (`pol = { package = "policy", .. }`), so it is
//!   read from the Cargo.toml of the crate being compiled (`proc-macro-crate`). The facade's own
//!   tests, examples and doctests get `FoundCrate::Itself`; they are separate crates that see
//!   the facade under its package name, and the facade's library sees itself under that name
//!   too (`extern crate self as policy;` in its `lib.rs`), so `Itself` writes the package name.
//! - The module: `__private` and this crate's patch version (the facade's build script names
//!   its hidden module the same way, and the two are released together), so no user code can
//!   name it and keep compiling across releases.

use proc_macro_crate::FoundCrate;
use proc_macro2::{Ident, Span, TokenStream};
use quote::{ToTokens, quote_spanned};

/// The facade's package name, as published: the one place it is written in this crate.
pub(crate) const FACADE_PACKAGE: &str = "velocity-policy";

/// The facade's hidden module for the expansions, versioned like thiserror's.
pub(crate) const PRIVATE_MODULE: &str = concat!("__private", env!("CARGO_PKG_VERSION_PATCH"));

/// `#private::Deadline` in a `quote!` writes `::velocity_policy::__private0::Deadline` (under the
/// user's name for the facade).
#[expect(
    non_camel_case_types,
    reason = "a unit value read as `#private` in quote!, as thiserror's own `private`"
)]
#[derive(Clone, Copy)]
pub(crate) struct private;

impl private {
    /// The same path with every token at `span`, for a `quote_spanned!` whose errors point at
    /// the user's tokens.
    pub(crate) fn at(self, span: Span) -> TokenStream {
        let root = Ident::new(&facade_name(), span);
        let module = Ident::new(PRIVATE_MODULE, span);
        quote_spanned!(span=> ::#root::#module)
    }
}

impl ToTokens for private {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(self.at(Span::call_site()));
    }
}

/// The facade's name in the crate being compiled: the one place it is looked up.
fn facade_name() -> String {
    root_name(proc_macro_crate::crate_name(FACADE_PACKAGE))
}

/// Whether `first`, the first segment of an attribute's path (`pol` in `#[pol::idempotent]`),
/// names the facade: under the user's name for it, or under its package name.
pub(crate) fn names_facade(first: &str) -> bool {
    first == facade_name() || first == FACADE_PACKAGE.replace('-', "_")
}

/// The crate name the expansion writes, from what `crate_name` found.
///
/// Without an answer (no `CARGO_MANIFEST_DIR` outside Cargo, or a crate that depends on the
/// macros without the facade) the package name is written: the compiler then says that crate
/// is missing, which names the fix (add it to `[dependencies]`).
fn root_name(found: Result<FoundCrate, proc_macro_crate::Error>) -> String {
    match found {
        Ok(FoundCrate::Name(name)) => name,
        Ok(FoundCrate::Itself) | Err(_) => FACADE_PACKAGE.replace('-', "_"),
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    #[test]
    fn a_renamed_dependency_is_written_under_its_new_name() {
        assert_eq!(root_name(Ok(FoundCrate::Name("pol".into()))), "pol");
    }

    #[test]
    fn the_facade_itself_and_an_unknown_manifest_write_the_package_name() {
        assert_eq!(root_name(Ok(FoundCrate::Itself)), "velocity_policy");
        let missing = proc_macro_crate::crate_name("a-crate-nobody-depends-on");
        assert!(missing.is_err());
        assert_eq!(root_name(missing), "velocity_policy");
    }

    #[test]
    fn an_attribute_path_names_the_facade_by_its_package_name() {
        assert!(names_facade("velocity_policy"));
        assert!(!names_facade("tokio"));
    }

    #[test]
    fn the_private_module_carries_the_patch_version() {
        let patch = env!("CARGO_PKG_VERSION_PATCH");
        assert_eq!(PRIVATE_MODULE, format!("__private{patch}"));
        // This crate does not depend on the facade, so the package name is written.
        let path = quote!(#private::Deadline).to_string();
        assert_eq!(
            path,
            format!(":: velocity_policy :: __private{patch} :: Deadline")
        );
    }
}
