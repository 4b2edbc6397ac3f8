//! The model: what a policy says, as plain data.
//!
//! Both front ends lower into a [`Spec`]: `.policy` files through the lowering of each stanza,
//! attribute macros by building the items here with [`Loc::External`] locations. The one
//! validator ([`crate::validate()`]) checks it; the macros expand from it, and `policy explain`
//! and `policy gate` read it.
//!
//! This module holds the whole policy, the resilience mechanisms and the operation; the
//! build-time stanzas (`assets`, `locality`, `ceilings`, `quarantine`) are in `delivery`, and
//! re-exported here.
//!
//! Items are `#[non_exhaustive]` so that fields can be added without breaking the front ends:
//! build them with their `new` constructor and set the optional fields afterwards.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use crate::diagnostic::{Diagnostic, Kind};
use crate::source::{Loc, Located};

/// The work classes and the rate limiter's failure modes are words the runtime shares: they are
/// defined once, in `velocity-policy-model`.
pub use velocity_policy_model::{FailMode, WorkClass, queue_defaults};

/// Each mechanism's settings, described once in `velocity-policy-model`: the spec wraps them with the
/// locations they were written at.
pub use velocity_policy_model::{
    AdaptiveLimit, AllowanceConfig, Backoff, BreakerConfig, BulkheadConfig, DeadlineConfig,
    HedgeConfig, HedgeDelay, OpenAfter, RateLimitConfig, RetryConfig, Sharing, SheddingConfig,
};

/// A mechanism's optional numbers are rows of a table beside its configuration
/// ([`BreakerConfig::SETTINGS`], ...): the lowering, the attributes, the expansion and the
/// overrides read them through [`MechanismSpec`].
pub use velocity_policy_model::{Number, Range, Setting, Unit};

mod delivery;

pub use delivery::{
    Amount, AssetsSpec, Ceiling, CeilingsSpec, Compression, HopKind, HopSpec, LocalitySpec, Metric,
    QuarantineSpec, WebMetric,
};

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
    /// Hedging policies by name.
    pub hedges: Items<HedgeSpec>,
    /// Load-shedding thresholds, if declared (otherwise [`SheddingSpec::DEFAULT_DEFERRED`] and
    /// [`SheddingSpec::DEFAULT_BACKGROUND`] apply).
    pub shedding: Option<SheddingSpec>,
    /// Rate limits by name.
    pub ratelimits: Items<RatelimitSpec>,
    /// Durable queues by name (`queue NAME { ... }`): the numbers of the queue an operation's
    /// `queue = NAME` enqueues on. Optional: a queue no stanza declares runs with the
    /// runtime's defaults.
    pub queues: Items<QueueSpec>,
    /// Fault injection for drills by name (`chaos NAME { ... }`): what an operation's
    /// `chaos = NAME` injects when the runtime's `chaos` feature is on.
    pub chaos: Items<ChaosSpec>,
    /// Operations by name.
    pub operations: Items<OperationSpec>,
    /// The calls a request makes to other services, if declared.
    pub locality: Option<LocalitySpec>,
    /// Size and count ceilings by name, for `policy gate`.
    pub ceilings: Items<CeilingsSpec>,
    /// Quarantined heavy crates by crate name, for `policy gate`.
    pub quarantines: Items<QuarantineSpec>,
    /// Asset delivery ceilings by name, one per front end (`policy assets` audits a folder
    /// against one of them).
    pub assets: Items<AssetsSpec>,
    /// How far run-time overrides may move compiled numbers, where the default envelope (a
    /// quarter to four times the compiled value) is widened: `envelope { ... }`.
    pub envelopes: Vec<EnvelopeSpec>,
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

    /// The request's minimum budget, if one is declared: a request arriving with less left is
    /// answered at once, before any work.
    #[must_use]
    pub fn request_min_budget(&self) -> Option<Duration> {
        self.request
            .as_ref()
            .and_then(|request| request.min_budget.as_ref())
            .map(|min_budget| min_budget.value)
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
            WorkClass::Critical => self
                .request
                .as_ref()
                .and_then(|request| request.deadline.as_ref()),
            WorkClass::Deferred | WorkClass::Background => None,
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

    /// The operation's deadline settings as the runtime takes them: the
    /// [governing deadline](Spec::governing_deadline) ([`DeadlineConfig::MAX_BUDGET`] when
    /// none is written) and its `min_budget` (zero when not written).
    #[must_use]
    pub fn deadline_config(&self, operation: &OperationSpec) -> DeadlineConfig {
        let config = self
            .effective_deadline(operation)
            .map_or(DeadlineConfig::DEFAULT, DeadlineConfig::new);
        match &operation.min_budget {
            Some(min_budget) => config.with_min_budget(min_budget.value),
            None => config,
        }
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

/// Where each of a mechanism's table settings ([`Setting`]) was written, by key. A setting
/// not written is absent: its default is in force.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    at: Vec<(&'static str, Loc)>,
}

impl Written {
    /// Where `key` was written; `None` when it was not.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<Loc> {
        self.at
            .iter()
            .find(|(written, _)| *written == key)
            .map(|(_, loc)| *loc)
    }

    /// Records `key` as written at `loc`.
    fn insert(&mut self, key: &'static str, loc: Loc) {
        match self.at.iter_mut().find(|(written, _)| *written == key) {
            Some(slot) => slot.1 = loc,
            None => self.at.push((key, loc)),
        }
    }
}

