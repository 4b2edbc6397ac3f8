//! Work the user does not wait for: deferred after the response, bounded, drained and accounted for at shutdown.
//!
//! # Work the user does not wait for
//!
//! Saving a document must not make the user wait for indexing, analytics or notifications.
//! `velocity_policy::defer(name, work)` (what `#[deferred]` calls) hands such work over with its failure
//! handling attached first: an `Err` is logged with the task's name, a panic is caught and logged,
//! nothing reaches the response. Behind the `http` feature, `AfterResponseLayer` holds a request's
//! deferred work until the response body's last byte was handed to the connection, not when the
//! handler returned; a body still streaming keeps it waiting (two lifetimes: work that keeps a
//! streaming response alive is the response's; work after the response is the platform's). The
//! platform is one trait: a task tracker that drains on shutdown in a container (the default), an
//! immediate one for tests, or a serverless runtime's own `waitUntil`. Deferred and background
//! work is at-least-once: make it idempotent. The drain's report says what the drain waited for
//! (`finished`, `abandoned`) and, in `deferred` and `background`, every task since the process
//! started by how it ended (finished, failed, panicked, refused, shed, abandoned, still in flight);
//! `velocity_policy::defer::totals(class)` reads the same totals at any time. Deferred work is bounded
//! like the background pool: at most 128 tasks per request, 512 running and 4,096 waiting in the
//! process by default (`velocity_policy::defer::set_limits`); a task past a bound is refused, counted and
//! logged, never silently queued.
//!
//! ```rust
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use velocity_policy::defer::{self, AfterResponse, ContainerPlatform, RequestId};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let platform = ContainerPlatform::new(); // a long-lived process: drained at shutdown
//! let events = Arc::new(Mutex::new(Vec::new()));
//!
//! // What `AfterResponseLayer` (feature `http`) does for every request:
//! let request = AfterResponse::with_platform(RequestId::new("req-1"), platform.clone());
//! let response = request
//!     .scope(async {
//!         // ...the canonical write is critical: awaited before the response...
//!         // Indexing is not: deferred, its failure handling attached here, before the hand-over.
//!         let events = events.clone();
//!         defer::defer("index_document", async move {
//!             tokio::time::sleep(Duration::from_millis(200)).await;
//!             events.lock().unwrap().push("indexed");
//!             Err::<(), _>("search index unavailable") // logged with its name, never rethrown
//!         });
//!         "saved"
//!     })
//!     .await;
//! events.lock().unwrap().push(response);
//! request.release(); // the response body's last byte was handed to the connection
//!
//! let report = platform.shutdown(Duration::from_secs(5)).await;
//! assert_eq!(*events.lock().unwrap(), ["saved", "indexed"]);
//! // What the drain waited for...
//! assert_eq!((report.finished, report.abandoned), (1, 0));
//! // ...and every task since the process started, by how it ended.
//! assert_eq!((report.deferred.scheduled, report.deferred.failed), (1, 1));
//! assert!(report.accounted_for()); // scheduled = finished + shed + abandoned + in flight
//! # }
//! ```
