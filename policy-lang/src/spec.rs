//! The model: what a policy says, as plain data.
//!
//! Both front ends lower into a [`Spec`]: `.policy` files through [`crate::lower`], attribute
//! macros by building the items here with [`Loc::External`] locations. The one validator
//! ([`crate::validate()`]) checks it; the runtime builds its registry from it.
//!
//! Items are `#[non_exhaustive]` so that later issues can add fields: build them with their
//! `new` constructor and set the optional fields afterwards.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use crate::diagnostic::{Diagnostic, Kind};
use crate::source::{Loc, Located};

/// A whole policy: every stanza of every file, and what the macros added.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Spec {
    /// The request-level budget, if declared.
    pub request: Option<RequestSpec>,
    /// Circuit breakers by name.
    pub breakers: Items<BreakerSpec>,
    /// Bulkheads by name.
    pub bulkheads: Items<BulkheadSpec>,
    /// Retry policies by name.
    pub retries: Items<RetrySpec>,
    /// Load-shedding thresholds, if declared (otherwise [`SheddingSpec::DEFAULT_DEFERRED`] and
    /// [`SheddingSpec::DEFAULT_BACKGROUND`] apply).
    pub shedding: Option<SheddingSpec>,
    /// Rate limits by name.
    pub ratelimits: Items<RatelimitSpec>,
    /// Operations by name.
    pub operations: Items<OperationSpec>,
    /// The calls a request makes to other services, if declared.
    pub locality: Option<LocalitySpec>,
    /// Size budgets by name, for `policy gate`.
    pub budgets: Items<BudgetSpec>,
    /// Quarantined heavy crates by crate name, for `policy gate`.
    pub quarantines: Items<QuarantineSpec>,
    /// Asset delivery ceilings by name, one per front end (`policy assets` audits a folder
    /// against one of them).
    pub assets: Items<AssetsSpec>,
}

impl Spec {
    /// An empty policy.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The request deadline, if one is declared.
    #[must_use]
    pub fn request_deadline(&self) -> Option<Duration> {
        self.request
            .as_ref()
            .and_then(|request| request.deadline.as_ref())
            .map(|deadline| deadline.value)
    }

    /// The deadline an operation actually runs under, and where it was set. For critical work
    /// it is the smaller of its own and the request's (the clamp: a child never outlives its
    /// parent). Deferred and background work runs after the response, outside the request's
    /// budget, so only its own deadline applies.
    #[must_use]
    pub fn governing_deadline<'a>(
        &'a self,
        operation: &'a OperationSpec,
    ) -> Option<&'a Located<Duration>> {
        let own = operation.deadline.as_ref();
        let request = match operation.class.value {
            Class::Critical => self
                .request
                .as_ref()
                .and_then(|request| request.deadline.as_ref()),
            Class::Deferred | Class::Background => None,
        };
        match (own, request) {
            (Some(own), Some(request)) if request.value < own.value => Some(request),
            (own, request) => own.or(request),
        }
    }

    /// The value of [`Spec::governing_deadline`].
    #[must_use]
    pub fn effective_deadline(&self, operation: &OperationSpec) -> Option<Duration> {
        self.governing_deadline(operation)
            .map(|deadline| deadline.value)
    }

    /// The shedding thresholds in force (declared or default).
    #[must_use]
    pub fn shedding_thresholds(&self) -> (f64, f64) {
        self.shedding.as_ref().map_or(
            (
                SheddingSpec::DEFAULT_DEFERRED,
                SheddingSpec::DEFAULT_BACKGROUND,
            ),
            |shedding| (shedding.deferred.value, shedding.background.value),
        )
    }
}

/// Something with a name, kept in [`Items`].
pub trait Named {
    /// What kind of item this is, as the language calls it (`breaker`, `operation`).
    const KIND: &'static str;
    /// Its name and where the name was written.
    fn name(&self) -> &Located<String>;
}

/// Named items in declaration order, looked up by name. Inserting a second item with a name
/// already present is refused with a `policy::duplicate-name` diagnostic.
#[derive(Clone)]
pub struct Items<T> {
    items: Vec<T>,
    index: HashMap<String, usize>,
}

impl<T: fmt::Debug> fmt::Debug for Items<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.items).finish()
    }
}

impl<T> Default for Items<T> {
    fn default() -> Self {
        Items {
            items: Vec::new(),
            index: HashMap::new(),
        }
    }
}

