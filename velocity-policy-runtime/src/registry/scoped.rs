//! A registry of its own per test (feature `test-registry`; never in a normal build).
//!
//! Named mechanisms are process-global: each annotated function keeps its breaker, bulkhead,
//! retry policy... in a `static` registered once in [`Registry::global`], so two tests of one
//! binary, run in parallel by the test harness, would share one breaker's state. A
//! [`TestScope`] is a fresh [`Registry`] that, while it is *entered* on a thread, stands in for
//! the global one on that thread: [`Registry::global`] returns it, and every annotated
//! function's handle resolves to a mechanism of the scope (built from the same settings, on
//! first use in the scope) instead of its `static`'s.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::Registry;
//! use velocity_policy_runtime::registry::TestScope;
//!
//! let scope = TestScope::new();
//! {
//!     let _entered = scope.enter();
//!     let breaker = Registry::global().breaker("isolated-doc", |b| b);
//!     breaker.trip(Duration::from_secs(60), "only in this scope");
//! }
//! // Outside the scope, the process's registry never saw that breaker.
//! assert!(Registry::global().find_breaker("isolated-doc").is_none());
//! assert!(scope.registry().find_breaker("isolated-doc").is_some());
//! ```
//!
//! `velocity-policy-testkit`'s `isolation` module is the front end tests use (`isolated(async { .. })`,
//! a guard per `#[tokio::test]`); this is what it stands on.
//!
//! # Which code sees the scope
//!
//! The scope is a thread-local, set while a guard from [`TestScope::enter`] lives (restored
//! to what it was when the guard drops) or around each poll of a future wrapped by
//! [`TestScope::bind`]. So:
//! - a `#[tokio::test]` (a current-thread runtime: the test body and every task it spawns run
//!   on the test's thread) that enters a scope at its start sees it everywhere, spawned tasks
//!   included;
//! - on a multi-thread runtime, only the test body (which `block_on` polls on the test's
//!   thread) and futures wrapped with [`bind`](TestScope::bind) see it; a task spawned bare
//!   runs on a worker thread and sees the process's registry. Wrap what you spawn:
//!   `tokio::spawn(scope.bind(work))`;
//! - what the registry does not hold stays process-wide: deferred work's and background pools'
//!   counts (the snapshot's `deferred`, `background`, `queues`), a stale-if-error cache (one
//!   `static` per function), and a metrics recorder.
//!
//! # Lifetimes
//!
//! An annotated function borrows its mechanisms for `'static` (from its `static`s). A scope's
//! mechanisms are borrowed the same way, so a scope, its registry and each handle it resolved
//! are leaked, never freed: a few kilobytes per test, in test binaries only. Mechanism handles
//! are cheap clones of one state (`Breaker`, `Bulkhead`, `Arc<RetryPolicy>`...), so the
//! leaked copy and the registry's entry are the same mechanism.

use std::any::{Any, TypeId};
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use super::Registry;

/// The handles one scope resolved: by the address and type of the `static` that asked.
type Resolved = HashMap<(usize, TypeId), &'static (dyn Any + Send + Sync)>;

struct Inner {
    registry: Registry,
    handles: Mutex<Resolved>,
}

thread_local! {
    static CURRENT: Cell<Option<&'static Inner>> = const { Cell::new(None) };
}

/// A registry of its own for one test: see the [module docs](self). `Copy`: each copy is the
/// same scope.
#[derive(Clone, Copy)]
pub struct TestScope {
    inner: &'static Inner,
}

impl fmt::Debug for TestScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestScope")
            .field("registry", &self.inner.registry)
            .finish()
    }
}

impl Default for TestScope {
    fn default() -> Self {
        Self::new()
    }
}

impl TestScope {
    /// A new scope with an empty registry (in-process breaker store). Leaked: see
    /// [Lifetimes](self#lifetimes).
    pub fn new() -> Self {
        let inner = Box::leak(Box::new(Inner {
            registry: Registry::new(),
            handles: Mutex::default(),
        }));
        Self { inner }
    }

    /// The scope's registry: what [`Registry::global`] returns while the scope is entered.
    pub fn registry(&self) -> &'static Registry {
        &self.inner.registry
    }

    /// The scope entered on this thread, if any.
    pub fn current() -> Option<Self> {
        current().map(|inner| Self { inner })
    }

    /// Enters the scope on this thread until the guard drops (which restores the scope that was
    /// entered before, if any). The guard is not `Send`: a future holding it cannot move to
    /// another thread.
    #[must_use = "the scope is left when the guard drops"]
    pub fn enter(&self) -> ScopeGuard {
        let previous = CURRENT.with(|current| current.replace(Some(self.inner)));
        ScopeGuard {
            previous,
            _not_send: PhantomData,
        }
    }

    /// `future`, with the scope entered around each of its polls, on whichever thread polls it:
    /// for work spawned on a multi-thread runtime.
    pub fn bind<F: Future>(&self, future: F) -> Bound<F> {
        Bound {
            scope: *self,
            future: Box::pin(future),
        }
    }

    /// The mechanism of the `static` at `key`, built by `make` on its first use in the scope.
    pub(crate) fn resolve<H: Send + Sync + 'static>(
        &self,
        key: usize,
        make: impl FnOnce() -> H,
    ) -> &'static H {
        let key = (key, TypeId::of::<H>());
        let found = lock(&self.inner.handles).get(&key).copied();
        let any = match found {
            Some(any) => any,
            None => {
                // Built outside the lock: building declares and registers, which may log.
                let made: &'static (dyn Any + Send + Sync) = Box::leak(Box::new(make()));
                *lock(&self.inner.handles).entry(key).or_insert(made)
            }
        };
        match any.downcast_ref::<H>() {
            Some(handle) => handle,
            // Keyed by its type too: never another type under one key.
            None => unreachable!("a scope's handle has the type it was stored with"),
        }
    }
}

fn lock(handles: &Mutex<Resolved>) -> std::sync::MutexGuard<'_, Resolved> {
    handles.lock().unwrap_or_else(|p| p.into_inner())
}

/// The scope entered on this thread: one thread-local read.
#[inline]
fn current() -> Option<&'static Inner> {
    CURRENT.try_with(Cell::get).ok().flatten()
}

/// The scope entered on this thread, as a [`TestScope`].
#[inline]
pub(crate) fn current_scope() -> Option<TestScope> {
    current().map(|inner| TestScope { inner })
}

/// While it lives, its [`TestScope`] is entered on this thread; see [`TestScope::enter`].
pub struct ScopeGuard {
    previous: Option<&'static Inner>,
    _not_send: PhantomData<*const ()>,
}

impl fmt::Debug for ScopeGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ScopeGuard")
    }
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        let previous = self.previous;
        let _ = CURRENT.try_with(|current| current.set(previous));
    }
}

/// A future polled inside its [`TestScope`]; see [`TestScope::bind`].
pub struct Bound<F> {
    scope: TestScope,
    future: Pin<Box<F>>,
}

impl<F> fmt::Debug for Bound<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bound").field("scope", &self.scope).finish()
    }
}

impl<F: Future> Future for Bound<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _entered = self.scope.enter();
        self.future.as_mut().poll(cx)
    }
}

impl Registry {
    /// Closes every breaker and forgets what each counted ([`Breaker::reset`](crate::Breaker::reset)),
    /// for tests that run one after another and share the process's registry (feature
    /// `test-registry`). Bulkheads are left alone: their permits belong to calls in flight.
    /// Tests that run in parallel need a [`TestScope`] each instead.
    pub fn reset_state(&self) {
        for breaker in super::read(&self.breakers).values() {
            breaker.reset();
        }
    }
}