/// A mechanism's spec: its model configuration, whose optional numbers are the rows of
/// [`SETTINGS`](Self::SETTINGS), and where each of them was written. Both front ends set
/// them through [`set_setting`](Self::set_setting); the expansion emits those written.
pub trait MechanismSpec {
    /// The model's configuration.
    type Config: 'static;
    /// Its table (`BreakerConfig::SETTINGS`, ...).
    const SETTINGS: &'static [Setting<Self::Config>];
    /// Its configuration.
    fn config(&self) -> &Self::Config;
    /// Where its table settings were written.
    fn written(&self) -> &Written;
    /// The stanza, where a setting not written (its default in force) is located.
    fn loc(&self) -> Loc;
    /// Both, to change them.
    fn parts_mut(&mut self) -> (&mut Self::Config, &mut Written);

    /// Sets the table setting `key` to `value` (as written: the validator checks the range),
    /// written there; `false`, and nothing changed, when the table has no such key or the
    /// value is of another unit.
    fn set_setting(&mut self, key: &str, value: Located<Number>) -> bool {
        let Some(setting) = Setting::find(Self::SETTINGS, key) else {
            return false;
        };
        let (config, written) = self.parts_mut();
        let set = setting.set(config, value.value);
        if set {
            written.insert(setting.key, value.loc);
        }
        set
    }

    /// The table setting `key` as written, and where; `None` when it was not written.
    fn setting(&self, key: &str) -> Option<Located<Number>> {
        let loc = self.written().get(key)?;
        let setting = Setting::find(Self::SETTINGS, key)?;
        Some(Located::new(setting.get(self.config())?, loc))
    }
}

/// `request { deadline = 10s; min_budget = 50ms }`: the budget every request starts with, and
/// the least one worth starting (a request that arrives with less left is answered at once).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RequestSpec {
    /// The request deadline.
    pub deadline: Option<Located<Duration>>,
    /// The least budget a request is started with (the runtime's `DeadlineLayer::min_budget`).
    pub min_budget: Option<Located<Duration>>,
    /// The stanza.
    pub loc: Loc,
}

impl RequestSpec {
    /// A request stanza with no settings yet.
    #[must_use]
    pub fn new(loc: Loc) -> Self {
        RequestSpec {
            deadline: None,
            min_budget: None,
            loc,
        }
    }
}

/// `breaker NAME { open_after = ...; cooldown = ...; shared; max_retry_after = 5m; probation = 5s }`: the
/// model's [`BreakerConfig`] (where each setting and its default is described), and where each
/// setting was written.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BreakerSpec {
    /// Its name.
    pub name: Located<String>,
    /// Its settings, as the runtime takes them (as written: the validator checks the ranges).
    pub config: BreakerConfig,
    /// Where each setting was written.
    pub at: BreakerLocs,
    /// The stanza.
    pub loc: Loc,
}

/// Where each setting of a [`BreakerSpec`] was written.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BreakerLocs {
    /// `open_after`.
    pub open_after: Loc,
    /// `cooldown`.
    pub cooldown: Loc,
    /// `shared`, or the stanza when it is not written.
    pub sharing: Loc,
    /// Each setting of [`BreakerConfig::SETTINGS`] written (`max_retry_after`, `probation`).
    pub settings: Written,
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
            config: BreakerConfig::new(open_after.value, cooldown.value),
            at: BreakerLocs {
                open_after: open_after.loc,
                cooldown: cooldown.loc,
                sharing: loc,
                settings: Written::default(),
            },
            loc,
        }
    }

    /// Shares `sharing`, written there.
    pub fn set_sharing(&mut self, sharing: Located<Sharing>) {
        self.config.sharing = sharing.value;
        self.at.sharing = sharing.loc;
    }

    /// When it opens, and where that was written.
    #[must_use]
    pub fn open_after(&self) -> Located<OpenAfter> {
        Located::new(self.config.open_after, self.at.open_after)
    }

    /// How long it stays open, and where that was written.
    #[must_use]
    pub fn cooldown(&self) -> Located<Duration> {
        Located::new(self.config.cooldown, self.at.cooldown)
    }

    /// What it shares, and where that was written (the stanza, when not written).
    #[must_use]
    pub fn sharing(&self) -> Located<Sharing> {
        Located::new(self.config.sharing, self.at.sharing)
    }

    /// The longest `Retry-After` it honours, and where that was written; `None` when it was
    /// not written ([`BreakerConfig::DEFAULT_MAX_RETRY_AFTER`] applies).
    #[must_use]
    pub fn max_retry_after(&self) -> Option<Located<Duration>> {
        self.at
            .settings
            .get("max_retry_after")
            .map(|loc| Located::new(self.config.max_retry_after, loc))
    }
}

impl MechanismSpec for BreakerSpec {
    type Config = BreakerConfig;
    const SETTINGS: &'static [Setting<BreakerConfig>] = BreakerConfig::SETTINGS;
    fn config(&self) -> &BreakerConfig {
        &self.config
    }
    fn written(&self) -> &Written {
        &self.at.settings
    }
    fn loc(&self) -> Loc {
        self.loc
    }
    fn parts_mut(&mut self) -> (&mut BreakerConfig, &mut Written) {
        (&mut self.config, &mut self.at.settings)
    }
}

