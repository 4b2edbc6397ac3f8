//! Fleet behaviour without Redis: an in-memory shared breaker store.
//!
//! [`SharedMemory`] stands for one Redis server; each [`SharedMemory::instance`] is one
//! instance's [`BreakerStore`] (give it to that instance's registry with
//! [`Registry::set_breaker_store`](velocity_policy_runtime::Registry::set_breaker_store), or to a
//! breaker with [`BreakerBuilder::store`](velocity_policy_runtime::breaker::BreakerBuilder::store)).
//! What one instance's breakers share reaches the others' as it does through
//! `velocity_policy_runtime::redis_store::RedisStore`, by the same rules:
//! - a breaker with `Sharing::Local` shares nothing;
//! - a trip (`Breaker::trip`, a 429 with `Retry-After`) is stored as is and reaches every
//!   other instance whose breaker of that name shares trips (`TripsOnly`, `Openings`);
//! - with `Sharing::Openings { quorum }`, every failure a count breaker records is counted in
//!   one fleet-wide window, and the breaker opens on every instance once the window holds the
//!   threshold's failures from at least `quorum` instances (or at once, quorum 1, for a probe
//!   failing on probation); a ratio breaker's local opening counts as one report;
//! - what arrives is input, not truth: an opening longer than the receiving breaker's own bound
//!   (`BreakerConfig::longest_opening`) is dropped and counted as `rejected`; one that is kept
//!   is counted as `received` and applied with `Breaker::apply_shared_opening`;
//! - a breaker built after an opening was stored learns it when it is built (Redis: the load and
//!   the pending openings).
//!
//! Unlike Redis, delivery is synchronous (the opening has reached every instance when the call
//! that caused it returns), and the clock is tokio's, so paused-clock tests see openings end on
//! time.
//!
//! [`SharedMemory::set_reachable`] (the whole store) and [`SharedMemoryStore::set_reachable`]
//! (one instance's link to it) simulate an outage: every call to the store then fails and is
//! counted (`sent`, `failed`, `healthy: false` in the [status](BreakerStore::status)), the
//! breakers go on deciding locally, nothing is shared and nothing arrives; when it is reachable
//! again the instance re-syncs as a Redis store does after reconnecting: it pushes its own
//! shareable openings still running, then loads the fleet's.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::{Breaker, Sharing};
//! use velocity_policy_runtime::breaker::{BreakerState, BreakerStore};
//! use velocity_policy_testkit::store::SharedMemory;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let redis = SharedMemory::new();
//! let (a, b) = (redis.instance("a"), redis.instance("b"));
//! let on = |store| Breaker::builder("payments").sharing(Sharing::TripsOnly).store(store).build();
//! let (payments_a, payments_b) = (on(a.clone()), on(b.clone()));
//!
//! payments_a.trip(Duration::from_secs(10), "429 Too Many Requests");
//! assert_eq!(payments_b.state(), BreakerState::Open); // instance b was told
//!
//! redis.set_reachable(false); // Redis is down: each instance decides alone
//! payments_a.trip(Duration::from_secs(10), "429 again");
//! assert_eq!(a.status().healthy, false);
//! # }
//! ```
//!
//! For integration tests against a real server, [`RedisServer`](crate::RedisServer) starts a
//! private `redis-server` on a unix socket (and [`RedisCluster`](crate::RedisCluster),
//! [`RedisSentinel`](crate::RedisSentinel) a cluster and a sentinel set), so the same test can
//! run on `RedisStore` too.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::time::Instant;
use velocity_policy_runtime::breaker::{BreakerStore, StoreStatus, WeakBreaker};
use velocity_policy_runtime::{Breaker, OpenAfter, OpenCause, Sharing};

/// One in-memory "Redis server" shared by several instances' stores; see the
/// [module docs](self). Cloning is cheap and clones are the same server.
#[derive(Clone, Default)]
pub struct SharedMemory {
    fleet: Arc<Fleet>,
}

impl fmt::Debug for SharedMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedMemory")
            .field("reachable", &!self.fleet.down.load(Ordering::Acquire))
            .field("breakers", &lock(&self.fleet.state).breakers.len())
            .finish()
    }
}

#[derive(Default)]
struct Fleet {
    /// The whole store is unreachable.
    down: AtomicBool,
    state: Mutex<FleetState>,
}

