//! The mechanisms behind `policy`, each distinct and observable.
//!
//! One question, one module, and the value is in keeping them apart:
//!
//! | question | module | refuses with |
//! |---|---|---|
//! | should we call this at all right now? | [`breaker`] | [`RefusalKind::BreakerOpen`] |
//! | how much of the pool may this dependency hold? | [`bulkhead`] (fixed, or [adaptive](bulkhead::adaptive) to measured latency) | [`RefusalKind::BulkheadFull`] |
//! | is this work worth doing under the current pressure? | [`shedding`] (a pure function) | [`RefusalKind::Shed`], with its reason |
//! | is this failure worth repeating, out of whose budget? | [`retry`] | never retries a refusal |
//! | is the first attempt just slow? | [`hedge`] | never hedges a refusal; hedges draw from the retries' allowance |
//! | how long may this take? | [`deadline`] | [`RefusalKind::InsufficientBudget`] before start, [`DeadlineExceeded`] after |
//! | may this start once more in this period? | [`limiter`] | [`RefusalKind::RateLimited`], with the wait that would admit it |
//!
//! Fault injection for drills is a mechanism of its own, not a mode of the others: `chaos`
//! (feature `chaos`, off by default) injects latency, errors, refusals and 429s *inside* the
//! attempt, so the mechanisms above handle them as real faults, and marks each one injected.
//!
//! Work the user does not wait for has two more: [`defer`](mod@defer) runs work after the response is
//! finished (its failures attached before the hand-over, logged, never rethrown), and
//! [`background`](mod@background) runs it on a bounded pool that sheds it first under pressure,
//! or, with a Redis store (feature `redis`), on a durable [`queue`] that every instance consumes
//! through one consumer group, acknowledged after it finished and redelivered when a worker
//! died.
//! The [`limiter`] bounds a rate: in this process (GCRA from `governor`),
//! or across the fleet through `redis_store` (feature `redis`). An annotated function or a
//! `.policy` operation that names one asks it once per call, after the deadline and the
//! shedding decision and before the breaker.
//!
//! The numbers of the compiled policy (deadlines, attempts, thresholds, cooldowns, bulkhead
//! sizes) may be overridden per environment and reloaded live, each combination checked by the
//! `.policy` validator first: the module `overrides` (feature `overrides`).
//!
//! Each mechanism is also a tower layer ([`layer`], feature `tower`; the request's deadline,
//! its axum extractor and outgoing propagation with `http`): one folder per mechanism under
//! `layer/`, in tower's shape (`layer.rs`, `service.rs`, `future.rs`), holding the same registry
//! handles the attributes use.
//!
//! This crate is the mechanisms alone. What the build and the edge deliver (the locality probe,
//! the layer that fills in missing image dimensions, the URL helpers the asset audit shares)
//! is `velocity-policy-delivery`'s, which the facade's feature `delivery` brings in.
//!
//! None substitutes for another. A breaker without a bulkhead still lets a merely *slow*
//! dependency exhaust the instance (it never fails, so the breaker never opens); a bulkhead
//! without a breaker keeps calling something that is already down, just fewer at a time; a
//! retry without a deadline turns a dependency's bad minute into an outage. There is no
//! `resilient_call()` that merges them: the attribute macros expand to the short sequence of
//! calls below, and hand-written code composes them the same way.
//!
//! Errors say whether the work ran: a [`ResilienceError`] means it never did, a
//! [`DeadlineExceeded`] means we stopped waiting, and the function's own error means it ran
//! and failed ([`CallError`] holds one of the three).
//!
//! # Composing the mechanisms by hand
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::{
//!     Breaker, Bulkhead, CallError, Deadline, Idempotent, RetryPolicy, Shedder, WorkClass,
//!     retry_within,
//! };
//! use velocity_policy_runtime::retry::Transient;
//!
//! #[derive(Debug)]
//! struct SearchError;
//! impl Transient for SearchError {
//!     fn is_transient(&self) -> bool { true }
//! }
//!
//! async fn push_to_index(id: u64) -> Result<(), SearchError> {
//!     # let _ = id;
//!     Ok(())
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let breaker = Breaker::builder("search")
//!     .open_after_failures(5, Duration::from_secs(30))
//!     .cooldown(Duration::from_secs(20))
//!     .build();
//! let bulkhead = Bulkhead::builder("search").max_concurrent(4).max_queued(2).build();
//! let retry = RetryPolicy::builder("transient")
//!     .attempts(3)
//!     .backoff(Duration::from_millis(50), Duration::from_secs(1))
//!     .attempt_timeout(Duration::from_millis(500))
//!     .build();
//! let shedder = Shedder::new("search");
//!
//! // The request's budget, in scope for everything below.
//! let request = Deadline::after(Duration::from_secs(2));
//! let result: Result<(), CallError<SearchError>> = request
//!     .scope(async {
//!         // The operation takes a child of the current deadline and refuses to start below its
//!         // minimum useful budget.
//!         let deadline = Deadline::child_of_current(Duration::from_secs(1));
//!         deadline.require(Duration::from_millis(100), "push_to_index")?;
//!         // Is this work worth doing under the current pressure?
//!         shedder.admit(WorkClass::Deferred, bulkhead.load(), &deadline, Duration::from_millis(20))?;
//!         // Every attempt draws from the same deadline.
//!         retry_within(&deadline, &retry, Idempotent::claim(|attempt| {
//!             let (breaker, bulkhead) = (&breaker, &bulkhead);
//!             async move {
//!                 breaker.check()?;
//!                 let _slot = bulkhead.acquire(&attempt.deadline).await?;
//!                 match attempt.deadline.run(push_to_index(7)).await {
//!                     Ok(Ok(())) => { breaker.record_success(); Ok(()) }
//!                     Ok(Err(e)) => { breaker.record_failure(); Err(CallError::Failed(e)) }
//!                     Err(expired) => { breaker.record_failure(); Err(expired.into()) }
//!                 }
//!             }
//!         }))
//!         .await
//!     })
//!     .await;
//! assert!(result.is_ok());
//! # }
//! ```
//!
//! # Observability
//!
//! Every refusal, shed decision, retry, breaker transition and task outcome is a tracing event
//! (target `policy`) with these stable fields:
//!
//! | field       | holds                                                                         |
//! |-------------|-------------------------------------------------------------------------------|
//! | `operation` | the annotated function's operation, when the event happens inside its call    |
//! | `mechanism` | `breaker`, `bulkhead`, `shedder`, `retry`, `deadline`, `rate_limiter`, `deferred`, `background`, `queue`, `platform` |
//! | `name`      | the mechanism's name                                                          |
//! | `kind`      | what happened (`breaker_opened`, `breaker_open`, `shed`, `retry`, `task_failed`...) |
//! | `reason`    | a short code: `failures`, `retry_after`, `full`, `queue_timeout`, `load`, `budget`, `min_budget`, `deadline`... |
//! | numbers     | their own fields, durations in milliseconds: `count`, `window_ms`, `remaining_ms`, `open_for_ms`, `load`, `threshold`, `attempt`, `delay_ms`... |
//!
//! The full table, event by event, is in [`observe`]. Each call of a function under
//! `#[critical]` or `#[resilient]` is one INFO span named after its operation, with the fields
//! `operation` and `class`. With the `metrics` feature every mechanism also records through
//! the `metrics` facade: call durations by outcome, attempts, breaker state and openings,
//! refusals, bulkhead occupancy, shed decisions, retries and the allowance's balance, and tasks;
//! names, types, labels and units are in [`observe`'s Metrics](observe#metrics).
//! [`Registry::snapshot`] returns every named mechanism's state, serializable for dashboards;
//! with the `dashboard` feature, [`dashboard::router()`](crate::dashboard::router) serves it
//! (`/policy`) and a page that renders it (`/dashboard`), mounted in your axum service in one
//! line.
//!
//! # Time
//!
//! All mechanisms read tokio's clock, so tests drive them with `tokio::time::pause` and
//! `advance` instead of sleeping.
//!
//! # Memory: every map and cache, and its bound
//!
//! Nothing the runtime keeps grows with the number of calls or requests; what it holds is
//! bounded by the program (the names it uses), by configuration, or by the work in flight. The
//! library soak (`cargo run --release --example soak --features stale`, see BENCHMARKS.md) pushes
//! two million calls through each mechanism and shows the process's memory flat.
//!
//! | what | where | bound |
//! |---|---|---|
//! | fault-injection drills (feature `chaos`) | `chaos` | one entry per drill name in the [`Registry`], each a fixed set of atomics (four faults, a window, a share); an error function per drill |
//! | a hedge's latencies (a percentile delay) | [`hedge`] | fixed: 240 buckets of one `AtomicU32`, halved every 2 × [`hedge::HISTORY`] calls |
//! | named breakers, bulkheads, retry policies, hedges, shedders, rate limiters, fallback records, isolated pools, poll monitors | [`Registry`] (one map each) | one entry per distinct name, never removed: the names the program's attributes and `.policy` files use. Building a mechanism from a name made of request data would grow it; don't |
//! | background pools, for the snapshot | [`background`](mod@background) | one weak reference per live pool; dropped pools are pruned whenever a pool is built |
//! | a breaker's failure window | [`breaker`] | fixed: 11 buckets of two counters, whatever the traffic, and for a count breaker the times of its last `count` failures (one `AtomicU64` each, up to 1024); plus the cause of its last opening |
//! | a retry allowance's windows | [`RetryAllowance`] | fixed: one window of retries and 8 stripes of calls, each a tally its holding thread writes and a window the threads past the 8 share |
//! | a rate limiter | [`limiter`] | fixed: one `AtomicU64` (governor's theoretical arrival time) and two counters per named limiter |
//! | a bulkhead's queue | [`bulkhead`] | `max_queued` waiters; past it a call is refused at once |
//! | a background pool | [`BackgroundPool`] | `max_concurrent + max_queued` tasks admitted; the rest are shed at submission |
//! | an isolated pool | [`isolate::IsolatedPool`] | its `max_concurrent` slots and `max_queued` places (a bulkhead) |
//! | stale-if-error | [`fallback::StaleCache`] (feature `stale`) | `capacity` argument sets per operation, least recently used evicted first, each kept at most its window plus a minute; the attribute's `stale_if_error` builds one cache per function with a capacity of 10,000 |
//! | a request's after-response queue | [`AfterResponse`] | the tasks that one request deferred, at most [`Limits::max_per_request`](defer::Limits::max_per_request) (128 by default; past it a task is refused), released when its response is finished (or dropped) |
//! | deferred tasks in flight | [`defer::ContainerPlatform`]'s task tracker | one entry per task handed over and not ended: at most [`max_concurrent`](defer::Limits::max_concurrent) running and [`max_queued`](defer::Limits::max_queued) waiting (512 and 4,096 by default); past them a task is refused, counted and logged |
//! | task spans | [`defer`](mod@defer), [`background`](mod@background) | one tracing span per task in flight, closed when it ends |
//! | durable queues (feature `redis`) | [`queue`] | in Redis: at most `max_len` unfinished tasks per queue (an enqueue past it is refused) and about 10,000 dead letters; in the process: one weak reference per live queue for the snapshot, one installed queue per name, and at most `concurrency` tasks running per worker (an attributed call's enqueue runs as one short task until Redis answered or the store's timeout passed) |
//! | the Redis store's breakers and openings | `redis_store` (feature `redis`) | one entry per attached breaker name; the openings it has heard of are bounded there (see its docs) |
//! | metrics (feature `metrics`) | the recorder you install | label values are mechanism names, kinds and reason codes, never arguments |
//!
//! # Feature flags
//!
#![doc = include_str!("features.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

#[doc(hidden)]
#[path = "macro_support.rs"]
pub mod __macro_support;
pub mod background;
pub mod breaker;
pub mod bulkhead;
mod calls;
#[cfg(feature = "chaos")]
pub mod chaos;
#[cfg(feature = "http")]
pub mod client;
pub mod criticality;
#[cfg(feature = "dashboard")]
pub mod dashboard;
pub mod deadline;
pub mod defer;
pub mod error;
pub mod fallback;
#[cfg(feature = "tonic")]
pub mod grpc;
pub mod hedge;
#[cfg(feature = "dashboard")]
pub mod history;
mod instruments;
pub mod isolate;
#[cfg(feature = "serde")]
mod json;
#[cfg(feature = "tower")]
pub mod layer;
pub mod limiter;
pub mod observe;
#[cfg(feature = "metrics")]
pub mod otel;
#[cfg(feature = "overrides")]
pub mod overrides;
pub mod queue;
#[cfg(feature = "redis")]
pub mod redis_store;
pub mod registry;
pub mod retry;
pub mod shedding;
mod traced;
pub(crate) mod tuning;
mod window;

pub use background::{BackgroundPool, background};
pub use breaker::{Breaker, BreakerConfig, BreakerStore, OpenAfter, Sharing};
pub use bulkhead::{Acquire, Bulkhead, BulkheadPermit, OwnedBulkheadPermit};
pub use deadline::Deadline;
#[cfg(feature = "http")]
pub use defer::http::AfterResponseLayer;
pub use defer::{AfterResponse, DeferredOutcome, defer};
pub use error::{
    CallError, DeadlineExceeded, OpenCause, RefusalKind, RefusalReason, ResilienceError, ShedReason,
};
pub use registry::{Registry, Snapshot};
pub use retry::{
    Idempotent, RetryAllowance, RetryPolicy, Transient, retry_within, retry_within_by,
};
pub use shedding::Shedder;
pub use velocity_policy_model::WorkClass;

/// The crate docs' "Feature flags" table is checked in (`src/features.md`) rather than rendered
/// by `document-features` in every build, whose proc macro would be one more crate in a
/// user's first build; this keeps it what `document_features!()` renders from the `## `
/// comments in `Cargo.toml`. `POLICY_BLESS=1 cargo test -p velocity-policy-runtime --lib features_table`
/// rewrites it.
#[cfg(test)]
#[test]
fn the_features_table_is_what_cargo_toml_says() {
    let rendered = document_features::document_features!();
    if std::env::var_os("POLICY_BLESS").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/features.md");
        assert!(
            std::fs::write(path, rendered).is_ok(),
            "cannot write {path}"
        );
    }
    assert_eq!(
        include_str!("features.md"),
        rendered,
        "src/features.md is not the table Cargo.toml's `## ` comments give: rerun with POLICY_BLESS=1"
    );
}