impl Named for BreakerSpec {
    const KIND: &'static str = "breaker";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// `bulkhead NAME { max_concurrent = 4; max_queued = 8 }`: bounds one instance.
///
/// Or `bulkhead NAME { adaptive(min = 4, max = 64); max_queued = 8 }`: the slot count follows
/// the dependency's measured latency between the bounds (the runtime's
/// `velocity_policy_runtime::bulkhead::adaptive`).
///
/// The model's [`BulkheadConfig`] (where each setting and its default is described), and where
/// each setting was written.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BulkheadSpec {
    /// Its name.
    pub name: Located<String>,
    /// Its settings, as the runtime takes them (as written: the validator checks the ranges).
    /// An adaptive bulkhead's `max_concurrent` is its `max`, unless `max_concurrent` was set
    /// too, which `policy::adaptive-with-fixed-limit` refuses.
    pub config: BulkheadConfig,
    /// Where each setting was written.
    pub at: BulkheadLocs,
    /// The stanza.
    pub loc: Loc,
}

/// Where each setting of a [`BulkheadSpec`] was written.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BulkheadLocs {
    /// `max_concurrent` (an adaptive bulkhead's `max`, unless it was written).
    pub max_concurrent: Loc,
    /// Each setting of [`BulkheadConfig::SETTINGS`] written (`max_queued`).
    pub settings: Written,
    /// `adaptive(min = .., max = ..)`: the bound `min`, the bound `max` and the setting.
    pub adaptive: Option<(Loc, Loc, Loc)>,
}

impl BulkheadSpec {
    /// A bulkhead with no queue.
    #[must_use]
    pub fn new(name: Located<String>, max_concurrent: Located<u32>, loc: Loc) -> Self {
        let mut config = BulkheadConfig::DEFAULT;
        config.max_concurrent = max_concurrent.value;
        BulkheadSpec {
            name,
            config,
            at: BulkheadLocs {
                max_concurrent: max_concurrent.loc,
                settings: Written::default(),
                adaptive: None,
            },
            loc,
        }
    }

    /// An adaptive bulkhead with no queue: at most `adaptive.max` slots.
    #[must_use]
    pub fn adaptive(name: Located<String>, adaptive: AdaptiveSpec, loc: Loc) -> Self {
        let mut limit = AdaptiveLimit::new(1, 1);
        limit.min = adaptive.min.value;
        limit.max = adaptive.max.value;
        let mut bulkhead = BulkheadSpec::new(name, adaptive.max.clone(), loc);
        bulkhead.config.adaptive = Some(limit);
        bulkhead.at.adaptive = Some((adaptive.min.loc, adaptive.max.loc, adaptive.loc));
        bulkhead
    }

    /// Sets `max_concurrent`, written there.
    pub fn set_max_concurrent(&mut self, max_concurrent: Located<u32>) {
        self.config.max_concurrent = max_concurrent.value;
        self.at.max_concurrent = max_concurrent.loc;
    }

    /// Its slots, and where they were written.
    #[must_use]
    pub fn max_concurrent(&self) -> Located<u32> {
        Located::new(self.config.max_concurrent, self.at.max_concurrent)
    }

    /// Its queue places, and where they were written (the stanza, when not written).
    #[must_use]
    pub fn max_queued(&self) -> Located<u32> {
        Located::new(
            self.config.max_queued,
            self.at.settings.get("max_queued").unwrap_or(self.loc),
        )
    }

    /// Its adaptive bounds as written, when it has them.
    #[must_use]
    pub fn adaptive_bounds(&self) -> Option<AdaptiveSpec> {
        let limit = self.config.adaptive?;
        let (min, max, loc) = self.at.adaptive?;
        Some(AdaptiveSpec::new(
            Located::new(limit.min, min),
            Located::new(limit.max, max),
            loc,
        ))
    }

    /// Whether `max_concurrent` was written beside `adaptive(...)`.
    #[must_use]
    pub fn fixed_and_adaptive(&self) -> bool {
        self.at
            .adaptive
            .is_some_and(|(_, max, _)| max != self.at.max_concurrent)
    }
}

/// `adaptive(min = 4, max = 64)` as written: a bulkhead's slot count follows the dependency's
/// latency, never below `min` nor above `max`, starting at `min`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AdaptiveSpec {
    /// The fewest slots (at least 1).
    pub min: Located<u32>,
    /// The most slots (at least `min`).
    pub max: Located<u32>,
    /// The setting.
    pub loc: Loc,
}

impl AdaptiveSpec {
    /// Bounds, as written.
    #[must_use]
    pub fn new(min: Located<u32>, max: Located<u32>, loc: Loc) -> Self {
        AdaptiveSpec { min, max, loc }
    }
}

impl MechanismSpec for BulkheadSpec {
    type Config = BulkheadConfig;
    const SETTINGS: &'static [Setting<BulkheadConfig>] = BulkheadConfig::SETTINGS;
    fn config(&self) -> &BulkheadConfig {
        &self.config
    }
    fn written(&self) -> &Written {
        &self.at.settings
    }
    fn loc(&self) -> Loc {
        self.loc
    }
    fn parts_mut(&mut self) -> (&mut BulkheadConfig, &mut Written) {
        (&mut self.config, &mut self.at.settings)
    }
}