impl<T: Named> Items<T> {
    /// Adds an item, unless one with the same name exists.
    pub fn insert(&mut self, item: T) -> Result<(), Box<Diagnostic>> {
        if let Some(first) = self.get(&item.name().value) {
            let name = item.name();
            return Err(Box::new(
                Diagnostic::new(
                    Kind::DuplicateName {
                        kind: T::KIND.to_owned(),
                        name: name.value.clone(),
                    },
                    name.loc,
                    "defined again here",
                )
                .with_label(first.name().loc, "first defined here"),
            ));
        }
        self.index
            .insert(item.name().value.clone(), self.items.len());
        self.items.push(item);
        Ok(())
    }

    /// The item with this name.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&T> {
        self.index.get(name).and_then(|&i| self.items.get(i))
    }

    /// The item with this name, to change it (its name must stay the same: items are found by
    /// the name they were inserted under).
    pub fn get_mut(&mut self, name: &str) -> Option<&mut T> {
        self.index.get(name).and_then(|&i| self.items.get_mut(i))
    }

    /// Every name, in declaration order.
    pub fn names(&self) -> impl Iterator<Item = &str> + Clone {
        self.items.iter().map(|item| item.name().value.as_str())
    }
}

impl<T> Items<T> {
    /// Every item, in declaration order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// How many items there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<'a, T> IntoIterator for &'a Items<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

/// `request { deadline = 10s }`: the budget every request starts with.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RequestSpec {
    /// The request deadline.
    pub deadline: Option<Located<Duration>>,
    /// The stanza.
    pub loc: Loc,
}

impl RequestSpec {
    /// A request stanza with no settings yet.
    #[must_use]
    pub fn new(loc: Loc) -> Self {
        RequestSpec {
            deadline: None,
            loc,
        }
    }
}

/// When a breaker opens on inferred failures.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum OpenAfter {
    /// `5 failures within 30s`.
    Count {
        /// Failures that open the breaker.
        failures: u32,
        /// The window they are counted in.
        window: Duration,
    },
    /// `50% of at least 20 calls within 30s`.
    Ratio {
        /// Share of failed calls that opens the breaker, in (0, 1].
        ratio: f64,
        /// Calls needed in the window before the ratio counts.
        min_calls: u32,
        /// The window.
        window: Duration,
    },
}

impl OpenAfter {
    /// The counting window.
    #[must_use]
    pub fn window(&self) -> Duration {
        match self {
            OpenAfter::Count { window, .. } | OpenAfter::Ratio { window, .. } => *window,
        }
    }
}

/// Which breaker state is shared between instances (through the store, when one is configured).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Sharing {
    /// Nothing is shared: each instance counts and opens on its own (the default).
    #[default]
    Local,
    /// `shared` (quorum 1) or `shared(quorum = N)`: explicit trips are shared, and openings
    /// from counted failures are shared once failures came from at least `quorum` distinct
    /// instances.
    Shared {
        /// Distinct instances whose failures are needed before an opening is shared.
        quorum: u32,
    },
    /// `shared(trips_only)`: only explicit trips (a dependency that told us to back off) are
    /// shared; counted openings stay local.
    TripsOnly,
}

/// `breaker NAME { open_after = ...; cooldown = ...; shared }`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BreakerSpec {
    /// Its name.
    pub name: Located<String>,
    /// When it opens on counted failures.
    pub open_after: Located<OpenAfter>,
    /// How long it stays open.
    pub cooldown: Located<Duration>,
    /// What is shared between instances.
    pub sharing: Located<Sharing>,
    /// The stanza.
    pub loc: Loc,
}

impl BreakerSpec {
    /// A local breaker.
    #[must_use]
    pub fn new(
        name: Located<String>,
        open_after: Located<OpenAfter>,
        cooldown: Located<Duration>,
        loc: Loc,
    ) -> Self {
        BreakerSpec {
            name,
            open_after,
            cooldown,
            sharing: Located::new(Sharing::Local, loc),
            loc,
        }
    }
}

impl Named for BreakerSpec {
    const KIND: &'static str = "breaker";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// `bulkhead NAME { max_concurrent = 4; max_queued = 8 }`: bounds one instance.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BulkheadSpec {
    /// Its name.
    pub name: Located<String>,
    /// Calls that may run at once (at least 1).
    pub max_concurrent: Located<u32>,
    /// Callers that may wait for a slot; past that they are refused (default 0).
    pub max_queued: Located<u32>,
    /// The stanza.
    pub loc: Loc,
}

