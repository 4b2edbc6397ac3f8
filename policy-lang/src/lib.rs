//! The `.policy` language.
pub mod ast;
pub mod diagnostic;
pub mod parse;
pub mod source;
pub mod suggest;