#[derive(Default)]
struct FleetState {
    /// Each breaker's shared state, by name (Redis: `<prefix>:breaker:{<name>}`).
    breakers: HashMap<Arc<str>, Stored>,
    /// Every instance, for the announcements (Redis: the events channel).
    instances: Vec<Weak<SharedMemoryStore>>,
}

/// One breaker's shared state.
#[derive(Default)]
struct Stored {
    until: Option<Instant>,
    probation: Option<Instant>,
    /// The opening's message, as the instance that stored it wrote it.
    opening: Option<Opening>,
    /// Failures in the fleet's window: when, and from which instance.
    failures: Vec<(Instant, Arc<str>)>,
}

/// What an announcement carries (Redis: the signed message on the events channel).
#[derive(Clone)]
struct Opening {
    name: Arc<str>,
    instance: Arc<str>,
    /// How long the opening lasts, as the message claims.
    claimed: Duration,
    trip: bool,
    cause: String,
}

/// One instance's link to a [`SharedMemory`]: its [`BreakerStore`].
pub struct SharedMemoryStore {
    fleet: Arc<Fleet>,
    instance: Arc<str>,
    /// This instance's link is down.
    down: AtomicBool,
    attached: Mutex<HashMap<Arc<str>, WeakBreaker>>,
    healthy: AtomicBool,
    sent: AtomicU64,
    failed: AtomicU64,
    received: AtomicU64,
    rejected: AtomicU64,
}

impl fmt::Debug for SharedMemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedMemoryStore")
            .field("instance", &self.instance)
            .field("reachable", &self.reachable())
            .finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn accepts(sharing: Sharing, trip: bool) -> bool {
    match sharing {
        Sharing::Openings { .. } => true,
        Sharing::TripsOnly => trip,
        _ => false,
    }
}

impl SharedMemory {
    /// An empty store, reachable.
    pub fn new() -> Self {
        Self::default()
    }

    /// The store of the instance `id` (its id in the [status](BreakerStore::status) and in
    /// the causes other instances see: `instance a: ...`).
    pub fn instance(&self, id: &str) -> Arc<SharedMemoryStore> {
        let store = Arc::new(SharedMemoryStore {
            fleet: self.fleet.clone(),
            instance: Arc::from(id),
            down: AtomicBool::new(false),
            attached: Mutex::default(),
            healthy: AtomicBool::new(true),
            sent: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            received: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        });
        let mut state = lock(&self.fleet.state);
        state.instances.retain(|i| i.strong_count() > 0);
        state.instances.push(Arc::downgrade(&store));
        store
    }

    /// Makes the whole store reachable or not (Redis up or down). Back up, every instance
    /// re-syncs ([`SharedMemoryStore::resync`]).
    pub fn set_reachable(&self, reachable: bool) {
        let was_down = self.fleet.down.swap(!reachable, Ordering::AcqRel);
        if reachable && was_down {
            for store in self.fleet.instances() {
                store.resync();
            }
        }
    }

    /// When the shared opening of breaker `name` ends, if one is running.
    pub fn open_until(&self, name: &str) -> Option<Instant> {
        let now = Instant::now();
        lock(&self.fleet.state)
            .breakers
            .get(name)
            .and_then(|s| s.until)
            .filter(|until| *until > now)
    }

    /// The failures in breaker `name`'s fleet-wide window now, from every instance.
    pub fn failures(&self, name: &str) -> usize {
        lock(&self.fleet.state)
            .breakers
            .get(name)
            .map_or(0, |s| s.failures.len())
    }
}

impl Fleet {
    fn instances(&self) -> Vec<Arc<SharedMemoryStore>> {
        lock(&self.state)
            .instances
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Every instance but `from` hears `opening` (Redis: publishing on the events channel).
    fn announce(&self, opening: &Opening) {
        for store in self.instances() {
            if store.instance != opening.instance && store.reachable() {
                store.learn(opening, opening.claimed);
            }
        }
    }
}

impl SharedMemoryStore {
    /// This instance's id.
    pub fn instance_id(&self) -> &str {
        &self.instance
    }

    /// Makes this instance's link to the store reachable or not (a partition). Back up, the
    /// instance re-syncs.
    pub fn set_reachable(&self, reachable: bool) {
        let was_down = self.down.swap(!reachable, Ordering::AcqRel);
        if reachable && was_down {
            self.resync();
        }
    }