impl Named for BulkheadSpec {
    const KIND: &'static str = "bulkhead";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// `queue NAME { max_len = 10000; visibility_timeout = 30s; max_deliveries = 5 }`: the numbers
/// of one durable queue (background work on a Redis stream). Every setting is optional; what is
/// not set keeps the runtime's default (10,000 tasks, 30 s, 5 deliveries, a 10 s task deadline,
/// 4 tasks at once per instance). The attribute expansion hands them to the queue's and the
/// worker's builders (`fn_name::queue_settings()`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QueueSpec {
    /// Its name (the `queue = NAME` of its operations).
    pub name: Located<String>,
    /// Unfinished tasks the stream may hold; an enqueue past it is refused (at least 1).
    pub max_len: Option<Located<u32>>,
    /// How long a delivered task may stay unacknowledged before another worker claims it.
    pub visibility_timeout: Option<Located<Duration>>,
    /// Deliveries after which an unfinished task goes to the dead-letter stream (at least 1).
    pub max_deliveries: Option<Located<u32>>,
    /// The bound on one delivery's run (at most four fifths of the visibility timeout).
    pub task_deadline: Option<Located<Duration>>,
    /// Tasks one instance's worker runs at once (at least 1).
    pub concurrency: Option<Located<u32>>,
    /// The stanza.
    pub loc: Loc,
}

impl QueueSpec {
    /// A queue with the runtime's defaults.
    #[must_use]
    pub fn new(name: Located<String>, loc: Loc) -> Self {
        QueueSpec {
            name,
            max_len: None,
            visibility_timeout: None,
            max_deliveries: None,
            task_deadline: None,
            concurrency: None,
            loc,
        }
    }
}

impl QueueSpec {
    /// The bound in force: declared, or the runtime's default.
    #[must_use]
    pub fn effective_max_len(&self) -> u32 {
        self.max_len
            .as_ref()
            .map_or(queue_defaults::MAX_LEN, |m| m.value)
    }

    /// The visibility timeout in force: declared, or the runtime's default.
    #[must_use]
    pub fn effective_visibility_timeout(&self) -> Duration {
        self.visibility_timeout
            .as_ref()
            .map_or(queue_defaults::VISIBILITY_TIMEOUT, |v| v.value)
    }

    /// The deliveries in force: declared, or the runtime's default.
    #[must_use]
    pub fn effective_max_deliveries(&self) -> u32 {
        self.max_deliveries
            .as_ref()
            .map_or(queue_defaults::MAX_DELIVERIES, |m| m.value)
    }

    /// The task deadline in force: declared (or the runtime's default), at most four fifths of
    /// the visibility timeout, as the worker lowers it.
    #[must_use]
    pub fn effective_task_deadline(&self) -> Duration {
        self.task_deadline
            .as_ref()
            .map_or(queue_defaults::TASK_DEADLINE, |t| t.value)
            .min(queue_defaults::task_deadline_bound(
                self.effective_visibility_timeout(),
            ))
    }

    /// The tasks one instance runs at once: declared, or the runtime's default.
    #[must_use]
    pub fn effective_concurrency(&self) -> u32 {
        self.concurrency
            .as_ref()
            .map_or(queue_defaults::CONCURRENCY, |c| c.value)
    }
}

impl Named for QueueSpec {
    const KIND: &'static str = "queue";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// `retry NAME { attempts = 3; backoff = full_jitter(...); attempt_timeout = 2s; allowance = ... }`:
/// the model's [`RetryConfig`] (where each setting and its default is described), and where
/// each setting was written.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RetrySpec {
    /// Its name.
    pub name: Located<String>,
    /// Its settings, as the runtime takes them (as written: the validator checks the ranges).
    pub config: RetryConfig,
    /// Where each setting was written.
    pub at: RetryLocs,
    /// The stanza.
    pub loc: Loc,
}

/// Where each setting of a [`RetrySpec`] was written.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RetryLocs {
    /// `attempts`.
    pub attempts: Loc,
    /// `backoff`.
    pub backoff: Loc,
    /// Each setting of [`RetryConfig::SETTINGS`] written (`attempt_timeout`).
    pub settings: Written,
    /// `allowance`; `None` when not written (the runtime's default allowance).
    pub allowance: Option<Loc>,
}

impl RetrySpec {
    /// A retry policy with no attempt timeout and no allowance of its own.
    #[must_use]
    pub fn new(
        name: Located<String>,
        attempts: Located<u32>,
        backoff: Located<Backoff>,
        loc: Loc,
    ) -> Self {
        let mut config = RetryConfig::DEFAULT.with_backoff(backoff.value);
        config.attempts = attempts.value;
        RetrySpec {
            name,
            config,
            at: RetryLocs {
                attempts: attempts.loc,
                backoff: backoff.loc,
                settings: Written::default(),
                allowance: None,
            },
            loc,
        }
    }

    /// Draws its retries from an allowance of its own, `allowance`, written there.
    pub fn set_allowance(&mut self, allowance: Located<AllowanceConfig>) {
        self.config.allowance = Some(allowance.value);
        self.at.allowance = Some(allowance.loc);
    }

    /// Its attempts, and where they were written.
    #[must_use]
    pub fn attempts(&self) -> Located<u32> {
        Located::new(self.config.attempts, self.at.attempts)
    }

    /// Its backoff, and where it was written.
    #[must_use]
    pub fn backoff(&self) -> Located<Backoff> {
        Located::new(self.config.backoff, self.at.backoff)
    }

