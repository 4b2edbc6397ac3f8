//! The attributes: what they expand to, the mistakes they refuse, and how they bind to `.policy` operations.
//!
//! # A short example
//!
//! Annotating a function is all it takes. Arguments name policies declared in the crate's
//! `.policy` files (`breaker = "search"`) or give them inline, as here:
//!
//! ```rust
//! use std::time::Duration;
//! use velocity_policy::{DeadlineExceeded, ResilienceError};
//!
//! #[derive(Debug)]
//! enum AppError {
//!     Unavailable,                  // the search provider failed
//!     Refused(ResilienceError),     // the work never ran: a fallback is the only useful response
//!     TimedOut(DeadlineExceeded),   // we stopped waiting: the work may have run
//! }
//! impl From<ResilienceError> for AppError {
//!     fn from(e: ResilienceError) -> Self { Self::Refused(e) }
//! }
//! impl From<DeadlineExceeded> for AppError {
//!     fn from(e: DeadlineExceeded) -> Self { Self::TimedOut(e) }
//! }
//! impl std::fmt::Display for AppError {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "{self:?}") }
//! }
//! impl velocity_policy::Transient for AppError {
//!     fn is_transient(&self) -> bool { matches!(self, Self::Unavailable | Self::TimedOut(_)) }
//! }
//!
//! /// Behind a breaker and a bulkhead, retried with full jitter, all inside one 2 s budget.
//! #[velocity_policy::resilient(
//!     breaker(failures = 5, within = "30s", cooldown = "20s"),
//!     bulkhead(max_concurrent = 4, max_queued = 2),
//!     retry(attempts = 3, base = "50ms", cap = "1s", attempt_timeout = "500ms"),
//!     deadline = "2s"
//! )]
//! #[velocity_policy::idempotent]
//! async fn push_to_index(id: u64) -> Result<(), AppError> {
//!     # let _ = id;
//!     Ok(())
//! }
//!
//! /// Critical: the user waits for this, and only for this.
//! #[velocity_policy::critical(deadline = "3s", min_budget = "200ms")]
//! async fn save_document(id: u64) -> Result<u64, AppError> {
//!     // ...the canonical write...
//!     index_later(id); // schedules the indexing and returns at once
//!     Ok(id)
//! }
//!
//! /// Deferred: runs after the response is finished; delivered at least once, so idempotent.
//! #[velocity_policy::deferred(deadline = "5s")]
//! #[velocity_policy::idempotent]
//! async fn index_later(id: u64) -> Result<(), AppError> {
//!     push_to_index(id).await
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! assert_eq!(save_document(7).await.unwrap(), 7);
//! // At shutdown, deferred work in flight is drained and counted: nothing is lost silently.
//! let report = velocity_policy::defer::shutdown(Duration::from_secs(1)).await;
//! assert_eq!((report.finished, report.abandoned), (1, 0));
//! # }
//! ```
//!
//! What an attribute expands to is a short sequence of calls into the separate mechanisms, never
//! one merged wrapper (see it with `cargo expand`): take a child of the current deadline and
//! refuse below the minimum budget; the shedding decision; the rate limit
//! (`ratelimit.acquire().await`, once per call, when the operation names one); then, for each
//! attempt inside
//! `retry_within` (which spends the same deadline) and `hedge_within` (when hedged: the attempt
//! again if it is slow), `breaker.check()`, `bulkhead.acquire(..)`,
//! `deadline.run_in_scope(body)` (the deadline in scope for nested calls), and
//! `breaker.observe(ran)`, which records the outcome. A refusal ends the sequence at once and reaches the caller through the function's own
//! error type, which implements `From<ResilienceError>` and `From<DeadlineExceeded>`; a retried
//! function's error also implements `Transient`, which says which failures are worth repeating.
//! Calling a `#[deferred]` function schedules it after the response and returns `()`;
//! `#[background]` hands it to the bounded background pool, shed first under pressure
//! (`#[background(queue = "embeddings")]`: to a durable queue on Redis once one is installed, see
//! [the queue guide](crate::guide::queue)).
//! `#[velocity_policy::operation("charge_card")]` binds a function to an operation of the `.policy` files.
//!
//! Unsafe combinations are compile errors at the offending token, with the fix:
//!
//! ```text
//! error: operation `push_to_index` is retried but not marked `idempotent` [policy::retry-not-idempotent]
//!        help: add `#[velocity_policy::idempotent]` if running it twice is safe, or remove the retry: a network timeout is exactly when the first attempt may have succeeded unseen
//!  --> src/search.rs:3:29
//!   |
//! 3 | #[velocity_policy::resilient(retry = "transient", deadline = "1s")]
//!   |                             ^^^^^^^^^^^
//! ```
//!
//! The others: deferred or background work not declared idempotent, a deferred function that
//! returns a value, two classes on one function, a durable write marked deferred, a retry with no
//! deadline above it, `shed_at` on critical work, a non-async function, an unknown key or policy
//! name (with a suggestion), a malformed duration, an error type that cannot carry a refusal, and
//! any error in a `.policy` file (with its file, line, column and snippet). `tests/ui/` holds one
//! case for each.
//!
//! The macros read every `*.policy` file of the crate's `policies/` directory at compile time (the
//! nearest `policies/` at or above the annotated file, up to the package root; override it with
//! `[package.metadata.policy] dir = "..."` in `Cargo.toml`), and the crate rebuilds when one
//! changes. Named mechanisms are built once, lazily, from the compile-time model; an annotated
//! call allocates nothing (measured in `tests/macro_alloc.rs`).
//!
//! Attributes and files: a function binds to the `.policy` operation of its own name, or to
//! the one `#[velocity_policy::operation("...")]` names (an unknown name is a compile error with a
//! suggestion). A crate that wants every binding written out says so in its `Cargo.toml`:
//!
//! ```toml
//! [package.metadata.policy]
//! bind = "explicit" # only #[velocity_policy::operation("...")] binds; a function's own name binds nothing
//! ```
//!
//! `tests/explicit-binding` is such a crate: its `fetch_price` shares its name with the file's
//! operation and runs with only its attribute's values. Bound, it runs behind everything the file's operation declares (its breaker, its
//! retry), and each value its attribute gives (`deadline`, `min_budget`, `breaker = "..."`, ...)
//! overrides the file's. The class is not overridden: `#[deferred]` on a function whose operation
//! the file declares `critical` is a compile error naming the file, line and column of the
//! declaration (`policy::conflicting-classes`). A bound function's docs (its rustdoc page, an
//! editor's hover) name the operation and where the file declares it.
//!
//! A name is one mechanism: every function (and every `.policy` operation) that names the breaker
//! `search` shares one breaker, with one state. Two different configurations of one name, say two
//! crates that each declare a `breaker search` of their own, are refused loudly rather than won by
//! whichever runs first: the first declaration configures it, and the second is an error event
//! (`kind = "conflict"`) and an entry of `Registry::global().snapshot().conflicts` naming both
//! functions, both settings and the fix (another name, or the same settings).
