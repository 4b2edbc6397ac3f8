//! The process's edges: stopping in the right order on SIGTERM, and what one client may hold while serving.
//!
//! # Stopping and serving: the process's edges
//!
//! ## Stopping: the signal, then the drain, then the dependencies
//!
//! Containers, Kubernetes and systemd stop a process with SIGTERM, and SIGKILL it after a grace
//! period (30 s by default in Kubernetes, 90 s in systemd); Ctrl-C is SIGINT. A process that
//! listens only for Ctrl-C dies on SIGTERM at once: no drain, no report, the deferred work in
//! flight lost. With the `http` feature, `velocity_policy::defer::ShutdownSignals` listens for both from
//! the moment it is installed, and the shutdown is three steps in this order:
//!
//! ```rust,no_run
//! # #[cfg(feature = "http")]
//! # async fn run() -> std::io::Result<()> {
//! use std::time::Duration;
//! use velocity_policy::defer::{self, ShutdownSignals};
//! # async fn serve_until(_stop: impl std::future::Future<Output = ()>) {}
//!
//! // At startup, before the first request: from now on SIGINT and SIGTERM are ours to handle.
//! let mut signals = ShutdownSignals::install()?;
//!
//! // 1. Serve until one arrives; the server then stops accepting and finishes its open requests
//! //    (with axum: `axum::serve(listener, app).with_graceful_shutdown(async move { .. })`).
//! serve_until(async move {
//!     let signal = signals.recv().await; // logged: kind = "shutdown_signal"
//!     eprintln!("{signal}: stopping");
//! })
//! .await;
//!
//! // 2. Every response is finished, so the work they deferred is in flight: drain it, within a
//! //    deadline well inside the platform's grace period.
//! let report = defer::shutdown(Duration::from_secs(20)).await;
//! eprintln!("drain: {} finished, {} abandoned", report.finished, report.abandoned);
//! eprintln!("since start: {}", report.deferred); // every task, by how it ended
//!
//! // 3. Only now close what that work uses: connection pools, clients, the database.
//! # Ok(())
//! # }
//! ```
//!
//! Stopping the dependencies first (step 3 before step 2) is the mistake that looks fine in a
//! test: the drain then waits for work whose calls find nobody listening. `cargo run -p policy-demo
//! -- serve` does exactly the three steps and prints the drain's report; its test sends it SIGTERM
//! while a save's indexing is still between attempts, and checks that the second attempt still
//! reached the search provider, that nothing was abandoned, and that it exits 0.
//!
//! ## Serving: what one client may hold
//!
//! `axum::serve` waits for a client as long as it likes: 2,000 connections that each sent half
//! their headers were all still held after 70 s. The demo serves through hyper's HTTP/1
//! connections and hyper-util's graceful shutdown instead (`examples/demo/src/server.rs`), with the
//! bounds a service on a network needs. What to choose in production:
//!
//! | setting | what it stops | the demo | in production |
//! |---|---|---|---|
//! | header read timeout (hyper `http1::Builder::header_read_timeout`, with a `timer`) | a client sending its headers slowly (slowloris); hyper starts it when the connection waits for a request, so it is also the keep-alive idle timeout | 10 s | exposed directly: 5 to 10 s. Behind a load balancer that reuses connections: above the balancer's idle timeout (60 s on many), and let the balancer bound slow clients |
//! | body read deadline (tower-http `RequestBodyDeadlineLayer`) | a client trickling its body, however it paces the bytes (a per-frame `RequestBodyTimeoutLayer` does not) | 10 s, then 408 and the connection closed | the largest body you accept over the slowest link you serve: 10 to 60 s |
//! | connection limit (a semaphore taken on accept) | a flood of connections holding memory and file descriptors; past it a connection is closed at once, counted, one warning per episode | 1,024 | below the file-descriptor limit (`ulimit -n`) minus what pools and files use; the fleet's limit is this times the instances |
//! | body size (axum `DefaultBodyLimit`) | one request's memory | axum's 2 MB | the largest document you accept |
//! | drain deadline (`defer::shutdown`) | how long deferred work may delay the exit | 10 s | the grace period minus the server's own stop time, with a margin |
//!
//! Measured against `serve` with these defaults (a debug build on loopback, 2,000 connections each
//! sending half its headers, opened over 9.5 s): the 976 past the limit were closed within 1.5 s,
//! the 1,024 inside it 10 s after each opened, and none was open after 60 s. The demo's tests
//! (`examples/demo/tests/serving_limits.rs`) set the limits to 400 ms and 3 connections and check
//! each: half the headers and the connection is closed after the timeout
//! with no answer; half a body and the answer is 408; connections past the limit are closed at
//! once while the ones inside it stay open, and the next one is served once a slot frees.
