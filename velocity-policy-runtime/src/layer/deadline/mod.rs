//! The request's deadline, end to end (feature `http`): one deadline per request, stamped
//! before the handler runs, in scope for the handler and its response body; tightened by what
//! the caller sent; carried on to the services it calls.
//!
//! - [`DeadlineLayer`] (server side) stamps the deadline. Its budget is the smaller of the
//!   configured one (the `.policy` file's `request { deadline }`, or a builder value) and what
//!   the caller sent: a `grpc-timeout` header, or the plain millisecond header
//!   [`DEADLINE_MS_HEADER`] (configurable) for HTTP callers. A header that does not parse
//!   (`-1S`, nine digits, an unknown unit, empty) is ignored with a debug event and the
//!   configured budget applies. A request that arrives with less than the
//!   [minimum budget](DeadlineLayer::min_budget) is answered at once and the handler never
//!   runs: `504 Gateway Timeout` over HTTP, gRPC status `DEADLINE_EXCEEDED` (4) for a gRPC
//!   request, with `x-refusal: insufficient_budget` either way (a header, or the status's
//!   metadata). When the deadline passes before the handler answers, the layer stops waiting
//!   and answers the same way (`x-deadline-exceeded: deadline_exceeded`).
//! - **Whose budget it is.** When the caller's header is what bounds the request, the deadline
//!   is the caller's ([`Deadline::is_callers`]), and so is every child it decides: an expiry
//!   under it is never counted against a dependency by a breaker, never retried, never shared,
//!   so a client sending short deadlines shortens only its own wait. On the public internet,
//!   [`DeadlineLayer::trust_headers`] ignores the headers, or believes them only from callers
//!   your edge marked internal ([`HeaderTrust`]: the trade-off is there).
//! - Every annotated function and every mechanism layer below takes a child of it
//!   ([`Deadline::current`]): two sibling `#[critical]` calls in one handler share one budget.
//! - A handler reads it with the axum extractor: `async fn handler(deadline: Deadline)`.
//! - [`PropagateDeadlineLayer`] (client side) sets `grpc-timeout` and the millisecond header on
//!   an outgoing `http::Request` from the current deadline minus a reserve: around hyper's
//!   client, a tonic channel or any tower HTTP client.
//!
//! The deadline travels the way [`Deadline::scope`] says: while the request's futures are
//! polled, not into a task they spawn.
//!
//! ```
//! use std::time::Duration;
//! use axum::{Router, routing::get};
//! use velocity_policy_runtime::Deadline;
//! use velocity_policy_runtime::layer::DeadlineLayer;
//!
//! async fn search(deadline: Deadline) -> String {
//!     // Annotated functions called here take children of `deadline`.
//!     format!("{} ms left", deadline.remaining().as_millis())
//! }
//!
//! let app: Router = Router::new().route("/search", get(search)).layer(
//!     DeadlineLayer::new(Duration::from_secs(2)).min_budget(Duration::from_millis(50)),
//! );
//! # let _ = app;
//! ```
//!
//! [`Deadline::current`]: crate::Deadline::current
//! [`Deadline::is_callers`]: crate::Deadline::is_callers
//! [`Deadline::scope`]: crate::Deadline::scope

mod body;
mod extract;
mod future;
mod headers;
mod layer;
mod propagate;
mod service;

pub use body::DeadlineBody;
pub use extract::MissingDeadlineLayer;
pub use future::ResponseFuture;
pub use headers::{DEADLINE_MS_HEADER, GRPC_TIMEOUT_HEADER, parse_ms_header};
pub use layer::{DeadlineLayer, HeaderTrust, IsInternal};
pub use propagate::{PropagateDeadline, PropagateDeadlineLayer};
pub use service::DeadlineService;

/// What a [`DeadlineLayer`] stamps each request with, shared by the layer (which builds it)
/// and its services (which read it per request).
#[derive(Debug)]
struct Config {
    name: std::sync::Arc<str>,
    budget: std::time::Duration,
    min_budget: std::time::Duration,
    ms_header: Option<http::HeaderName>,
    grpc_timeout: bool,
    trust: HeaderTrust,
}