impl BulkheadSpec {
    /// A bulkhead with no queue.
    #[must_use]
    pub fn new(name: Located<String>, max_concurrent: Located<u32>, loc: Loc) -> Self {
        BulkheadSpec {
            name,
            max_concurrent,
            max_queued: Located::new(0, loc),
            loc,
        }
    }
}

impl Named for BulkheadSpec {
    const KIND: &'static str = "bulkhead";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// How long to wait between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backoff {
    /// `full_jitter(base = 50ms, cap = 1s)`: before attempt `k + 1`, wait a random time in
    /// `[0, min(cap, base × 2^(k-1))]`.
    FullJitter {
        /// The first delay's ceiling.
        base: Duration,
        /// The largest delay's ceiling.
        cap: Duration,
    },
}

impl Backoff {
    /// The longest wait after attempt `attempt` (1-based) failed.
    #[must_use]
    pub fn max_delay_after(&self, attempt: u32) -> Duration {
        match self {
            Backoff::FullJitter { base, cap } => {
                let doublings = attempt.saturating_sub(1).min(32);
                base.saturating_mul(1u32 << doublings.min(31)).min(*cap)
            }
        }
    }
}

/// `budget = 20% + 10/s`: how much retry traffic may add.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RetryBudget {
    /// Share of recent calls that retries may add, in (0, 1].
    pub ratio: f64,
    /// Retries always allowed per second, whatever the ratio says.
    pub floor_per_second: u32,
}

impl RetryBudget {
    /// A budget.
    #[must_use]
    pub fn new(ratio: f64, floor_per_second: u32) -> Self {
        RetryBudget {
            ratio,
            floor_per_second,
        }
    }
}

/// `retry NAME { attempts = 3; backoff = full_jitter(...); attempt_timeout = 2s; budget = ... }`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RetrySpec {
    /// Its name.
    pub name: Located<String>,
    /// Total attempts, the first included (at least 1).
    pub attempts: Located<u32>,
    /// The wait between attempts.
    pub backoff: Located<Backoff>,
    /// The most one attempt may take (clamped to what the deadline has left).
    pub attempt_timeout: Option<Located<Duration>>,
    /// The retry budget.
    pub budget: Option<Located<RetryBudget>>,
    /// The stanza.
    pub loc: Loc,
}

impl RetrySpec {
    /// A retry policy with no attempt timeout and no budget.
    #[must_use]
    pub fn new(
        name: Located<String>,
        attempts: Located<u32>,
        backoff: Located<Backoff>,
        loc: Loc,
    ) -> Self {
        RetrySpec {
            name,
            attempts,
            backoff,
            attempt_timeout: None,
            budget: None,
            loc,
        }
    }
}

impl Named for RetrySpec {
    const KIND: &'static str = "retry";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// `shedding { deferred at load 0.5; background at load 0.25 }`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SheddingSpec {
    /// Load at or above which deferred work is shed, in (0, 1).
    pub deferred: Located<f64>,
    /// Load at or above which background work is shed, in (0, 1), at most `deferred`.
    pub background: Located<f64>,
    /// The stanza.
    pub loc: Loc,
}

impl SheddingSpec {
    /// Deferred work is shed from half load by default.
    pub const DEFAULT_DEFERRED: f64 = 0.5;
    /// Background work is shed from a quarter load by default.
    pub const DEFAULT_BACKGROUND: f64 = 0.25;

    /// The default thresholds, located at `loc`.
    #[must_use]
    pub fn new(loc: Loc) -> Self {
        SheddingSpec {
            deferred: Located::new(Self::DEFAULT_DEFERRED, loc),
            background: Located::new(Self::DEFAULT_BACKGROUND, loc),
            loc,
        }
    }
}

/// What a rate limiter does when its store is slow or down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// Let the call through.
    Open,
    /// Refuse the call.
    Closed,
}

impl fmt::Display for FailMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailMode::Open => "open",
            FailMode::Closed => "closed",
        })
    }
}

/// `100 per 1m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rate {
    /// Calls allowed per period.
    pub count: u32,
    /// The period.
    pub per: Duration,
}