    /// Whether a call to the store would get through now.
    pub fn reachable(&self) -> bool {
        !self.down.load(Ordering::Acquire) && !self.fleet.down.load(Ordering::Acquire)
    }

    /// One call to the store: counted in `sent`; `false`, counted in `failed` and marking the
    /// store unhealthy, when it is unreachable.
    fn call(&self) -> bool {
        self.sent.fetch_add(1, Ordering::Relaxed);
        if self.reachable() {
            self.healthy.store(true, Ordering::Release);
            true
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
            self.healthy.store(false, Ordering::Release);
            false
        }
    }

    /// What a Redis store does after reconnecting: pushes this instance's shareable openings
    /// still running, then loads the fleet's openings into its breakers.
    pub fn resync(&self) {
        let breakers: Vec<Breaker> = lock(&self.attached)
            .values()
            .filter_map(WeakBreaker::upgrade)
            .collect();
        for breaker in &breakers {
            let (Some(until), Some(cause)) = (breaker.open_until(), breaker.snapshot().last_cause)
            else {
                continue;
            };
            let trip = matches!(cause, OpenCause::Tripped { .. });
            let shareable = match (breaker.config().sharing, &cause) {
                (_, OpenCause::Shared { .. }) => false,
                (Sharing::TripsOnly, _) => trip,
                (Sharing::Openings { quorum }, _) => trip || quorum <= 1,
                _ => false,
            };
            let remaining = until.saturating_duration_since(Instant::now());
            if shareable && !remaining.is_zero() {
                self.push(breaker, remaining, trip, false, cause.to_string());
            }
        }
        for breaker in &breakers {
            self.load(breaker);
        }
    }

    /// Loads the fleet's opening of `breaker`, if another instance stored one.
    fn load(&self, breaker: &Breaker) {
        if !self.call() {
            return;
        }
        let now = Instant::now();
        let stored = {
            let state = lock(&self.fleet.state);
            state.breakers.get(breaker.name()).and_then(|s| {
                let until = s.until.filter(|until| *until > now)?;
                s.opening.clone().map(|o| (o, until - now))
            })
        };
        if let Some((opening, remaining)) = stored {
            self.learn(&opening, remaining);
        }
    }