    /// Its attempt timeout, and where it was written; `None` when not written.
    #[must_use]
    pub fn attempt_timeout(&self) -> Option<Located<Duration>> {
        let timeout = self.config.attempt_timeout?;
        Some(Located::new(
            timeout,
            self.at.settings.get("attempt_timeout")?,
        ))
    }

    /// Its own allowance, and where it was written; `None` when not written.
    #[must_use]
    pub fn allowance(&self) -> Option<Located<AllowanceConfig>> {
        let allowance = self.config.allowance?;
        Some(Located::new(allowance, self.at.allowance?))
    }
}

/// An allowance as written: `ratio` of recent calls plus `floor_per_second`, over the
/// runtime's window, with the numbers kept as written (the validator checks the ranges).
#[must_use]
pub(crate) fn allowance_as_written(ratio: f64, floor_per_second: u32) -> AllowanceConfig {
    let mut allowance = AllowanceConfig::DEFAULT;
    allowance.ratio = ratio;
    allowance.floor_per_second = floor_per_second;
    allowance
}

/// `hedge NAME { after = p95; max = 2; allowance = 10% + 5/s }`: the model's [`HedgeConfig`]
/// (where each setting and its default is described), and where each setting was written.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HedgeSpec {
    /// Its name.
    pub name: Located<String>,
    /// Its settings, as the runtime takes them (as written: the validator checks the ranges).
    pub config: HedgeConfig,
    /// Where each setting was written.
    pub at: HedgeLocs,
    /// The stanza.
    pub loc: Loc,
}

/// Where each setting of a [`HedgeSpec`] was written.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HedgeLocs {
    /// `after`.
    pub after: Loc,
    /// Each setting of [`HedgeConfig::SETTINGS`] written (`max`).
    pub settings: Written,
    /// `allowance`; `None` when not written.
    pub allowance: Option<Loc>,
}

impl HedgeSpec {
    /// The most attempts in flight a hedge may have, the first included (the runtime's bound,
    /// [`HedgeConfig::MAX_IN_FLIGHT`]).
    pub const MAX_IN_FLIGHT: u32 = HedgeConfig::MAX_IN_FLIGHT;

    /// A hedging policy with the default settings of [`HedgeConfig::SETTINGS`] (set them
    /// with [`MechanismSpec::set_setting`]) and no allowance of its own.
    #[must_use]
    pub fn new(name: Located<String>, after: Located<HedgeDelay>, loc: Loc) -> Self {
        HedgeSpec {
            name,
            config: HedgeConfig::new(after.value),
            at: HedgeLocs {
                after: after.loc,
                settings: Written::default(),
                allowance: None,
            },
            loc,
        }
    }

    /// Draws its hedges from an allowance of its own, `allowance`, written there.
    pub fn set_allowance(&mut self, allowance: Located<AllowanceConfig>) {
        self.config.allowance = Some(allowance.value);
        self.at.allowance = Some(allowance.loc);
    }

    /// When a hedge starts, and where that was written.
    #[must_use]
    pub fn after(&self) -> Located<HedgeDelay> {
        Located::new(self.config.after, self.at.after)
    }

    /// Attempts in flight at most, and where that was written (the stanza, when not written).
    #[must_use]
    pub fn max(&self) -> Located<u32> {
        Located::new(
            self.config.max,
            self.at.settings.get("max").unwrap_or(self.loc),
        )
    }

    /// Its own allowance, and where it was written; `None` when not written.
    #[must_use]
    pub fn allowance(&self) -> Option<Located<AllowanceConfig>> {
        let allowance = self.config.allowance?;
        Some(Located::new(allowance, self.at.allowance?))
    }
}

impl MechanismSpec for HedgeSpec {
    type Config = HedgeConfig;
    const SETTINGS: &'static [Setting<HedgeConfig>] = HedgeConfig::SETTINGS;
    fn config(&self) -> &HedgeConfig {
        &self.config
    }
    fn written(&self) -> &Written {
        &self.at.settings
    }
    fn loc(&self) -> Loc {
        self.loc
    }
    fn parts_mut(&mut self) -> (&mut HedgeConfig, &mut Written) {
        (&mut self.config, &mut self.at.settings)
    }
}

impl Named for HedgeSpec {
    const KIND: &'static str = "hedge";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// How long an injected latency lasts.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum ChaosLatency {
    /// `latency = 300ms at 10%`.
    Fixed(Duration),
    /// `latency = uniform(200ms, 800ms) at 10%`.
    Uniform {
        /// The shortest.
        min: Duration,
        /// The longest.
        max: Duration,
    },
    /// `latency = lognormal(p50 = 100ms, p99 = 2s) at 10%`: a real dependency's long tail.
    LogNormal {
        /// The median.
        p50: Duration,
        /// The 99th percentile.
        p99: Duration,
    },
}

/// One kind of injected fault.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum ChaosFaultKind {
    /// `latency = ... at R`.
    Latency(ChaosLatency),
    /// `error at R`: the function's own error, built by the function registered at run time.
    Error,
    /// `refuse at R`: a refusal marked injected.
    Refuse,
    /// `status 429 retry_after 5s at R`: the dependency told us to back off.
    TooManyRequests {
        /// The `Retry-After` it answers with.
        retry_after: Duration,
    },
}