impl Rate {
    /// A rate.
    #[must_use]
    pub fn new(count: u32, per: Duration) -> Self {
        Rate { count, per }
    }
}

/// `ratelimit NAME { 100 per 1m; on_timeout = open; on_error = closed }`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RatelimitSpec {
    /// Its name.
    pub name: Located<String>,
    /// Calls allowed per period.
    pub rate: Located<Rate>,
    /// What to do when the limiter's store is slow.
    pub on_timeout: Located<FailMode>,
    /// What to do when the limiter's store is down.
    pub on_error: Located<FailMode>,
    /// The stanza.
    pub loc: Loc,
}

impl RatelimitSpec {
    /// A rate limit; both failure modes must be chosen, because they are separate decisions.
    #[must_use]
    pub fn new(
        name: Located<String>,
        rate: Located<Rate>,
        on_timeout: Located<FailMode>,
        on_error: Located<FailMode>,
        loc: Loc,
    ) -> Self {
        RatelimitSpec {
            name,
            rate,
            on_timeout,
            on_error,
            loc,
        }
    }
}

impl Named for RatelimitSpec {
    const KIND: &'static str = "ratelimit";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// An operation's work class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Before the response; never shed for load.
    Critical,
    /// After the response; shed under load; at-least-once.
    Deferred,
    /// On a bounded background pool; shed first.
    Background,
}

impl Class {
    /// The class from its name in the language.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Class> {
        match name {
            "critical" => Some(Class::Critical),
            "deferred" => Some(Class::Deferred),
            "background" => Some(Class::Background),
            _ => None,
        }
    }

    /// Its name in the language.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Critical => "critical",
            Class::Deferred => "deferred",
            Class::Background => "background",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `operation NAME: class, flags { breaker = ...; deadline = ...; ... }`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OperationSpec {
    /// Its name.
    pub name: Located<String>,
    /// Its work class.
    pub class: Located<Class>,
    /// Where `idempotent` was declared, if it was.
    pub idempotent: Option<Loc>,
    /// Where `durable` (a write that must be acknowledged) was declared, if it was.
    pub durable: Option<Loc>,
    /// The breaker it checks, by name.
    pub breaker: Option<Located<String>>,
    /// The bulkhead it takes a permit from, by name.
    pub bulkhead: Option<Located<String>>,
    /// The retry policy it runs under, by name.
    pub retry: Option<Located<String>>,
    /// The rate limit it is admitted by, by name.
    pub ratelimit: Option<Located<String>>,
    /// Its deadline (clamped to the request's).
    pub deadline: Option<Located<Duration>>,
    /// The least remaining budget worth starting with.
    pub min_budget: Option<Located<Duration>>,
    /// What it usually costs, for the budget side of shedding.
    pub expected_cost: Option<Located<Duration>>,
    /// Its own load threshold for shedding, instead of its class's (deferred and background
    /// work only: critical work is never shed for load).
    pub shed_at: Option<Located<f64>>,
    /// The function to call instead when it is refused (a later issue).
    pub fallback: Option<Located<String>>,
    /// How stale a cached result may be served on error (a later issue).
    pub stale_if_error: Option<Located<Duration>>,
    /// The stanza or attribute.
    pub loc: Loc,
}

impl OperationSpec {
    /// An operation with no flags, mechanisms or deadline.
    #[must_use]
    pub fn new(name: Located<String>, class: Located<Class>, loc: Loc) -> Self {
        OperationSpec {
            name,
            class,
            idempotent: None,
            durable: None,
            breaker: None,
            bulkhead: None,
            retry: None,
            ratelimit: None,
            deadline: None,
            min_budget: None,
            expected_cost: None,
            shed_at: None,
            fallback: None,
            stale_if_error: None,
            loc,
        }
    }

    /// Whether it is declared idempotent.
    #[must_use]
    pub fn is_idempotent(&self) -> bool {
        self.idempotent.is_some()
    }

    /// Whether it is declared durable.
    #[must_use]
    pub fn is_durable(&self) -> bool {
        self.durable.is_some()
    }
}

impl Named for OperationSpec {
    const KIND: &'static str = "operation";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// Whether the request waits for a hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopKind {
    /// `blocking`: the request waits for the call, so every round trip adds to its latency.
    Blocking,
    /// `async`: the request does not wait (deferred work, or a call the browser makes).
    Async,
}

