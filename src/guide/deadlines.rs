//! One deadline per request: how it nests, whose deadline it is, and the request's bound that
//! `policy explain` draws as a tree.
//!
//! # One request, one deadline
//!
//! A `DeadlineLayer` (feature `http`, in `velocity_policy::layer`) stamps one deadline per
//! request (the `request { deadline }` budget, which an incoming `grpc-timeout` or
//! `x-deadline-ms` header can only shorten) and puts it in scope for the whole request. Every
//! annotated function and every layer below takes a *child* of the deadline in scope: the
//! smaller of its own `deadline` and what is left above it, so siblings share one budget and
//! nothing outlives the request. A call that would start with less than its `min_budget` is
//! refused at once ([`RefusalKind::InsufficientBudget`](crate::RefusalKind)); outgoing calls carry
//! what is left (minus a reserve) through
//! `PropagateDeadlineLayer`.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy::{Deadline, DeadlineExceeded, RefusalKind, ResilienceError};
//!
//! #[derive(Debug)]
//! enum AppError { Refused(ResilienceError), TimedOut(DeadlineExceeded) }
//! impl From<ResilienceError> for AppError { fn from(e: ResilienceError) -> Self { Self::Refused(e) } }
//! impl From<DeadlineExceeded> for AppError { fn from(e: DeadlineExceeded) -> Self { Self::TimedOut(e) } }
//!
//! /// Asks for 10 s, but gets no more than the request has left.
//! #[velocity_policy::critical(deadline = "10s", min_budget = "100ms")]
//! async fn lookup() -> Result<Duration, AppError> {
//!     Ok(Deadline::current().expect("in scope").remaining())
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // What `DeadlineLayer` does for each request: one deadline, in scope for the handler.
//! let request = Deadline::after(Duration::from_millis(300));
//! let left = request.scope(lookup()).await.unwrap();
//! assert_eq!(left, Duration::from_millis(300)); // the request's 300 ms, not the 10 s asked for
//!
//! // With less than `min_budget` left, the work never starts.
//! tokio::time::advance(Duration::from_millis(250)).await;
//! let Err(AppError::Refused(refusal)) = request.scope(lookup()).await else { panic!() };
//! assert_eq!(refusal.kind(), RefusalKind::InsufficientBudget);
//! # }
//! ```
//!
//! `velocity_policy::Deadline` itself (`child`, `run`, `scope`, `current`) is documented in
//! [`Deadline`](crate::Deadline); a tower service reads the request's deadline with the same
//! type as an axum extractor ([`guide::layers`](crate::guide::layers)).
//!
//! # Whose deadline it is
//!
//! A caller's `grpc-timeout` or `x-deadline-ms` can only shorten the
//! request's budget, and an expiry under a budget the caller shortened is the caller's: no breaker
//! counts it, no retry repeats it, no other instance hears of it, so a client sending short
//! deadlines shortens only its own wait. Behind your own edge, believing callers is what you want
//! (nobody works 5 s on an answer its caller gave up on after 300 ms). On the public internet,
//! `DeadlineLayer::trust_headers(HeaderTrust::None)` gives every request the configured budget (we
//! may finish work nobody waits for), and `HeaderTrust::InternalHeader` or `trust_headers_when`
//! believe only callers your edge or mesh marked.
//!
//! # The request's bound: a route's tree and its two worst cases
//!
//! Nested operations each bring their own timeout; what bounds the request is how they nest.
//! Given the crate's folder or its `policies/`, `policy explain` also reads the crate's Rust
//! sources (the annotated functions, what their attributes set, and which one calls which) and
//! prints one **tree** per entry point: a route's operation, a task, deferred or background
//! work. `policy explain examples/demo/policies/ save_document` prints the demo's save:
//!
//! ```text
//! tree save_document: critical, within the request's 5s
//!   save_document: deadline 2s, bound 2s
//!   ├─ authenticate: deadline 100ms, bound 100ms [static]
//!   ├─ lookup_session: deadline 150ms, bound 150ms [static]
//!   ├─ authorize: deadline 100ms, bound 100ms [static]
//!   ├─ validate: deadline 100ms, bound 100ms [static]
//!   ├─ write_document: deadline 1s, bound 1s [static]
//!   ├─ record_analytics: deferred, after the response: outside this bound (a tree of its own)
//!   ├─ index_document: deferred, after the response: outside this bound (a tree of its own)
//!   ├─ publish_activity: deferred, after the response: outside this bound (a tree of its own)
//!   └─ notify_followers: deferred, after the response: outside this bound (a tree of its own)
//!   worst case with deadline propagation:    2s (`save_document`'s own)
//!   worst case if each timeout stood alone:  3.45s (2s + 100ms + 150ms + 100ms + 100ms + 1s)
//!   what propagation saves:                  1.45s
//!   per path:
//!     save_document > authenticate: 100ms with propagation (`authenticate`), 2.1s alone (2s + 100ms), 2s saved
//!     save_document > lookup_session: 150ms with propagation (`lookup_session`), 2.15s alone (2s + 150ms), 2s saved
//!     save_document > authorize: 100ms with propagation (`authorize`), 2.1s alone (2s + 100ms), 2s saved
//!     save_document > validate: 100ms with propagation (`validate`), 2.1s alone (2s + 100ms), 2s saved
//!     save_document > write_document: 1s with propagation (`write_document`), 3s alone (2s + 1s), 2s saved
//! ```
//!
//! Read it top down. The first line names the entry point, its class and the request deadline
//! above it (`request { deadline = 5s }`, which the `DeadlineLayer` stamps). Each node is an
//! operation the one above it calls, with its own deadline and attempts and its **bound**: the
//! smaller of its own and what its parent can give it (a parent that retries gives each call one
//! attempt's timeout). The mark says how the call is known: `[static]` read in the code,
//! `[observed]` seen by a running service (the dashboard's tree), `[both]`. Deferred and
//! background work the save hands over is listed but runs after the response, outside this bound,
//! as a tree of its own. Then the two worst cases:
//!
//! - **with deadline propagation**: what the runtime enforces. Every call takes a child of its
//!   caller's deadline, so the save can never take longer than the tightest deadline above it,
//!   here `save_document`'s own 2 s inside the request's 5 s.
//! - **if each timeout stood alone**: what the same numbers would allow if each operation waited
//!   out its own window, the sum shown term by term (`N × (attempt + calls below) + backoffs`
//!   for a retried operation, hedges added per attempt). 3.45 s here; a cycle makes it unbounded.
//!
//! `what propagation saves` is the difference, and `per path` gives both for each chain from the
//! entry point down to an operation that calls no other. The numbers are the compiled policy's,
//! with each attribute's values over its operation's, and with `--env NAME` the overrides of
//! `policies/NAME/` in force. `--format json` carries the same trees (`bound_ms`, `alone_ms`,
//! `difference_ms`, `request_ms`, each node and path) and findings.
//!
//! What only the tree shows comes as warnings on standard error, in `policy check`'s style, each
//! with its fix: `policy::explain::child-never-fits` (a child's deadline or attempts longer than
//! any parent that calls it can give: clamped in silence at run time),
//! `policy::explain::attempts-exceed-deadline`, `policy::explain::no-min-budget` (the demo has
//! three: `lookup_session`, `authorize` and `validate` run after a sibling on the same budget and
//! could start with a fraction of a millisecond left), `policy::explain::no-request-deadline` and
//! `policy::explain::call-cycle`. `policy explain --help` says the same in short.
//!
//! At run time the dashboard composes the tree the instance actually called (by name: a run sees
//! who called whom, not in which order) with the numbers in force, shows each node's p99 of the
//! last minute beside its bound, and draws the last five minutes of every operation, breaker,
//! bulkhead and shedder as sparklines. The demo's report prints the save's tree as its run called
//! it and holds every save to its bound.
