//! Named mechanisms, built once and shared, and one snapshot of them all.
//!
//! The attribute macros build each named breaker, bulkhead, retry policy and shedder once,
//! lazily, through the [global](Registry::global) registry; hand-written code can use it too,
//! or keep its own [`Registry`]. The registry is not on the hot path: generated code looks a
//! mechanism up once and keeps the handle.
//!
//! The [snapshot](Registry::snapshot) is what a dashboard serves: every named mechanism's
//! state, serializable with serde.
//!
//! # Bounded by the program's names
//!
//! Each map holds one entry per distinct name and never removes one: its size is the number of
//! breakers, bulkheads, retry policies, shedders, rate limiters, fallback records, isolated pools
//! and poll monitors the program names (in its attributes, its `.policy` files, or by hand), not
//! the number of calls. Lookups ([`find_breaker`](Registry::find_breaker),
//! [`find_bulkhead`](Registry::find_bulkhead)) never insert. Do not build a mechanism from a
//! name made of request data (a user id, a URL): that is the one way to grow a registry without
//! bound.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::Registry;
//!
//! let registry = Registry::new();
//! let search = registry.breaker("search", |b| b.open_after_failures(3, Duration::from_secs(10)));
//! let again = registry.breaker("search", |b| b); // the same breaker: the closure is not run
//! search.trip(Duration::from_secs(1), "maintenance");
//! assert!(again.check().is_err());
//! assert_eq!(registry.snapshot().breakers[0].openings, 1);
//! ```
//!
//! # One name, one configuration
//!
//! A name is one mechanism with one state: every function, layer and `.policy` operation that
//! names the breaker `search` shares it. So two *different* configurations of one name are a
//! mistake (two crates that each declare a `breaker search` of their own), and the registry
//! refuses the second loudly rather than letting whichever ran first win in silence. The
//! attribute macros [declare](Registry::declare) each mechanism's settings, with the function
//! that declared them, before using it: the first declaration configures the mechanism; a
//! later one with the same settings is the same mechanism; a later one with other settings
//! is a [`Conflict`], refused (its settings are not applied), logged as an error
//! (`kind = "conflict"`) and listed in the [snapshot](Snapshot::conflicts), naming both
//! declarations and the fix: give one of them another name, or the same settings.
//!
//! ```
//! use velocity_policy_runtime::Registry;
//!
//! let registry = Registry::new();
//! registry.declare("breaker", "search", "shop::search", "5 failures within 30s").unwrap();
//! registry.declare("breaker", "search", "shop::suggest", "5 failures within 30s").unwrap();
//! let refused = registry
//!     .declare("breaker", "search", "billing::lookup", "3 failures within 10s")
//!     .unwrap_err();
//! assert_eq!(refused.first.origin.as_ref(), "shop::search");
//! assert_eq!(registry.snapshot().conflicts, [refused]);
//! ```
//!
//! [`Registry::breaker`] and its kin, called by hand, look the name up or build it: their
//! closure runs only for the first, and they declare nothing.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::background::BackgroundSnapshot;
use crate::breaker::{
    Breaker, BreakerBuilder, BreakerSnapshot, BreakerStore, InProcessStore, StoreStatus,
};
use crate::bulkhead::{Bulkhead, BulkheadBuilder, BulkheadSnapshot};
use crate::calls::Calls;
use crate::deadline::{OperationDeadline, OperationSnapshot};
use crate::defer::DeferredSnapshot;
use crate::fallback::{Fallback, FallbackSnapshot};
use crate::hedge::{Hedge, HedgeBuilder, HedgeSnapshot};
use crate::isolate::{
    IsolatedPool, IsolatedPoolBuilder, IsolatedPoolSnapshot, PollMonitor, PollMonitorSnapshot,
};
use crate::limiter::LimiterSnapshot;
pub use crate::limiter::LimiterSource;
use crate::limiter::{RateLimiter, RateLimiterBuilder};
use crate::retry::{RetryPolicy, RetryPolicyBuilder, RetrySnapshot};
use crate::shedding::{Shedder, ShedderSnapshot, Thresholds};
pub use crate::tuning::{FleetOrigin, OverriddenSetting, OverridesSnapshot, RefusedOverrides};