impl HopKind {
    /// The kind from its name in the language.
    #[must_use]
    pub fn from_name(name: &str) -> Option<HopKind> {
        match name {
            "blocking" => Some(HopKind::Blocking),
            "async" => Some(HopKind::Async),
            _ => None,
        }
    }

    /// Its name in the language.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            HopKind::Blocking => "blocking",
            HopKind::Async => "async",
        }
    }
}

impl fmt::Display for HopKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `NAME = blocking env VARIABLE`: one call a request makes, and the environment variable whose
/// connection string locates the service it calls. The region is never written in the policy:
/// it is derived from that variable where the check runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HopSpec {
    /// The service's name in the policy (`database`, `cache`).
    pub name: Located<String>,
    /// Whether the request waits for it.
    pub kind: Located<HopKind>,
    /// The variable holding the service's connection string (`DATABASE_URL`).
    pub variable: Located<String>,
    /// The statement or attribute.
    pub loc: Loc,
}

impl HopSpec {
    /// A hop.
    #[must_use]
    pub fn new(
        name: Located<String>,
        kind: Located<HopKind>,
        variable: Located<String>,
        loc: Loc,
    ) -> Self {
        HopSpec {
            name,
            kind,
            variable,
            loc,
        }
    }

    /// Whether the request waits for it.
    #[must_use]
    pub fn is_blocking(&self) -> bool {
        self.kind.value == HopKind::Blocking
    }
}

impl Named for HopSpec {
    const KIND: &'static str = "hop";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// `locality { database = blocking env DATABASE_URL; assets = async env R2_URL }`: the hops a
/// request makes. `policy locality --check` compares each blocking hop's region with the
/// compute's, both derived from the environment.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LocalitySpec {
    /// The hops by name, in declaration order.
    pub hops: Items<HopSpec>,
    /// The stanza.
    pub loc: Loc,
}

impl LocalitySpec {
    /// A locality stanza with no hops yet.
    #[must_use]
    pub fn new(loc: Loc) -> Self {
        LocalitySpec {
            hops: Items::default(),
            loc,
        }
    }
}

// ---- the build-time side: budgets and quarantines (`policy gate`) --------------------------------

/// A measure of a static front-end build (a bundler's output folder: HTML documents, JS
/// modules, CSS). "Loads" means the `<script src>`, `<link rel="modulepreload">` and
/// `<link rel="preload" as="script">` of a document, followed through static imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WebMetric {
    /// `baseline_js_kb`: the JS that every HTML document loads.
    BaselineJs,
    /// `route_js_kb`: the largest JS total one document loads.
    RouteJs,
    /// `median_route_js_kb`: the median of the documents' JS totals.
    MedianRouteJs,
    /// `total_client_js_kb`: every JS file of the folder, loaded or not.
    TotalClientJs,
    /// `doc_html_kb`: the largest HTML document.
    DocHtml,
}

impl WebMetric {
    /// Every front-end metric, in the order the docs list them.
    pub const ALL: [WebMetric; 5] = [
        WebMetric::BaselineJs,
        WebMetric::RouteJs,
        WebMetric::MedianRouteJs,
        WebMetric::TotalClientJs,
        WebMetric::DocHtml,
    ];

    /// Its name in the language.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            WebMetric::BaselineJs => "baseline_js_kb",
            WebMetric::RouteJs => "route_js_kb",
            WebMetric::MedianRouteJs => "median_route_js_kb",
            WebMetric::TotalClientJs => "total_client_js_kb",
            WebMetric::DocHtml => "doc_html_kb",
        }
    }

    /// The metric from its name in the language.
    #[must_use]
    pub fn from_name(name: &str) -> Option<WebMetric> {
        WebMetric::ALL
            .into_iter()
            .find(|metric| metric.as_str() == name)
    }
}

/// What one line of a budget measures.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Metric {
    /// A measure of the front-end build in the budget's `dir`.
    Web(WebMetric),
    /// `binary "PATH"`: the size of a built binary.
    Binary(String),
    /// `binary_code "PATH"`: the size of a built binary's code (its executable sections,
    /// `.text` on ELF).
    BinaryCode(String),
    /// `crates "PACKAGE"`: how many crates a package's default build has, itself included.
    Crates(String),
    /// `files "GLOB"`: the total size of the files a glob matches.
    Files(String),
}

