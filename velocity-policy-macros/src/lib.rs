//! Attribute macros for `policy`; users reach them through the facade (`#[velocity_policy::critical]`).
//!
//! Each attribute lowers its arguments to the same model as `.policy` files, asks the one
//! validator in `velocity-policy-lang`, and expands to a short, readable sequence of calls into the
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
mod facade;
mod fallback;
mod files;
mod func;
mod layer;
mod lower;
#[cfg(test)]
mod snapshots;
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
#[doc = include_str!("keys.md")]
#[proc_macro_attribute]
pub fn critical(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Critical, args, item)
}

/// Deferred work: calling the function schedules it to run after the response is finished
/// and returns `()` at once. Must be `#[idempotent]`. See the `policy` crate docs.
#[doc = include_str!("keys.md")]
#[proc_macro_attribute]
pub fn deferred(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Deferred, args, item)
}

/// Background work: calling the function hands it to the bounded background pool (shed first
/// under pressure) and returns `()` at once. Must be `#[idempotent]`. See the `policy` crate
/// docs.
///
/// With `queue = "name"` the call enqueues its arguments on that durable queue (a Redis
/// stream, `velocity_policy::queue`) once one is installed under the name, and runs on the pool as
/// above until then. The function must then be a free function with owned `serde` arguments
/// and no type parameters; the attribute also writes a module of the function's name whose
/// `task()` is what the queue's worker runs:
///
/// ```text
/// #[velocity_policy::background(queue = "embeddings", deadline = "30s")]
/// #[velocity_policy::idempotent]
/// async fn embed_document(id: u64, text: String) -> Result<(), EmbedError> { .. }
///
/// velocity_policy::queue::install(embeddings.clone());
/// let worker = embeddings.worker().handle(embed_document::task()).start();
/// embed_document(7, text); // enqueued; run by whichever instance's worker takes it
/// ```
#[doc = include_str!("keys.md")]
#[proc_macro_attribute]
pub fn background(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Background, args, item)
}

/// Resilience mechanisms around a call: breaker, bulkhead, retry and deadline, each named in a
/// `.policy` file or given inline. See the `policy` crate docs.
#[doc = include_str!("keys.md")]
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
/// `#[velocity_policy::operation("charge_card")]`.
///
/// Without it a function binds to the operation of its own name, if the files declare one. A
/// crate whose `Cargo.toml` has `[package.metadata.policy] bind = "explicit"` binds only
/// through this attribute (any other value of `bind` is a compile error naming the file).
#[proc_macro_attribute]
pub fn operation(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Operation, args, item)
}

/// Turns a synchronous function into an async one whose body runs on a bounded pool for CPU
/// work, waited for at most until the current deadline:
/// `#[velocity_policy::isolate(max_concurrent = 2, max_queued = 4, pool = "blocking")]`. The function
/// then returns `Result<T, velocity_policy::isolate::IsolateError>`. See the `policy` crate docs.
///
/// # Keys
///
/// | key | type | default | what it does |
/// |---|---|---|---|
/// | `max_concurrent` | whole number | the file's, else unset | bodies running at once on the pool |
/// | `max_queued` | whole number | the file's, else unset | calls waiting for a slot; past it, refused |
/// | `pool` | `"blocking"` or `"rayon"` | `"blocking"` | tokio's blocking threads, or a dedicated rayon pool (feature `rayon`) |
#[proc_macro_attribute]
pub fn isolate(args: TokenStream, item: TokenStream) -> TokenStream {
    run(AttrKind::Isolate, args, item)
}

/// A `.policy` operation as a tower layer: `velocity_policy::operation_layer!("index_document")`
/// (feature `tower`).
///
/// At compile time the operation is found in the crate's `.policy` files exactly as
/// `#[velocity_policy::operation("index_document")]` finds it, checked by the same validator (an
/// unknown name is an error naming the files searched and the closest name), and expanded to
/// a `velocity_policy::layer::OperationLayer` built from the same registry entries an attribute naming
/// that operation uses: a layer and a `#[velocity_policy::resilient]` function that name one breaker
/// share its state. The files are tracked, so editing them rebuilds the crate.
///
/// ```text
/// // policies/search.policy
/// breaker search { open_after = 5 failures within 30s; cooldown = 20s }
/// bulkhead search { max_concurrent = 4; max_queued = 2 }
/// retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s) }
/// operation index_document: critical, idempotent {
///     breaker = search; bulkhead = search; retry = transient; deadline = 2s; min_budget = 50ms
/// }
/// ```
///
/// ```ignore
/// use velocity_policy::Idempotent;
/// use tower::{Layer, ServiceExt};
///
/// // deadline 2 s (min_budget 50 ms), then per attempt (retried under `transient`): the
/// // breaker `search`, a slot of the bulkhead `search`, the call.
/// let layer = velocity_policy::operation_layer!("index_document");
/// // The operation retries, so the service must be claimed idempotent (a type error
/// // otherwise), as the file claims the operation is.
/// let index = layer.layer(Idempotent::service(tower::service_fn(index_document)));
/// ```
///
/// The operation must be critical work without a fallback, `stale_if_error`, `poll_budget` or
/// `isolate` (those need the function's arguments or body: use the attribute); anything else
/// is a compile error saying so. The runnable version is the facade's
/// `tests/operation_layer.rs`.
#[proc_macro]
pub fn operation_layer(input: TokenStream) -> TokenStream {
    let source_file = proc_macro::Span::call_site().local_file();
    layer::operation_layer(input.into(), source_file.as_deref()).into()
}