mod calls;
// What a feature keeps in the registry and the methods it adds, one submodule each, with its
// feature: they name the feature's module, which names nothing of the registry.
#[cfg(feature = "chaos")]
mod chaos;
#[cfg(feature = "dashboard")]
mod history;
#[cfg(feature = "redis")]
mod limiter_store;
#[cfg(feature = "overrides")]
mod tunings;
#[cfg(feature = "overrides")]
pub(crate) use tunings::Tunings;
#[cfg(feature = "test-registry")]
pub mod scoped;
#[cfg(feature = "test-registry")]
pub(crate) use scoped::current_scope;
#[cfg(feature = "test-registry")]
pub use scoped::{Bound, ScopeGuard, TestScope};
pub(crate) mod parts;

pub(crate) use calls::entry_caller;
pub use calls::{CallsSnapshot, EdgeSnapshot, MAX_EDGES};

pub(crate) type Map<T> = RwLock<BTreeMap<Arc<str>, T>>;

/// One use of a named mechanism: the declaring function, the mechanism's kind, its name.
type Use = (Arc<str>, &'static str, Arc<str>);

/// Named mechanisms of one process (or one test).
///
/// It is the same whatever the features: what a feature keeps here is one field of a type chosen
/// once (the feature's own, or a zero-sized stand-in), and the methods a feature adds are
/// documented here but live in a submodule of the registry's, one per feature.
pub struct Registry {
    breaker_store: RwLock<Arc<dyn BreakerStore>>,
    pub(crate) breakers: Map<Breaker>,
    pub(crate) bulkheads: Map<Bulkhead>,
    pub(crate) retries: Map<Arc<RetryPolicy>>,
    hedges: Map<Arc<Hedge>>,
    pub(crate) shedders: Map<Arc<Shedder>>,
    limiters: Map<RateLimiter>,
    limiter_sources: Map<Arc<dyn LimiterSource>>,
    /// Where rate limiters decide across the fleet (feature `redis`).
    pub(crate) limiter_store: parts::LimiterStore,
    fallbacks: Map<Arc<Fallback>>,
    isolated: Map<IsolatedPool>,
    polls: Map<Arc<PollMonitor>>,
    pub(crate) operations: Map<Arc<OperationDeadline>>,
    /// Fault injection for drills, by name (feature `chaos`).
    pub(crate) drills: parts::Drills,
    /// The overrides in force (feature `overrides`): applied to each mechanism they name when
    /// it is built, and to those already built when they change.
    pub(crate) tunings: parts::InForce,
    /// What the dashboard shows of the overrides: where each overridden value came from.
    pub(crate) overrides: RwLock<OverridesSnapshot>,
    declarations: RwLock<BTreeMap<(&'static str, Arc<str>), Declaration>>,
    /// Every (origin, kind, name) declared: which function uses which mechanism, once per
    /// handle (the first declaration of a name is in `declarations`, every user here).
    uses: RwLock<std::collections::BTreeSet<Use>>,
    conflicts: RwLock<Vec<Conflict>>,
    /// The calls seen between annotated operations.
    pub(crate) calls: RwLock<calls::CallTable>,
    /// The dashboard's history of each mechanism and operation (feature `dashboard`).
    pub(crate) history: parts::History,
}

/// Who configured a named mechanism, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Declaration {
    /// Where it was declared: the annotated function's path (`shop::search::push_to_index`),
    /// or whatever the caller of [`Registry::declare`] names.
    pub origin: Arc<str>,
    /// Its settings, as declared; two declarations agree exactly when these are equal.
    pub settings: Arc<str>,
}

/// A second, different configuration of a named mechanism: refused, the first in use.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Conflict {
    /// `breaker`, `bulkhead`, `retry policy`, ...
    pub kind: &'static str,
    /// The name both declared.
    pub name: Arc<str>,
    /// The declaration in use.
    pub first: Declaration,
    /// The declaration refused.
    pub second: Declaration,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Conflict {
            kind,
            name,
            first,
            second,
        } = self;
        write!(
            f,
            "{kind} `{name}` is configured twice, differently: `{}` declares {}, `{}` declares {}; \
             the first is in use and the second is refused. One name is one {kind}, with one state: \
             give one of them a name of its own, or declare the same settings in both",
            first.origin, first.settings, second.origin, second.settings
        )
    }
}

impl std::error::Error for Conflict {}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("breakers", &read(&self.breakers).keys().collect::<Vec<_>>())
            .field(
                "bulkheads",
                &read(&self.bulkheads).keys().collect::<Vec<_>>(),
            )
            .field("retries", &read(&self.retries).keys().collect::<Vec<_>>())
            .field("hedges", &read(&self.hedges).keys().collect::<Vec<_>>())
            .field("shedders", &read(&self.shedders).keys().collect::<Vec<_>>())
            .field("drills", &self.drills)
            .field("history", &self.history)
            .finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

