//! Attribute macros for `policy`.
//!
//! `#[critical]`, `#[deferred]`, `#[background]`, `#[resilient]` and `#[idempotent]` lower
//! their arguments to the same model as `.policy` files, ask the one validator in
//! `policy-lang`, and expand to a readable sequence of calls into the runtime's separate
//! mechanisms. Users reach them through the `policy` facade.