impl Metric {
    /// The metrics that name what they measure with a string after them.
    pub const WITH_TARGET: [&'static str; 4] = ["binary", "binary_code", "crates", "files"];

    /// Every metric name, for suggestions.
    pub fn names() -> impl Iterator<Item = &'static str> + Clone {
        WebMetric::ALL
            .into_iter()
            .map(WebMetric::as_str)
            .chain(Metric::WITH_TARGET)
    }

    /// The metric's keyword in the language.
    #[must_use]
    pub fn keyword(&self) -> &'static str {
        match self {
            Metric::Web(metric) => metric.as_str(),
            Metric::Binary(_) => "binary",
            Metric::BinaryCode(_) => "binary_code",
            Metric::Crates(_) => "crates",
            Metric::Files(_) => "files",
        }
    }

    /// What it measures after the keyword: a path, a package or a glob.
    #[must_use]
    pub fn target(&self) -> Option<&str> {
        match self {
            Metric::Web(_) => None,
            Metric::Binary(target)
            | Metric::BinaryCode(target)
            | Metric::Crates(target)
            | Metric::Files(target) => Some(target),
        }
    }

    /// Whether it counts crates rather than measuring bytes.
    #[must_use]
    pub fn is_count(&self) -> bool {
        matches!(self, Metric::Crates(_))
    }

    /// Whether a compressed size can be asked for.
    #[must_use]
    pub fn can_compress(&self) -> bool {
        matches!(self, Metric::Web(_) | Metric::Files(_))
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.keyword())?;
        match self.target() {
            Some(target) => write!(f, " \"{target}\""),
            None => Ok(()),
        }
    }
}

/// Whether a size is measured as stored or compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Compression {
    /// The bytes as they are on disk.
    #[default]
    Raw,
    /// `gzip`: each file compressed on its own with gzip at its best level (9), as a server
    /// or CDN would send it.
    Gzip,
}

/// A size or a count, and the unit it was written in (so that a rewrite keeps the unit).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Amount {
    /// Bytes for a size, the number itself for a count.
    pub value: u64,
    /// The unit as written (`kb`, `mb`, ...); `None` for a count.
    pub unit: Option<String>,
}

impl Amount {
    /// An amount.
    #[must_use]
    pub fn new(value: u64, unit: Option<String>) -> Self {
        Amount { value, unit }
    }
}

/// `METRIC [gzip] at most CEILING measured VALUE headroom P%`: one line of a budget.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BudgetLimit {
    /// What is measured, located at the metric's keyword and target.
    pub metric: Located<Metric>,
    /// Stored or compressed size.
    pub compression: Compression,
    /// The most the measurement may be; the gate fails above it.
    pub ceiling: Located<Amount>,
    /// The measurement the ceiling was last set from.
    pub measured: Located<Amount>,
    /// How much growth the ceiling allows over `measured`: the ratchet lowers the ceiling
    /// toward `measured × (1 + headroom)`.
    pub headroom: Located<f64>,
    /// The whole line.
    pub loc: Loc,
}

impl BudgetLimit {
    /// A budget line.
    #[must_use]
    pub fn new(
        metric: Located<Metric>,
        ceiling: Located<Amount>,
        measured: Located<Amount>,
        headroom: Located<f64>,
        loc: Loc,
    ) -> Self {
        BudgetLimit {
            metric,
            compression: Compression::Raw,
            ceiling,
            measured,
            headroom,
            loc,
        }
    }

    /// The metric as the table shows it: `baseline_js_kb gzip`, `binary "target/release/x"`.
    #[must_use]
    pub fn label(&self) -> String {
        match self.compression {
            Compression::Raw => self.metric.value.to_string(),
            Compression::Gzip => format!("{} gzip", self.metric.value),
        }
    }
}

/// `budget NAME { dir = "..."; METRIC at most ... }`: ceilings on what a build weighs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BudgetSpec {
    /// Its name.
    pub name: Located<String>,
    /// The front-end build folder the front-end metrics read.
    pub dir: Option<Located<String>>,
    /// Its lines, in order.
    pub limits: Vec<BudgetLimit>,
    /// The stanza.
    pub loc: Loc,
}

impl BudgetSpec {
    /// A budget with no lines yet.
    #[must_use]
    pub fn new(name: Located<String>, loc: Loc) -> Self {
        BudgetSpec {
            name,
            dir: None,
            limits: Vec::new(),
            loc,
        }
    }
}