// A poisoned lock means a panic elsewhere while it was held; the maps are still valid.
pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn get_or_insert<T: Clone>(
    map: &Map<T>,
    name: &str,
    make: impl FnOnce(Arc<str>) -> T,
) -> T {
    if let Some(found) = read(map).get(name) {
        return found.clone();
    }
    let mut map = write(map);
    if let Some(found) = map.get(name) {
        return found.clone();
    }
    let name: Arc<str> = Arc::from(name);
    let made = make(name.clone());
    map.insert(name, made.clone());
    made
}

/// Every named mechanism's state at one moment.
///
/// # JSON
///
/// Serialised (say, by the dashboard's `/policy`), it is an object whose first field is
/// `"version": 1` ([`Snapshot::VERSION`]); a change to the shape that could break a reader
/// raises it. Every duration is a number of milliseconds, fractional below a millisecond,
/// under a field name ending in `_ms` (`open_for_ms`, `window_ms`, `cooldown_ms`). Rows are
/// named by their policy names (a breaker's, a bulkhead's) or, for what the expansion makes
/// per function, by the operation's own name (the `display_name` of a shedder or a fallback).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Snapshot {
    /// The JSON shape's version: [`Snapshot::VERSION`].
    pub version: u32,
    /// Breakers, by name.
    pub breakers: Vec<BreakerSnapshot>,
    /// Bulkheads, by name.
    pub bulkheads: Vec<BulkheadSnapshot>,
    /// Retry policies, by name.
    pub retries: Vec<RetrySnapshot>,
    /// Hedging policies, by name.
    pub hedges: Vec<HedgeSnapshot>,
    /// Shedders, by name.
    pub shedders: Vec<ShedderSnapshot>,
    /// Rate limiters, by name.
    pub limiters: Vec<LimiterSnapshot>,
    /// The breaker store's health.
    pub store: StoreStatus,
    /// Fallbacks and stale answers, per operation.
    pub fallbacks: Vec<FallbackSnapshot>,
    /// Pools for CPU work, by name.
    pub isolated: Vec<IsolatedPoolSnapshot>,
    /// Poll-budget monitors, by name.
    pub polls: Vec<PollMonitorSnapshot>,
    /// Operations' deadlines and minimum budgets, by name.
    pub operations: Vec<OperationSnapshot>,
    /// The overrides in force and where each value came from (feature `overrides`; empty
    /// without it: every value is compiled).
    pub overrides: OverridesSnapshot,
    /// Deferred work of the whole process (whichever registry is asked).
    pub deferred: DeferredSnapshot,
    /// Every live background pool of the process, by name (whichever registry is asked).
    pub background: Vec<BackgroundSnapshot>,
    /// Every live durable queue of the process, by name (feature `redis`; empty without it).
    pub queues: Vec<crate::queue::QueueSnapshot>,
    /// Second configurations refused, in the order they came (see
    /// [One name, one configuration](self#one-name-one-configuration)).
    pub conflicts: Vec<Conflict>,
    /// The calls between annotated operations seen so far: the observed tree's edges.
    pub calls: CallsSnapshot,
}

impl Snapshot {
    /// The version of the JSON shape, its `version` field.
    pub const VERSION: u32 = 1;
}

impl Registry {
    /// An empty registry using the in-process breaker store.
    pub fn new() -> Self {
        Self {
            breaker_store: RwLock::new(Arc::new(InProcessStore)),
            breakers: RwLock::default(),
            bulkheads: RwLock::default(),
            retries: RwLock::default(),
            hedges: RwLock::default(),
            shedders: RwLock::default(),
            limiters: RwLock::default(),
            limiter_sources: RwLock::default(),
            limiter_store: parts::LimiterStore::default(),
            fallbacks: RwLock::default(),
            isolated: RwLock::default(),
            polls: RwLock::default(),
            operations: RwLock::default(),
            drills: parts::Drills::default(),
            tunings: parts::InForce::default(),
            overrides: RwLock::default(),
            declarations: RwLock::default(),
            uses: RwLock::default(),
            conflicts: RwLock::default(),
            calls: RwLock::default(),
            history: parts::History::default(),
        }
    }