    /// An opening from another instance, lasting `remaining` from now, checked before the
    /// breaker hears of it.
    fn learn(&self, opening: &Opening, remaining: Duration) {
        if opening.instance == self.instance {
            return;
        }
        let attached = lock(&self.attached)
            .get(&opening.name)
            .and_then(WeakBreaker::upgrade);
        let Some(breaker) = attached else {
            // Kept by the store: the breaker learns it when it is built.
            return;
        };
        let config = breaker.config();
        if !accepts(config.sharing, opening.trip) {
            return;
        }
        if opening.claimed > config.longest_opening(opening.trip) {
            self.rejected.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(until) = Instant::now().checked_add(remaining.min(opening.claimed)) else {
            return;
        };
        self.received.fetch_add(1, Ordering::Relaxed);
        let detail = Arc::from(format!("instance {}: {}", opening.instance, opening.cause));
        breaker.apply_shared_opening(until, OpenCause::Shared { detail });
    }

    /// Stores an opening (a trip is stored as is, `force`; a pushed local opening only when it
    /// ends later than the stored one) and announces it.
    fn push(&self, breaker: &Breaker, remaining: Duration, trip: bool, force: bool, cause: String) {
        if !self.call() {
            return;
        }
        let now = Instant::now();
        let until = now + remaining;
        let window = breaker.config().open_after.window();
        let opening = Opening {
            name: breaker.name_arc().clone(),
            instance: self.instance.clone(),
            claimed: remaining,
            trip,
            cause,
        };
        {
            let mut state = lock(&self.fleet.state);
            let stored = state.breakers.entry(opening.name.clone()).or_default();
            if !force && stored.until.is_some_and(|current| until <= current) {
                return;
            }
            stored.until = Some(until);
            stored.probation = Some(until + window);
            stored.opening = Some(opening.clone());
        }
        self.fleet.announce(&opening);
    }

    /// Counts one failure in the fleet's window and opens the breaker fleet-wide at the
    /// threshold from `quorum` instances (Redis: `report_failure.lua`).
    fn report_failure(&self, breaker: &Breaker, threshold: u32, quorum: u32, ratio: bool) {
        if !self.call() {
            return;
        }
        let config = breaker.config();
        let (window, cooldown) = (config.open_after.window(), config.cooldown);
        let now = Instant::now();
        let opened = {
            let mut state = lock(&self.fleet.state);
            let stored = state
                .breakers
                .entry(breaker.name_arc().clone())
                .or_default();
            if stored.until.is_some_and(|until| until > now) {
                return;
            }
            let window_text = human(window);
            let cause = if quorum <= 1 && stored.probation.is_some_and(|p| p > now) {
                Some("a probe failed right after the cooldown".to_owned())
            } else {
                stored
                    .failures
                    .retain(|(at, _)| now.saturating_duration_since(*at) <= window);
                stored.failures.push((now, self.instance.clone()));
                let mut instances: Vec<&str> = stored.failures.iter().map(|(_, i)| &**i).collect();
                instances.sort_unstable();
                instances.dedup();
                let count = stored.failures.len();
                (count >= threshold as usize && instances.len() >= quorum as usize).then(|| {
                    if ratio {
                        format!(
                            "{threshold} or more instances opened on their failure ratio within {window_text}"
                        )
                    } else if quorum <= 1 {
                        format!("{threshold} or more failures within {window_text} across the fleet")
                    } else {
                        format!(
                            "{threshold} or more failures within {window_text} from {quorum} or more instances"
                        )
                    }
                })
            };
            cause.map(|cause| {
                let until = now + cooldown;
                let opening = Opening {
                    name: breaker.name_arc().clone(),
                    instance: self.instance.clone(),
                    claimed: cooldown,
                    trip: false,
                    cause,
                };
                stored.until = Some(until);
                stored.probation = Some(until + window);
                stored.opening = Some(opening.clone());
                stored.failures.clear();
                opening
            })
        };
        if let Some(opening) = opened {
            // The fleet opened on this report: the mirror follows at once.
            breaker.apply_shared_opening(
                now + cooldown,
                OpenCause::Shared {
                    detail: Arc::from("the fleet's failures reached the threshold"),
                },
            );
            self.fleet.announce(&opening);
        }
    }
}

/// A window as the Redis store writes it in a cause (`30s`, `1.5s`, `250ms`).
fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else if d.as_secs() > 0 {
        format!("{}s", d.as_secs_f64())
    } else {
        format!("{}ms", d.as_millis())
    }
}

impl BreakerStore for SharedMemoryStore {
    fn attach(&self, breaker: &Breaker) {
        if breaker.config().sharing == Sharing::Local {
            return;
        }
        lock(&self.attached).insert(breaker.name_arc().clone(), breaker.downgrade());
        self.load(breaker);
    }

    fn failure_recorded(&self, breaker: &Breaker) {
        let config = breaker.config();
        if let (Sharing::Openings { quorum }, OpenAfter::Failures { count, .. }) =
            (config.sharing, config.open_after)
        {
            self.report_failure(breaker, count, quorum, false);
        }
    }

    fn opened(&self, breaker: &Breaker, until: Instant, cause: &OpenCause) {
        let config = breaker.config();
        let remaining = until.saturating_duration_since(Instant::now());
        match (config.sharing, cause, config.open_after) {
            (Sharing::Local, _, _) | (_, OpenCause::Shared { .. }, _) => {}
            (_, OpenCause::Tripped { .. }, _) => {
                self.push(breaker, remaining, true, true, cause.to_string());
            }
            (Sharing::Openings { quorum }, _, OpenAfter::Failures { count, .. }) => {
                // The failure that opened the mirror counts in the fleet's window too.
                self.report_failure(breaker, count, quorum, false);
            }
            (Sharing::Openings { quorum }, _, OpenAfter::FailureRatio { .. }) => {
                self.report_failure(breaker, quorum.max(1), quorum, true);
            }
            _ => {}
        }
    }

    fn status(&self) -> StoreStatus {
        let mut status = StoreStatus::in_process();
        status.kind = "in_memory";
        status.healthy = self.healthy.load(Ordering::Acquire);
        status.instance = Some(self.instance.clone());
        status.sent = self.sent.load(Ordering::Relaxed);
        status.failed = self.failed.load(Ordering::Relaxed);
        status.received = self.received.load(Ordering::Relaxed);
        status.rejected = self.rejected.load(Ordering::Relaxed);
        status
    }
}
