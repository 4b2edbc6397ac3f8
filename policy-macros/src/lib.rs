//! Attribute macros for `policy`; users reach them through the facade (`#[policy::critical]`).
//!
//! Each attribute lowers its arguments to the same model as `.policy` files, asks the one
//! validator in `policy-lang`, and expands to a short, readable sequence of calls into the
//! runtime's separate mechanisms. Unsafe combinations (retrying work that is not idempotent,
//! deferring a durable write, a retry with no deadline above it) are compile errors that point
//! at the offending token and say how to fix them. See the `policy` crate's documentation for
//! the attributes, their arguments and the expansion.
//!
//! This crate is a thin shim: it converts tokens and hands them to ordinary modules that take
//! and return `proc_macro2::TokenStream`, so the logic is unit-tested without a compiler.

mod args;
mod entry;
mod expand;
mod fallback;
mod files;
mod func;
mod lower;
mod valid;

use proc_macro::TokenStream;

use crate::args::AttrKind;

fn run(kind: AttrKind, args: TokenStream, item: TokenStream) -> TokenStream {
    // Where the annotated code lives, to find the nearest `policies/` directory (stable since
    // Rust 1.88; `None` in tools that do not know the file).
    let source_file = proc_macro::Span::call_site().local_file();
    entry::attribute(kind, args.into(), item.into(), source_file.as_deref()).into()
}

/// Critical work: runs before the response, under a child of the current deadline, never
/// shed for load. See the `policy` crate docs.
#[proc_macro_attribute]
pub fn critical(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Critical, args, item)
}

/// Deferred work: calling the function schedules it to run after the response is finished
/// and returns `()` at once. Must be `#[idempotent]`. See the `policy` crate docs.
#[proc_macro_attribute]
pub fn deferred(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Deferred, args, item)
}

/// Background work: calling the function hands it to the bounded background pool (shed first
/// under pressure) and returns `()` at once. Must be `#[idempotent]`. See the `policy` crate
/// docs.
#[proc_macro_attribute]
pub fn background(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Background, args, item)
}

/// Resilience mechanisms around a call: breaker, bulkhead, retry and deadline, each named in a
/// `.policy` file or given inline. See the `policy` crate docs.
#[proc_macro_attribute]
pub fn resilient(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Resilient, args, item)
}

/// Declares the function safe to run more than once; required for retried, deferred and
/// background work.
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Idempotent, args, item)
}

/// Binds the function to an operation of the crate's `.policy` files:
/// `#[policy::operation("charge_card")]`.
#[proc_macro_attribute]
pub fn operation(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Operation, args, item)
}

/// Turns a synchronous function into an async one whose body runs on a bounded pool for CPU
/// work, waited for at most until the current deadline:
/// `#[policy::isolate(max_concurrent = 2, max_queued = 4, pool = "blocking")]`. The function
/// then returns `Result<T, policy::isolate::IsolateError>`. See the `policy` crate docs.
#[proc_macro_attribute]
pub fn isolate(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Isolate, args, item)
}