    /// The process-wide registry the attribute macros use. With the feature `test-registry`
    /// (tests only), the registry of the [`TestScope`] entered on this thread, if one is.
    pub fn global() -> &'static Registry {
        #[cfg(feature = "test-registry")]
        if let Some(scope) = scoped::current_scope() {
            return scope.registry();
        }
        static GLOBAL: OnceLock<Registry> = OnceLock::new();
        GLOBAL.get_or_init(Registry::new)
    }

    /// Chooses where breakers built from now on share their state (the in-process store by
    /// default). Set it at startup, before the first call builds a breaker.
    pub fn set_breaker_store(&self, store: Arc<dyn BreakerStore>) {
        *write(&self.breaker_store) = store;
    }

    /// The store new breakers use.
    pub fn breaker_store(&self) -> Arc<dyn BreakerStore> {
        read(&self.breaker_store).clone()
    }

    /// The breaker named `name`, built with `configure` (given a builder that already uses the
    /// registry's store) the first time it is asked for.
    pub fn breaker(
        &self,
        name: &str,
        configure: impl FnOnce(BreakerBuilder) -> BreakerBuilder,
    ) -> Breaker {
        get_or_insert(&self.breakers, name, |name| {
            let breaker = configure(Breaker::builder(name).store(self.breaker_store())).build();
            self.tunings.apply_to_breaker(&breaker);
            breaker
        })
    }

    /// The bulkhead named `name`, built with `configure` the first time.
    pub fn bulkhead(
        &self,
        name: &str,
        configure: impl FnOnce(BulkheadBuilder) -> BulkheadBuilder,
    ) -> Bulkhead {
        get_or_insert(&self.bulkheads, name, |name| {
            let bulkhead = configure(Bulkhead::builder(name)).build();
            self.tunings.apply_to_bulkhead(&bulkhead);
            bulkhead
        })
    }

    /// The retry policy named `name`, built with `configure` the first time.
    pub fn retry(
        &self,
        name: &str,
        configure: impl FnOnce(RetryPolicyBuilder) -> RetryPolicyBuilder,
    ) -> Arc<RetryPolicy> {
        get_or_insert(&self.retries, name, |name| {
            let retry = Arc::new(configure(RetryPolicy::builder(name)).build());
            self.tunings.apply_to_retry(&retry);
            retry
        })
    }

    /// The hedging policy named `name`, built with `configure` the first time.
    pub fn hedge(
        &self,
        name: &str,
        configure: impl FnOnce(HedgeBuilder) -> HedgeBuilder,
    ) -> Arc<Hedge> {
        get_or_insert(&self.hedges, name, |name| {
            Arc::new(configure(Hedge::builder(name)).build())
        })
    }

    /// The retry policy named `name`, if one was built.
    pub fn find_retry(&self, name: &str) -> Option<Arc<RetryPolicy>> {
        read(&self.retries).get(name).cloned()
    }

    /// The hedging policy named `name`, if one was built.
    pub fn find_hedge(&self, name: &str) -> Option<Arc<Hedge>> {
        read(&self.hedges).get(name).cloned()
    }

    /// The shedder named `name`, built with `thresholds` the first time.
    pub fn shedder(&self, name: &str, thresholds: Thresholds) -> Arc<Shedder> {
        get_or_insert(&self.shedders, name, |name| {
            let shedder = Arc::new(Shedder::with_thresholds(name, thresholds));
            self.tunings.apply_to_shedder(&shedder);
            shedder
        })
    }

    /// The deadline and minimum budget of the operation `name` (its last `::` segment the
    /// operation's own name), built with `deadline` and `min_budget` the first time.
    pub fn operation_deadline(
        &self,
        name: &str,
        deadline: std::time::Duration,
        min_budget: std::time::Duration,
    ) -> Arc<OperationDeadline> {
        get_or_insert(&self.operations, name, |name| {
            let operation = Arc::new(OperationDeadline::new(name, deadline, min_budget));
            self.tunings.apply_to_operation(&operation);
            operation
        })
    }

    /// The fallback record of the operation `operation`, answered by `answered_by`, built
    /// the first time.
    pub fn fallback(&self, operation: &str, answered_by: &str) -> Arc<Fallback> {
        get_or_insert(&self.fallbacks, operation, |operation| {
            Arc::new(Fallback::new(operation, answered_by))
        })
    }

    /// The pool for CPU work named `name`, built with `configure` the first time.
    pub fn isolated_pool(
        &self,
        name: &str,
        configure: impl FnOnce(IsolatedPoolBuilder) -> IsolatedPoolBuilder,
    ) -> IsolatedPool {
        get_or_insert(&self.isolated, name, |name| {
            configure(IsolatedPool::builder(name)).build()
        })
    }

    /// The poll monitor named `name`, with `budget` per poll the first time.
    pub fn poll_monitor(&self, name: &str, budget: std::time::Duration) -> Arc<PollMonitor> {
        get_or_insert(&self.polls, name, |name| {
            Arc::new(PollMonitor::new(name, budget))
        })
    }

    /// The rate limiter named `name`: `limit` calls per `per`, built with `configure` the
    /// first time. It decides in this process, or across the fleet when
    /// a [limiter store](Self::set_limiter_store) was set before it was built.
    pub fn rate_limiter(
        &self,
        name: &str,
        limit: u32,
        per: std::time::Duration,
        configure: impl FnOnce(RateLimiterBuilder) -> RateLimiterBuilder,
    ) -> RateLimiter {
        get_or_insert(&self.limiters, name, |name| {
            let builder = RateLimiter::builder(name, limit, per);
            configure(self.limiter_store.fleet(builder)).build()
        })
    }

    /// Adds a rate limiter of your own to the snapshot, under its name. A name the registry's
    /// own [`rate_limiter`](Self::rate_limiter) already holds is listed once, as that limiter.
    pub fn register_limiter(&self, name: &str, limiter: Arc<dyn LimiterSource>) {
        write(&self.limiter_sources).insert(Arc::from(name), limiter);
    }

    /// The rate limiter named `name`, if one was built.
    pub fn find_rate_limiter(&self, name: &str) -> Option<RateLimiter> {
        read(&self.limiters).get(name).cloned()
    }

    /// The breaker named `name`, if one was built.
    pub fn find_breaker(&self, name: &str) -> Option<Breaker> {
        read(&self.breakers).get(name).cloned()
    }

    /// The bulkhead named `name`, if one was built.
    pub fn find_bulkhead(&self, name: &str) -> Option<Bulkhead> {
        read(&self.bulkheads).get(name).cloned()
    }

    /// Records that `origin` configures the `kind` named `name` with `settings` (a
    /// description that is equal exactly when the settings are). The first declaration of a
    /// name is the configuration; one with the same settings agrees with it; one with other
    /// settings is refused as a [`Conflict`], logged as an error and kept for the
    /// [snapshot](Snapshot::conflicts). Once per declaration, not per call.
    ///
    /// # Errors
    ///
    /// The [`Conflict`] when an earlier declaration of `name` has other settings.
    pub fn declare(
        &self,
        kind: &'static str,
        name: &str,
        origin: &str,
        settings: impl fmt::Display,
    ) -> Result<(), Conflict> {
        let declaration = Declaration {
            origin: Arc::from(origin),
            settings: Arc::from(settings.to_string()),
        };
        write(&self.uses).insert((declaration.origin.clone(), kind, Arc::from(name)));
        let first = {
            let mut declarations = write(&self.declarations);
            let first = declarations
                .entry((kind, Arc::from(name)))
                .or_insert_with(|| declaration.clone());
            if first.settings == declaration.settings {
                return Ok(());
            }
            first.clone()
        };
        let conflict = Conflict {
            kind,
            name: Arc::from(name),
            first,
            second: declaration,
        };
        tracing::error!(
            target: "policy",
            kind = "conflict",
            name,
            first = &*conflict.first.origin,
            second = &*conflict.second.origin,
            "{conflict}"
        );
        let mut conflicts = write(&self.conflicts);
        if !conflicts.contains(&conflict) {
            conflicts.push(conflict.clone());
        }
        Err(conflict)
    }

    /// Every named mechanism's state now, sorted by name.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            version: Snapshot::VERSION,
            breakers: read(&self.breakers)
                .values()
                .map(Breaker::snapshot)
                .collect(),
            bulkheads: read(&self.bulkheads)
                .values()
                .map(Bulkhead::snapshot)
                .collect(),
            retries: read(&self.retries).values().map(|r| r.snapshot()).collect(),
            hedges: read(&self.hedges).values().map(|h| h.snapshot()).collect(),
            shedders: read(&self.shedders)
                .values()
                .map(|s| s.snapshot())
                .collect(),
            limiters: self.limiter_snapshots(),
            store: self.breaker_store().status(),
            fallbacks: read(&self.fallbacks)
                .values()
                .map(|f| f.snapshot())
                .collect(),
            isolated: read(&self.isolated)
                .values()
                .map(IsolatedPool::snapshot)
                .collect(),
            polls: read(&self.polls).values().map(|p| p.snapshot()).collect(),
            operations: read(&self.operations)
                .values()
                .map(|o| o.snapshot())
                .collect(),
            overrides: read(&self.overrides).clone(),
            deferred: crate::defer::snapshot(),
            background: crate::background::snapshots(),
            queues: crate::queue::snapshots(),
            conflicts: read(&self.conflicts).clone(),
            calls: read(&self.calls).snapshot(),
        }
    }

    /// Records that `calls`' operation was called by `parent` (an operation, or an entry
    /// point's caller): once per edge, from the first call of each (the operation's slots keep
    /// the rest away), under a read lock when the edge is known and a write lock when it is new.
    pub(crate) fn note_call(&self, parent: &'static str, calls: &'static Calls) {
        if read(&self.calls).knows(parent, calls.operation()) {
            return;
        }
        let dropped = {
            let mut table = write(&self.calls);
            table.insert(parent, calls).then(|| table.dropped())
        };
        if let Some(count) = dropped {
            calls::dropped(parent, calls.operation(), count);
        }
    }

    /// Notes a request budget a `DeadlineLayer` stamps (the dashboard's trees put the
    /// largest above every entry point).
    #[cfg_attr(
        not(feature = "http"),
        expect(dead_code, reason = "the DeadlineLayer (feature `http`) notes it")
    )]
    pub(crate) fn note_request_budget(&self, budget: std::time::Duration) {
        write(&self.calls).note_request(budget);
    }

    /// Notes a `DeadlineLayer`'s minimum budget.
    #[cfg_attr(
        not(feature = "http"),
        expect(dead_code, reason = "the DeadlineLayer (feature `http`) notes it")
    )]
    pub(crate) fn note_request_min_budget(&self, min_budget: std::time::Duration) {
        write(&self.calls).note_request_min_budget(min_budget);
    }

    /// The mechanisms of `kind` (`retry policy`, `hedge`, ...) the function `origin` declared,
    /// by name.
    pub fn used_by(&self, origin: &str, kind: &str) -> Vec<Arc<str>> {
        read(&self.uses)
            .iter()
            .filter(|(o, k, _)| &**o == origin && *k == kind)
            .map(|(_, _, name)| name.clone())
            .collect()
    }

    /// The functions that declared the operation whose own name is `operation` (its entry is
    /// named `module::path::operation`).
    pub fn declaring(&self, operation: &str) -> Vec<Arc<str>> {
        read(&self.uses)
            .iter()
            .filter(|(_, kind, name)| {
                *kind == "operation" && crate::observe::short_name(name) == operation
            })
            .map(|(origin, _, _)| origin.clone())
            .collect()
    }

    /// The operation deadline named `name`, if one was built.
    pub fn find_operation_deadline(&self, name: &str) -> Option<Arc<OperationDeadline>> {
        read(&self.operations).get(name).cloned()
    }

    /// The registry's own rate limiters and the ones registered by hand, sorted by name; a
    /// name is listed once.
    fn limiter_snapshots(&self) -> Vec<LimiterSnapshot> {
        let sources = read(&self.limiter_sources);
        let rows = sources
            .iter()
            .map(|(name, source)| (name.clone(), source.limiter_snapshot()));
        let limiters = read(&self.limiters);
        let rows = rows.chain(
            limiters
                .iter()
                .map(|(name, limiter)| (name.clone(), limiter.snapshot())),
        );
        // Collected by name: the registry's own limiter, listed last, wins a shared name.
        rows.collect::<BTreeMap<Arc<str>, LimiterSnapshot>>()
            .into_values()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Registry;
    use crate::limiter::LimiterSnapshot;

    #[derive(Debug)]
    struct Uploads;

    impl crate::limiter::LimiterSource for Uploads {
        fn limiter_snapshot(&self) -> LimiterSnapshot {
            let mut row = LimiterSnapshot::new("uploads");
            row.refused = 3;
            row
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_snapshot_lists_each_name_once_sorted_the_registrys_own_limiter_first() {
        let registry = Registry::new();
        registry.register_limiter("uploads", std::sync::Arc::new(Uploads));
        registry.register_limiter("signups", std::sync::Arc::new(Uploads));
        let signups = registry.rate_limiter("signups", 1, Duration::from_secs(1), |l| l);
        signups.acquire().await.unwrap();
        let rows = registry.snapshot().limiters;
        let names: Vec<&str> = rows.iter().map(|row| &*row.name).collect();
        assert_eq!(names, ["signups", "uploads"]);
        assert_eq!((rows[0].admitted, rows[0].config.limit), (1, 1));
        assert_eq!(rows[1].refused, 3);
    }
}
