//! Fault injection (drills): faults declared in the policy, injected inside the attempt, through the real mechanisms.
//!
//! # Fault injection (drills)
//!
//! Polly has Simmy, Envoy its fault filter; here a drill is declared in the policy and goes
//! through the same mechanisms as a real fault, so a test or a game day shows what the policy
//! does, not what a fake dependency was written to do. With the `chaos` feature (off by default,
//! and `policy gate policies/project.policy` proves the default build has none of it):
//!
//! ```rust,ignore
//! // policies/search.policy:
//! //   chaos search_drill {
//! //       latency = uniform(200ms, 800ms) at 10%   // or `300ms at 10%`, `lognormal(p50 = 100ms, p99 = 2s) at 10%`
//! //       error at 5%                              // the function's own error, built by `chaos_error_for`
//! //       refuse at 1%                             // a refusal (the work never ran), marked injected
//! //       status 429 retry_after 5s at 2%          // the breaker is tripped for 5 s, as by a real 429
//! //       during = 10m to 40m                      // after its first use, on tokio's clock
//! //       instances = 30%                          // decided once per instance id: the same 30%
//! //   }
//! //   operation search: critical, idempotent { breaker = search; deadline = 1s; chaos = search_drill }
//!
//! #[velocity_policy::critical(breaker = "search", chaos = "search_drill", deadline = "1s")]
//! async fn search(query: String) -> Result<Hits, AppError> { /* ... */ }
//! ```
//!
//! The injection point is **inside the attempt**: after the breaker's check and the bulkhead's
//! admission, under the attempt's deadline, before (or in place of) the real call. So the breaker
//! counts injected failures, the deadline bounds injected latency, each retry draws again and sees
//! an injected error, and a hedge races injected latency. A rate is exact and spread, not random:
//! at 10% the 1st, 11th, 21st... call is hit, so a test can count. An operation that names no drill
//! expands to exactly what it did before; without the feature, naming one is a compile error that
//! says how to turn it on.
//!
//! A drill is its own mechanism in the registry, switched at run time without a rebuild:
//! `Registry::global().chaos("search_drill")` is the handle every attribute, `.policy` operation
//! and layer that names it shares (`enable`, `disable`, `set_rate`, `set`); when it is off the
//! call path pays one relaxed atomic load. `enabled = false` in the stanza declares it off until
//! someone switches it on. Nothing injects until the service arms drills at run time with
//! `velocity_policy::chaos::arm()` (off by default, even with the feature); an injected opening is never
//! shared with the fleet.
//!
//! ```rust
//! # #[cfg(feature = "chaos")]
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use std::time::Duration;
//! use velocity_policy::chaos::{Fault, FaultKind, Latency};
//! use velocity_policy::{Breaker, CallError, Deadline, Registry};
//!
//! #[derive(Debug, PartialEq)]
//! enum SearchError { Injected }
//!
//! let drill = Registry::global().chaos("readme_drill");
//! drill.set(Fault::Latency(Latency::Fixed { delay: Duration::from_secs(2) }), 1.0);
//! drill.set(Fault::Error, 1.0);
//! velocity_policy::Registry::global().chaos_error_for("readme_drill", || SearchError::Injected);
//! drill.enable();
//! velocity_policy::chaos::arm(); // off by default: the service arms drills at run time
//!
//! // One attempt, as the expansion writes it: check, draw, run under the deadline, observe.
//! let breaker = Breaker::builder("readme_search")
//!     .open_after_failures(1, Duration::from_secs(30))
//!     .build();
//! breaker.check().unwrap();
//! let injection = drill.draw(Some(&breaker)).unwrap();
//! let ran = Deadline::after(Duration::from_millis(500))
//!     .run(injection.run(async { Ok::<u32, SearchError>(7) }))
//!     .await;
//! // The deadline bounded the injected 2 s; the injection told the breaker the failure was its
//! // doing, with the failure (no mark is left beside the breaker), so the opening says so.
//! assert!(matches!(injection.observe(&breaker, ran), Err(CallError::DeadlineExceeded(_))));
//! let cause = breaker.snapshot().last_cause.unwrap();
//! assert_eq!(cause.injected_by(), Some("readme_drill"));
//!
//! drill.set_rate(FaultKind::Latency, 0.0);
//! let ran = drill.draw(None).unwrap().run(async { Ok::<u32, SearchError>(7) }).await;
//! assert_eq!(ran, Err(SearchError::Injected), "the error, injected in place of the call");
//! drill.disable();
//! assert_eq!(drill.draw(None).unwrap().run(async { Ok::<u32, SearchError>(7) }).await, Ok(7));
//! # }
//! # #[cfg(not(feature = "chaos"))]
//! # fn main() {}
//! ```
//!
//! Nobody should confuse a drill with an incident: every injected fault is a tracing event
//! (`mechanism = "chaos"`, `kind = "injected"`, `injected = true`, `fault` one of `latency`,
//! `error`, `refuse`, `status_429`) and a count of `policy_injected_faults_total{name, fault}`;
//! an injected refusal's reason is `RefusalReason::Injected` (kind `Injected`, or `RateLimited`
//! with its `retry_after()` for a 429), its message says "a chaos drill", and a breaker tripped by
//! an injected 429 names it as its cause. A breaker opened by counted failures whose deciding one
//! (the failure recorded as it opened) was injected has the cause `OpenCause::Injected { drill,
//! opened_by }` (`injected_by()` names the drill; `code()` and `counted()` stay those of what was
//! counted): its `breaker_opened` event has `injected = true` and `drill`, and the snapshot's
//! last cause and the dashboard say "the last one injected by chaos drill `…`". A real failure
//! that opens the breaker after injected ones is an incident, and says nothing of the drill.
//! `Registry::chaos_snapshots()` lists every drill (faults,
//! rates, on or off, in its window, injected counts) and the dashboard has a table of them. In
//! tower, `OperationLayer` (and `operation_layer!`) applies an operation's drill at the same point,
//! and `ChaosLayer` is the drill alone, below a breaker and a bulkhead. The demo's scenario has a
//! `search slow (injected)` phase: the provider is healthy and the drill, switched on through the
//! registry, makes the calls slow; its report lists the phase's faults as injected, and its
//! deferred-work row says how many requests met the drill (the saves whose indexing drew an
//! injected fault, counted from the events each one's own task emitted: a save whose indexing never reached the
//! drill's draw, refused before it, is not counted). An
//! environment's overrides ([`guide::overrides`](crate::guide::overrides)) may turn a drill on or off and change its rates:
//! `policies/staging/drills.policy` with `chaos search_drill { enabled = true; error at 20% }`.