impl ChaosFaultKind {
    /// `latency`, `error`, `refuse` or `status 429`: the statement that declares it.
    #[must_use]
    pub fn keyword(&self) -> &'static str {
        match self {
            Self::Latency(_) => "latency",
            Self::Error => "error",
            Self::Refuse => "refuse",
            Self::TooManyRequests { .. } => "status 429",
        }
    }
}

/// One fault of a chaos stanza, at its rate.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ChaosFault {
    /// What is injected.
    pub kind: ChaosFaultKind,
    /// The share of attempts it is injected into, 0 to 1.
    pub rate: Located<f64>,
    /// The statement.
    pub loc: Loc,
}

impl ChaosFault {
    /// `kind` at `rate`, declared at `loc`.
    #[must_use]
    pub fn new(kind: ChaosFaultKind, rate: Located<f64>, loc: Loc) -> Self {
        ChaosFault { kind, rate, loc }
    }
}

/// `chaos NAME { latency = uniform(200ms, 800ms) at 10%; error at 5%; refuse at 1%;
/// status 429 retry_after 5s at 2%; during = 10m to 40m; instances = 30% }`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ChaosSpec {
    /// Its name.
    pub name: Located<String>,
    /// Its faults, at most one of each kind.
    pub faults: Vec<ChaosFault>,
    /// Only from, until this long after the drill is first used (its registry entry is made).
    pub during: Option<Located<(Duration, Duration)>>,
    /// Only on this share of the instances (0 to 1).
    pub instances: Option<Located<f64>>,
    /// Whether it starts on (`enabled = false` declares it off, to switch on at run time).
    pub enabled: Option<Located<bool>>,
    /// The stanza.
    pub loc: Loc,
}

impl ChaosSpec {
    /// A chaos with no faults, on, always, everywhere.
    #[must_use]
    pub fn new(name: Located<String>, loc: Loc) -> Self {
        ChaosSpec {
            name,
            faults: Vec::new(),
            during: None,
            instances: None,
            enabled: None,
            loc,
        }
    }
}

impl Named for ChaosSpec {
    const KIND: &'static str = "chaos";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

impl MechanismSpec for RetrySpec {
    type Config = RetryConfig;
    const SETTINGS: &'static [Setting<RetryConfig>] = RetryConfig::SETTINGS;
    fn config(&self) -> &RetryConfig {
        &self.config
    }
    fn written(&self) -> &Written {
        &self.at.settings
    }
    fn loc(&self) -> Loc {
        self.loc
    }
    fn parts_mut(&mut self) -> (&mut RetryConfig, &mut Written) {
        (&mut self.config, &mut self.at.settings)
    }
}

impl Named for RetrySpec {
    const KIND: &'static str = "retry";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// What an override may set, per stanza: numbers only, and only those the runtime can change
/// under a running service. A phrase's key is its first word (`deferred at load 0.5` is
/// `deferred`). The request's deadline belongs to the `DeadlineLayer` the service builds, and a
/// rate limit's rate and a retry's allowance to state built once; they stay compiled.
///
/// A mechanism's keys are those with structure, here, then the rows of its table (`breaker`:
/// [`BreakerConfig::SETTINGS`], ...) marked [`overridable`](Setting::overridable).
#[must_use]
pub fn overridable() -> Vec<(&'static str, Vec<&'static str>)> {
    fn live<C>(table: &[Setting<C>]) -> impl Iterator<Item = &'static str> + '_ {
        table
            .iter()
            .filter(|setting| setting.overridable)
            .map(|setting| setting.key)
    }
    OVERRIDABLE_BY_HAND
        .iter()
        .map(|&(keyword, keys)| {
            let mut keys = keys.to_vec();
            match keyword {
                "breaker" => keys.extend(live(BreakerConfig::SETTINGS)),
                "bulkhead" => keys.extend(live(BulkheadConfig::SETTINGS)),
                "retry" => keys.extend(live(RetryConfig::SETTINGS)),
                _ => {}
            }
            (keyword, keys)
        })
        .collect()
}

/// The keys of [`overridable`] the tables do not give.
const OVERRIDABLE_BY_HAND: &[(&str, &[&str])] = &[
    ("breaker", &["open_after", "cooldown"]),
    ("bulkhead", &["max_concurrent"]),
    ("retry", &["attempts", "backoff"]),
    ("shedding", &["deferred", "background"]),
    ("operation", &["deadline", "min_budget", "shed_at"]),
    // A drill on or off per environment, and its faults' rates (the runtime's `chaos`).
    (
        "chaos",
        &[
            "enabled",
            "latency",
            "error",
            "refuse",
            "status",
            "instances",
        ],
    ),
];

/// One line of an `envelope { ... }` stanza: how far an override (a file of the running
/// environment, or the fleet's set) may move the numbers of one stanza, or one of its settings,
/// as shares of the compiled value. `operation search deadline within 10% to 400%`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EnvelopeSpec {
    /// The stanza's keyword: `breaker`, `bulkhead`, `retry`, `shedding` or `operation`.
    pub keyword: Located<String>,
    /// The stanza's name (none for `shedding`).
    pub name: Option<Located<String>>,
    /// The setting, or every overridable number of the stanza when `None`.
    pub key: Option<Located<String>>,
    /// The smallest share of the compiled value an override may set (at most 1).
    pub low: f64,
    /// The largest share of the compiled value an override may set (at least 1).
    pub high: f64,
    /// The line.
    pub loc: Loc,
}

impl EnvelopeSpec {
    /// An override may set a number from a quarter of the compiled value...
    pub const DEFAULT_LOW: f64 = 0.25;
    /// ...to four times it.
    pub const DEFAULT_HIGH: f64 = 4.0;
    /// Settings written by hand (not rows of a table) whose override may never exceed the
    /// compiled value by default: what keeps a breaker open (a larger one disables the
    /// dependency longer). A row of a table says so itself,
    /// [`override_at_most_compiled`](Setting::override_at_most_compiled) (`max_retry_after`).
    pub const AT_MOST_COMPILED: &'static [(&'static str, &'static str)] =
        &[("breaker", "cooldown")];

