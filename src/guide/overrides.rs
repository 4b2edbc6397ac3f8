//! Policies per environment, reloaded live: numbers changed at run time, checked by the compile-time validator.
//!
//! # Policies per environment, reloaded live
//!
//! Feature `overrides`: the crate's `policies/*.policy` stay the baseline, checked at compile time,
//! and an environment's files change their numbers at run time. `POLICY_ENV=production` reads
//! `policies/production/*.policy`; each stanza names what it tunes and sets numbers only (an
//! operation's `deadline`, `min_budget`, `shed_at`; a breaker's `open_after`, `cooldown`,
//! `max_retry_after`; a retry's `attempts`, `backoff`, `attempt_timeout`; a bulkhead's
//! `max_concurrent`; the `shedding` loads; a chaos drill's `enabled` and its faults' rates, with
//! the `chaos` feature). Classes, idempotency, which mechanisms an operation uses and its fallback
//! stay compiled.
//!
//! ```text
//! // policies/search.policy: compiled in
//! retry transient {
//!     attempts = 2
//!     backoff = full_jitter(base = 50ms, cap = 1s)
//!     attempt_timeout = 500ms
//! }
//! operation search: critical, idempotent { retry = transient; deadline = 2s; min_budget = 100ms }
//!
//! // policies/production/search.policy: read at startup and at each reload
//! operation search { deadline = 800ms }
//! ```
//!
//! ```rust,no_run
//! # #[cfg(all(feature = "overrides", feature = "http"))]
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! // Before the first call: POLICY_ENV's overrides, checked with the compiled policy.
//! let overrides = Arc::new(velocity_policy::overrides::load("policies")?);
//! // An operator edits the file, then `kill -HUP <pid>`: the next call of `search` uses it.
//! let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
//! tokio::spawn(async move {
//!     while hangups.recv().await.is_some() {
//!         let _ = overrides.reload(); // a refused set is logged and shown; the previous one stays
//!     }
//! });
//! # Ok(())
//! # }
//! # #[cfg(not(all(feature = "overrides", feature = "http")))]
//! # fn main() {}
//! ```
//!
//! Each combination of the compiled policy and the overrides goes through the validator
//! `policy check` uses. An unsafe one (an attempt timeout above its deadline, a minimum budget above
//! the deadline, `shed_at` on critical work, zero attempts, a name the compiled policy does not
//! declare) is refused with the same diagnostic, at the override's file, line and column. At
//! startup the service then runs on the compiled values and logs an error event, or does not start
//! at all with `Overrides::builder("policies").strict(true)`. At a reload the previous set stays.
//! Run the same check in CI before the file ships:
//!
//! ```text
//! $ policy check --against policies policies/production
//! policy::attempt-timeout-exceeds-deadline
//!
//!   × `attempt_timeout` of retry `transient` (500ms) is longer than the deadline
//!   │ of operation `search` (300ms)
//!    ╭─[policies/production/search.policy:1:31]
//!  1 │ operation search { deadline = 300ms }
//!    ·                               ──┬──
//!    ·                                 ╰── the deadline
//!    ╰────
//!   help: an attempt can never run to its timeout: lower `attempt_timeout` to
//!         300ms or less, or raise the deadline
//! ```
//!
//! A call reads its numbers once, when it starts, so calls in flight finish on the settings they
//! started with. The hot path reads them with no lock and no allocation. A breaker keeps its state
//! across a reload of its thresholds. A bulkhead made smaller refuses new callers until the calls in
//! flight drain below the new size, and never takes a permit back. The dashboard's Deadlines and
//! Overrides tables, and `/policy`'s `operations` and `overrides`, show each value in force next to
//! its compiled value, with the file, line and column it came from and when it was applied.
//! `Overrides::watch` reloads when the files change.
//! `tests/overrides.rs` runs this example end to end; `velocity_policy::overrides` has the details.
//!
//! With `redis` too, one set published once reaches every instance: see
//! [`guide::fleet`](crate::guide::fleet#one-set-for-the-whole-fleet).