impl Named for BudgetSpec {
    const KIND: &'static str = "budget";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// `quarantine CRATE { package = "..."; behind = "FEATURE"; only = "..."; justification = "..." }`:
/// a heavy crate that must stay out of a package's default build.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QuarantineSpec {
    /// The stanza's name: the heavy crate, unless `crate` names it.
    pub name: Located<String>,
    /// `crate = "..."`: the heavy crate, when the stanza's name is only a label (so one crate
    /// can be quarantined for several packages).
    pub krate: Option<Located<String>>,
    /// The package whose default build must not contain it.
    pub package: Located<String>,
    /// The feature of `package` it must stay behind.
    pub behind: Located<String>,
    /// The only crates allowed to depend on it directly (empty: any).
    pub only: Vec<Located<String>>,
    /// Why it is allowed in the default build after all, printed by the gate.
    pub justification: Option<Located<String>>,
    /// The stanza.
    pub loc: Loc,
}

impl QuarantineSpec {
    /// The heavy crate (`-` and `_` are the same in crate names, as on crates.io).
    #[must_use]
    pub fn crate_name(&self) -> &Located<String> {
        self.krate.as_ref().unwrap_or(&self.name)
    }

    /// A quarantine with no `only` list and no justification.
    #[must_use]
    pub fn new(
        name: Located<String>,
        package: Located<String>,
        behind: Located<String>,
        loc: Loc,
    ) -> Self {
        QuarantineSpec {
            name,
            krate: None,
            package,
            behind,
            only: Vec::new(),
            justification: None,
            loc,
        }
    }
}

impl Named for QuarantineSpec {
    const KIND: &'static str = "quarantine";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// Formats a size the way the language writes it: `200kb`, `1.5mb`, `512b`.
#[must_use]
pub fn format_size(bytes: u64) -> String {
    const KB: u64 = 1024;
    for (unit, scale) in [("gb", KB * KB * KB), ("mb", KB * KB), ("kb", KB)] {
        if bytes >= scale {
            // Shown to a person, rounded to three decimals: precision past 2^53 does not matter.
            let value = bytes as f64 / scale as f64;
            return format!("{}{unit}", trim_decimal(value));
        }
    }
    format!("{bytes}b")
}

/// Formats a duration the way the language writes it: `3s`, `200ms`, `1.5s`, `2m`.
#[must_use]
pub fn format_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    const MS: u128 = 1_000_000;
    const S: u128 = 1_000 * MS;
    if nanos.is_multiple_of(3600 * S) {
        format!("{}h", nanos / (3600 * S))
    } else if nanos.is_multiple_of(60 * S) {
        format!("{}m", nanos / (60 * S))
    } else if nanos.is_multiple_of(S) {
        format!("{}s", nanos / S)
    } else if nanos >= S {
        format!("{}s", trim_decimal(duration.as_secs_f64()))
    } else if nanos.is_multiple_of(MS) {
        format!("{}ms", nanos / MS)
    } else {
        format!("{}ms", trim_decimal(duration.as_secs_f64() * 1000.0))
    }
}