    /// Whether an override of `key` in a `keyword` stanza may never exceed the compiled value by
    /// default: [`AT_MOST_COMPILED`](Self::AT_MOST_COMPILED), or a row of the mechanism's
    /// table that says so.
    #[must_use]
    pub fn at_most_compiled(keyword: &str, key: &str) -> bool {
        fn row<C>(table: &[Setting<C>], key: &str) -> bool {
            Setting::find(table, key).is_some_and(|setting| setting.override_at_most_compiled)
        }
        Self::AT_MOST_COMPILED.contains(&(keyword, key))
            || match keyword {
                "breaker" => row(BreakerConfig::SETTINGS, key),
                "bulkhead" => row(BulkheadConfig::SETTINGS, key),
                "retry" => row(RetryConfig::SETTINGS, key),
                "hedge" => row(HedgeConfig::SETTINGS, key),
                _ => false,
            }
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
    /// Deferred work is shed from half load by default ([`SheddingConfig::DEFAULT`]).
    pub const DEFAULT_DEFERRED: f64 = SheddingConfig::DEFAULT.deferred;
    /// Background work is shed from a quarter load by default ([`SheddingConfig::DEFAULT`]).
    pub const DEFAULT_BACKGROUND: f64 = SheddingConfig::DEFAULT.background;

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

/// `ratelimit NAME { 100 per 1m; on_timeout = open; on_error = local; local_rate = 20 per 1m }`:
/// the model's [`RateLimitConfig`] (where each setting and its default is described), and where
/// each setting was written.
///
/// In process it admits the rate on each instance; with a fleet store it admits the rate
/// across the fleet, and `on_timeout` and `on_error` decide when the store is slow or down
/// (`local` when not written, which a limiter guarding critical work may not leave implicit:
/// `policy::ratelimit-fail-mode-unset`, which reads whether they were written from
/// [`RatelimitLocs`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RatelimitSpec {
    /// Its name.
    pub name: Located<String>,
    /// Its settings, as the runtime takes them (as written: the validator checks the ranges).
    pub config: RateLimitConfig,
    /// Where each setting was written, and whether the optional ones were.
    pub at: RatelimitLocs,
    /// The stanza.
    pub loc: Loc,
}

/// Where each setting of a [`RatelimitSpec`] was written.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RatelimitLocs {
    /// The rate, `N per DURATION`.
    pub rate: Loc,
    /// `on_timeout`; `None` when not written (the default fail mode).
    pub on_timeout: Option<Loc>,
    /// `on_error`; `None` when not written (the default fail mode).
    pub on_error: Option<Loc>,
    /// `local_rate`; `None` when not written (the fleet's rate).
    pub local_rate: Option<Loc>,
}

impl RatelimitSpec {
    /// What a failure mode is when the stanza does not set it: this instance's own rate
    /// ([`RateLimitConfig::DEFAULT_FAIL_MODE`]).
    pub const DEFAULT_FAIL_MODE: FailMode = RateLimitConfig::DEFAULT_FAIL_MODE;

    /// A rate limit with neither failure mode chosen.
    #[must_use]
    pub fn new(name: Located<String>, rate: Located<Rate>, loc: Loc) -> Self {
        let mut config = RateLimitConfig::new(1, rate.value.per);
        config.limit = rate.value.count;
        RatelimitSpec {
            name,
            config,
            at: RatelimitLocs {
                rate: rate.loc,
                on_timeout: None,
                on_error: None,
                local_rate: None,
            },
            loc,
        }
    }

    /// Decides `mode` when its store is slow, written there.
    pub fn set_on_timeout(&mut self, mode: Located<FailMode>) {
        self.config.on_timeout = mode.value;
        self.at.on_timeout = Some(mode.loc);
    }

    /// Decides `mode` when its store is down, written there.
    pub fn set_on_error(&mut self, mode: Located<FailMode>) {
        self.config.on_error = mode.value;
        self.at.on_error = Some(mode.loc);
    }

    /// Enforces `rate` on this instance alone while its store fails, written there.
    pub fn set_local_rate(&mut self, rate: Located<Rate>) {
        self.config.local_rate = Some((rate.value.count, rate.value.per));
        self.at.local_rate = Some(rate.loc);
    }

    /// Calls allowed per period, and where that was written.
    #[must_use]
    pub fn rate(&self) -> Located<Rate> {
        Located::new(Rate::new(self.config.limit, self.config.per), self.at.rate)
    }

    /// What it decides when its store is slow, and where that was written; `None` when not
    /// written.
    #[must_use]
    pub fn on_timeout(&self) -> Option<Located<FailMode>> {
        Some(Located::new(self.config.on_timeout, self.at.on_timeout?))
    }

