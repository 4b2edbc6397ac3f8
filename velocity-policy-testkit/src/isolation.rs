//! A registry of its own per test, so tests run in parallel without sharing breaker state.
//!
//! Named mechanisms are process-global: every `#[velocity_policy::resilient(breaker = "search")]`
//! function of a test binary shares one breaker `search`, and the test harness runs the
//! binary's tests in parallel on threads of their own. So one test that opens the breaker would
//! make another, running at the same moment, see it open. [`isolate`] gives the test that calls
//! it a fresh registry until the returned guard drops: every annotated function's mechanisms,
//! [`Registry::global`](velocity_policy_runtime::Registry::global) and what reads it (layers built
//! with `Registry::global()`, `find_breaker`, the snapshot, overrides loaded in the test)
//! resolve to that registry, on the test's thread.
//!
//! ```
//! use velocity_policy_testkit::isolation::isolate;
//! use velocity_policy_runtime::{Registry, breaker::BreakerState};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // #[tokio::test(start_paused = true)] async fn my_test() {
//! let test = isolate();
//! let search = Registry::global().breaker("isolation-doc", |b| b);
//! search.trip(Duration::from_secs(30), "this test only");
//! assert_eq!(test.registry().find_breaker("isolation-doc").unwrap().state(), BreakerState::Open);
//! drop(test);
//! // Other tests (and the process) never saw it.
//! assert!(Registry::global().find_breaker("isolation-doc").is_none());
//! # }
//! ```
//!
//! # What it covers, and its limits
//!
//! The scope is a thread-local of the test's thread (`velocity-policy-runtime`'s feature
//! `test-registry`, which this feature turns on: a normal build of your service has none of it).
//! - `#[tokio::test]` runs a current-thread runtime on the test's thread: with the guard taken
//!   at the top of the test, the test and every task it spawns see its registry.
//! - `#[tokio::test(flavor = "multi_thread")]`: the test body does, but a task spawned on a
//!   worker thread does not; spawn with [`spawn`] (or wrap with
//!   [`TestScope::bind`](velocity_policy_runtime::registry::TestScope::bind)), which carries the scope.
//! - [`isolated`] wraps one future instead of a thread (its polls, on whichever thread); what
//!   it spawns needs [`spawn`] too.
//! - What the registry does not hold stays process-wide: deferred work's and background pools'
//!   counts, a stale-if-error cache, an installed metrics recorder.
//! - Each scope's registry is leaked (mechanisms are borrowed for `'static`, like the
//!   attribute's own `static`s): a few kilobytes per test.
//!
//! Tests that run one after another can share the process's registry and call
//! [`reset`] between them instead: it closes every breaker and forgets what it counted.

use std::future::Future;

use velocity_policy_runtime::Registry;
pub use velocity_policy_runtime::registry::{Bound, ScopeGuard, TestScope};

/// A test's own registry, entered on this thread until dropped; see [`isolate`].
#[derive(Debug)]
#[must_use = "the test's registry is left when this guard drops: keep it in a `let _test`"]
pub struct Isolation {
    scope: TestScope,
    _entered: ScopeGuard,
}

impl Isolation {
    /// The test's registry (what `Registry::global()` returns on this thread while the guard
    /// lives).
    pub fn registry(&self) -> &'static Registry {
        self.scope.registry()
    }

    /// The scope, to [`bind`](TestScope::bind) work that another thread polls.
    pub fn scope(&self) -> TestScope {
        self.scope
    }
}

/// A fresh registry for the calling test, entered on this thread until the guard drops. Take
/// it first thing in the test: `let _test = velocity_policy_testkit::isolation::isolate();`.
pub fn isolate() -> Isolation {
    let scope = TestScope::new();
    Isolation {
        _entered: scope.enter(),
        scope,
    }
}

/// `test`, run with a fresh registry of its own around each of its polls (on any runtime).
/// Tasks it spawns need [`spawn`] to see it.
///
/// ```
/// use velocity_policy_runtime::Registry;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let seen = velocity_policy_testkit::isolation::isolated(async {
///     Registry::global().breaker("isolated-future-doc", |b| b);
///     Registry::global().snapshot().breakers.len()
/// })
/// .await;
/// assert_eq!(seen, 1);
/// assert!(Registry::global().find_breaker("isolated-future-doc").is_none());
/// # }
/// ```
pub fn isolated<F: Future>(test: F) -> Bound<F> {
    TestScope::new().bind(test)
}

/// `tokio::spawn`, carrying the registry of the test that spawns (if it is
/// [isolated](isolate)) to whichever worker thread runs the task.
pub fn spawn<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match TestScope::current() {
        Some(scope) => tokio::spawn(scope.bind(future)),
        None => tokio::spawn(future),
    }
}

/// Closes every breaker of the registry in use (the test's, or the process's) and forgets what
/// each counted: for tests that run one after another and share the process's registry.
pub fn reset() {
    Registry::global().reset_state();
}