/// Parses a duration as the language writes it (`3s`, `200ms`, `1.5m`), for front ends that
/// take durations as strings (the attribute macros' `deadline = "3s"`). The error is a
/// message in the diagnostics' style, ready to show.
///
/// ```
/// use std::time::Duration;
/// use policy_lang::spec::parse_duration;
///
/// assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert_eq!(parse_duration(" 1.5s "), Ok(Duration::from_millis(1500)));
/// assert!(parse_duration("3 seconds").is_err());
/// assert!(parse_duration("-1s").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = unit.trim();
    let malformed = || {
        format!(
            "`{text}` is not a duration: write a number and one of the units {}, as in `250ms` or `3s`",
            crate::ast::DURATION_UNITS
                .iter()
                .map(|u| format!("`{u}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    if number.is_empty() || number.parse::<f64>().is_err() {
        return Err(malformed());
    }
    let quantity = crate::ast::Quantity {
        number: number.to_owned(),
        unit: (!unit.is_empty()).then(|| unit.to_owned()),
        loc: Loc::External(0),
    };
    quantity.as_duration().map_err(|error| match error {
        crate::ast::QuantityError::Negative => {
            format!("`{text}` is negative: a duration is zero or more")
        }
        _ => malformed(),
    })
}

/// Formats a ratio as the shortest decimal: `0.5`, `0.25`.
#[must_use]
pub fn format_ratio(ratio: f64) -> String {
    trim_decimal(ratio)
}

fn trim_decimal(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `assets NAME { dir = "web/dist"; max_image = 200kb; ... }`: what a built front end may ship.
///
/// Every setting is optional: an absent one takes its `DEFAULT_*` value, located at the stanza.
/// Counts are per HTML document; sizes are per file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AssetsSpec {
    /// Its name.
    pub name: Located<String>,
    /// The folder of built documents, relative to the policy file's directory (the command line
    /// may name another).
    pub dir: Option<Located<String>>,
    /// The largest image file, in bytes.
    pub max_image: Located<u64>,
    /// From this size (bytes) an image is large: it needs `srcset`, and the first one on a page
    /// must not be lazy-loaded.
    pub large_image: Located<u64>,
    /// The largest font file, in bytes.
    pub max_font: Located<u64>,
    /// Font files one document may load (`@font-face` rules).
    pub max_font_files: Located<u32>,
    /// Weights of one font family one document may load.
    pub max_font_weights: Located<u32>,
    /// Elements with `fetchpriority="high"` in one document.
    pub max_high_priority: Located<u32>,
    /// `<link rel="preload">` elements in one document.
    pub max_preloads: Located<u32>,
    /// The stanza.
    pub loc: Loc,
}

impl AssetsSpec {
    /// 200 KiB: an image above it is oversized.
    pub const DEFAULT_MAX_IMAGE: u64 = 200 * 1024;
    /// 50 KiB: an image from this size is large.
    pub const DEFAULT_LARGE_IMAGE: u64 = 50 * 1024;
    /// 100 KiB: a font above it is oversized.
    pub const DEFAULT_MAX_FONT: u64 = 100 * 1024;
    /// Four font files per document.
    pub const DEFAULT_MAX_FONT_FILES: u32 = 4;
    /// Three weights per family.
    pub const DEFAULT_MAX_FONT_WEIGHTS: u32 = 3;
    /// Two high-priority elements per document.
    pub const DEFAULT_MAX_HIGH_PRIORITY: u32 = 2;
    /// Three preloads per document.
    pub const DEFAULT_MAX_PRELOADS: u32 = 3;

    /// An `assets` stanza with every setting at its default, located at `loc`.
    #[must_use]
    pub fn new(name: Located<String>, loc: Loc) -> Self {
        AssetsSpec {
            name,
            dir: None,
            max_image: Located::new(Self::DEFAULT_MAX_IMAGE, loc),
            large_image: Located::new(Self::DEFAULT_LARGE_IMAGE, loc),
            max_font: Located::new(Self::DEFAULT_MAX_FONT, loc),
            max_font_files: Located::new(Self::DEFAULT_MAX_FONT_FILES, loc),
            max_font_weights: Located::new(Self::DEFAULT_MAX_FONT_WEIGHTS, loc),
            max_high_priority: Located::new(Self::DEFAULT_MAX_HIGH_PRIORITY, loc),
            max_preloads: Located::new(Self::DEFAULT_MAX_PRELOADS, loc),
            loc,
        }
    }
}

impl Default for AssetsSpec {
    /// The defaults, for auditing a folder without a policy file: named `default`, at
    /// [`Loc::External(0)`](Loc::External).
    fn default() -> Self {
        let loc = Loc::External(0);
        AssetsSpec::new(Located::new("default".to_owned(), loc), loc)
    }
}

impl Named for AssetsSpec {
    const KIND: &'static str = "assets";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_format_as_written() {
        for (duration, text) in [
            (Duration::from_secs(3), "3s"),
            (Duration::from_millis(200), "200ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(120), "2m"),
            (Duration::from_secs(7200), "2h"),
            (Duration::from_micros(500), "0.5ms"),
            (Duration::ZERO, "0s"),
        ] {
            assert_eq!(format_duration(duration), text);
        }
    }

    #[test]
    fn full_jitter_ceiling_doubles_up_to_the_cap() {
        let backoff = Backoff::FullJitter {
            base: Duration::from_millis(50),
            cap: Duration::from_millis(300),
        };
        let delays: Vec<_> = (1..=5)
            .map(|k| backoff.max_delay_after(k).as_millis())
            .collect();
        assert_eq!(delays, [50, 100, 200, 300, 300]);
    }
}
