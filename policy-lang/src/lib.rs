//! The `.policy` language: text → AST → validated `Spec`, with diagnostics.
//!
//! Attributes and `.policy` files are two spellings of one model; both are lowered to the same
//! `Spec` and checked by the one validator that lives here. This crate has no async code and
//! light dependencies, because the attribute macros use it at compile time.