    /// What it decides when its store is down, and where that was written; `None` when not
    /// written.
    #[must_use]
    pub fn on_error(&self) -> Option<Located<FailMode>> {
        Some(Located::new(self.config.on_error, self.at.on_error?))
    }

    /// The rate this instance enforces alone while the store fails, for [`FailMode::Local`],
    /// and where it was written; `None` when not written (the fleet's rate).
    #[must_use]
    pub fn local_rate(&self) -> Option<Located<Rate>> {
        let (count, per) = self.config.local_rate?;
        Some(Located::new(Rate::new(count, per), self.at.local_rate?))
    }

    /// What it decides when its store is slow: `on_timeout`, or [`Self::DEFAULT_FAIL_MODE`].
    #[must_use]
    pub fn timeout_mode(&self) -> FailMode {
        self.config.on_timeout
    }

    /// What it decides when its store is down: `on_error`, or [`Self::DEFAULT_FAIL_MODE`].
    #[must_use]
    pub fn error_mode(&self) -> FailMode {
        self.config.on_error
    }
}

impl Named for RatelimitSpec {
    const KIND: &'static str = "ratelimit";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

/// `operation NAME: class, flags { breaker = ...; deadline = ...; ... }`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OperationSpec {
    /// Its name.
    pub name: Located<String>,
    /// Its work class.
    pub class: Located<WorkClass>,
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
    /// The hedging policy each attempt runs under, by name.
    pub hedge: Option<Located<String>>,
    /// The rate limit it is admitted by, by name.
    pub ratelimit: Option<Located<String>>,
    /// The chaos drill injected inside its attempts, by name (`chaos = search_drill`).
    pub chaos: Option<Located<String>>,
    /// Its deadline (clamped to the request's).
    pub deadline: Option<Located<Duration>>,
    /// The least remaining budget worth starting with.
    pub min_budget: Option<Located<Duration>>,
    /// What it usually costs, for the budget side of shedding.
    pub expected_cost: Option<Located<Duration>>,
    /// Its own load threshold for shedding, instead of its class's (deferred and background
    /// work only: critical work is never shed for load).
    pub shed_at: Option<Located<f64>>,
    /// The function that answers instead when the work is refused or its deadline passes.
    pub fallback: Option<Located<String>>,
    /// Where `fallback_on_failure` was written, if it was: the fallback also answers the
    /// work's own failures.
    pub fallback_on_failure: Option<Loc>,
    /// How long the last good result may be served when the work is refused, expires or fails
    /// (the facade's `stale` feature).
    pub stale_if_error: Option<Located<Duration>>,
    /// The longest one poll of the work may take before it is reported as blocking its
    /// worker.
    pub poll_budget: Option<Located<Duration>>,
    /// The pool its synchronous body runs on, when it is isolated CPU work (`#[isolate]`).
    pub isolate: Option<IsolateSpec>,
    /// The durable queue background work is enqueued on, by name (`queue = embeddings`): the
    /// application installs a queue of that name on its Redis store at startup, with its
    /// bound, visibility timeout and deliveries; until it does, the work runs on the
    /// in-process background pool.
    pub queue: Option<Located<String>>,
    /// The stanza or attribute.
    pub loc: Loc,
}

impl OperationSpec {
    /// An operation with no flags, mechanisms or deadline.
    #[must_use]
    pub fn new(name: Located<String>, class: Located<WorkClass>, loc: Loc) -> Self {
        OperationSpec {
            name,
            class,
            idempotent: None,
            durable: None,
            breaker: None,
            bulkhead: None,
            retry: None,
            hedge: None,
            ratelimit: None,
            chaos: None,
            deadline: None,
            min_budget: None,
            expected_cost: None,
            shed_at: None,
            fallback: None,
            fallback_on_failure: None,
            stale_if_error: None,
            poll_budget: None,
            isolate: None,
            queue: None,
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

/// Where isolated CPU work runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolKind {
    /// `blocking`: tokio's blocking threads, bounded by the pool's slots (the default).
    #[default]
    Blocking,
    /// `rayon`: a dedicated pool, one thread per slot (the facade's `rayon` feature).
    Rayon,
}

impl PoolKind {
    /// Every kind.
    pub const ALL: [PoolKind; 2] = [Self::Blocking, Self::Rayon];

    /// Its name in the language.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Blocking => "blocking",
            Self::Rayon => "rayon",
        }
    }

    /// The kind written `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }
}

impl fmt::Display for PoolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `isolate = blocking(max_concurrent = 2, max_queued = 4)`: the operation's synchronous body
/// runs on a bounded pool of its own, a bulkhead for CPU, waited for at most until the current
/// deadline.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IsolateSpec {
    /// Which pool.
    pub pool: Located<PoolKind>,
    /// Work that may run at once (the number of CPUs when not set).
    pub max_concurrent: Option<Located<u32>>,
    /// Work that may wait for a slot (none when not set).
    pub max_queued: Option<Located<u32>>,
    /// The setting.
    pub loc: Loc,
}

impl IsolateSpec {
    /// Isolation on `pool`, with the pool's default slots and no queue.
    #[must_use]
    pub fn new(pool: Located<PoolKind>, loc: Loc) -> Self {
        IsolateSpec {
            pool,
            max_concurrent: None,
            max_queued: None,
            loc,
        }
    }
}

impl Named for OperationSpec {
    const KIND: &'static str = "operation";
    fn name(&self) -> &Located<String> {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
