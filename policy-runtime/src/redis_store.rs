//! Fleet-wide breaker state and a fleet rate limiter on Redis (feature `redis`).
//!
//! When a service runs as many instances, each cold instance must not rediscover on its own
//! that a provider is down: that is exactly the hammering a breaker exists to prevent. The
//! [`RedisStore`] shares breaker openings through Redis, while every breaker keeps its
//! in-process mirror:
//!
//! - **The mirror is written first, then Redis.** A Redis write that fails after the
//!   dependency refused us leaves the local breaker open and logs the failure; it never closes
//!   the breaker and never reaches the caller.
//! - **The hot path reads only the mirror.** A call through a closed breaker sends no Redis
//!   command. Failures and openings go to Redis from a background task, off the caller's path,
//!   one round trip each: a Lua script keeps the windowed count and the opening atomic, and
//!   takes its times from the Redis server's clock (`TIME`), so instances with skewed clocks
//!   agree. Instances exchange *remaining* durations, never absolute times.
//! - **Others learn quickly.** An opening is published on a pub/sub channel; a newly started
//!   instance loads the current state in [`RedisStore::connect`], before its first admission
//!   decision; a periodic re-sync (every 5 s by default) repairs anything missed while
//!   disconnected, in both directions: openings made locally during an outage are pushed when
//!   Redis returns.
//! - **An outage degrades sharing, never callers.** Admission keeps working from the mirror,
//!   Redis calls have short bounded timeouts (200 ms by default), the outage is logged once
//!   (`kind = "store_unavailable"`) and its end once (`kind = "store_recovered"`).
//!
//! # What is shared: the per-breaker [`Sharing`] policy
//!
//! One instance's own fault (its network, its DNS, its noisy neighbour) must not open the
//! breaker for the whole fleet. Each breaker chooses:
//!
//! - [`Sharing::Local`]: nothing is shared.
//! - [`Sharing::TripsOnly`]: only explicit trips are shared. A dependency's 429 or
//!   `Retry-After` is true for every instance; failures stay local. The safest choice when
//!   instances reach the dependency over different paths.
//! - [`Sharing::Openings { quorum }`](Sharing::Openings): trips, and openings from failures
//!   once the failures inside the window (counted in Redis across the fleet) reach the
//!   breaker's threshold **and** came from at least `quorum` distinct instances. A quorum of 1
//!   shares every opening (fastest, but one sick instance can open the fleet); 2 or more asks
//!   for corroboration. With a quorum of 1 a probe that fails right after a fleet-wide cooldown
//!   reopens the fleet at once, as locally. Breakers that open on a failure *ratio* count
//!   calls only locally (counting every call in Redis would put a command on the hot path), so
//!   they share their openings: each local opening is one report, and `quorum` reports from
//!   distinct instances open the fleet.
//!
//! A bulkhead still bounds **one instance**: ten instances with four slots each put forty
//! calls at the dependency. That bound belongs to the platform's concurrency setting and the
//! dependency's connection limit; nothing here shares bulkheads.
//!
//! # Keys
//!
//! With the default prefix `policy` (set another with [`RedisStoreBuilder::prefix`] so several
//! services can share one Redis):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `policy:breakers` | set | names of every shared breaker |
//! | `policy:breaker:{name}` | hash | `until` and `probation` (server ms), `kind`, `cause`, `by` (instance) |
//! | `policy:breaker:{name}:failures` | sorted set | failures in the window, scored by server ms, member `instance|seq` |
//! | `policy:breaker:{name}:seq` | string | sequence for failure members |
//! | `policy:breaker:events` | pub/sub channel | `kind\nname\nremaining_ms\ninstance\ncause` |
//! | `policy:ratelimit:{name}` | string | the limiter's theoretical arrival time (µs, server clock) |
//!
//! Every key expires on its own once its window or opening is over. Scripts compute breaker
//! keys from the prefix, so this targets a standalone Redis (or a primary), not Redis Cluster.
//!
//! # Credentials
//!
//! The connection string is parsed by the `redis` crate and dropped; nothing here prints it,
//! its host or its password, in logs, errors or `Debug`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use policy_runtime::{Registry, redis_store::RedisStore};
//!
//! # async fn setup() -> Result<(), Box<dyn std::error::Error>> {
//! // At startup, before the first call builds a breaker:
//! Registry::global().set_breaker_store(Arc::new(RedisStore::connect(&std::env::var("REDIS_URL")?).await?));
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::breaker::{
    Breaker, BreakerStore, OpenAfter, OpenCause, Sharing, StoreStatus, WeakBreaker,
};
use crate::error::{Human, RefusalReason, ResilienceError};
use crate::limiter::{FailMode, LimiterSnapshot};
use crate::observe;
use crate::window::saturating_nanos;

/// Records one failure; opens the breaker fleet-wide when the windowed count reaches the
/// threshold with enough distinct instances, or at once for a probe on probation (quorum 1).
const REPORT_FAILURE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state, failures, seq, index = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local name, instance = ARGV[1], ARGV[2]
local window, threshold = tonumber(ARGV[3]), tonumber(ARGV[4])
local quorum, cooldown = tonumber(ARGV[5]), tonumber(ARGV[6])
local channel, window_text = ARGV[7], ARGV[8]
redis.call('SADD', index, name)
local st = redis.call('HMGET', state, 'until', 'probation')
local open_until = tonumber(st[1] or '0') or 0
if open_until > now then return {1, open_until - now} end
local probation = tonumber(st[2] or '0') or 0
local cause = nil
local count = 0
if quorum <= 1 and probation > now then
  cause = 'a probe failed right after the cooldown'
else
  redis.call('ZREMRANGEBYSCORE', failures, '-inf', now - window)
  local n = redis.call('INCR', seq)
  redis.call('ZADD', failures, now, instance .. '|' .. n)
  redis.call('PEXPIRE', failures, window + 1000)
  redis.call('PEXPIRE', seq, window + 1000)
  count = redis.call('ZCARD', failures)
  if count >= threshold then
    local seen, distinct = {}, 0
    for _, m in ipairs(redis.call('ZRANGE', failures, 0, -1)) do
      local who = string.match(m, '^(.*)|')
      if who and not seen[who] then seen[who] = true; distinct = distinct + 1 end
    end
    if distinct >= quorum then
      cause = count .. ' failures within ' .. window_text .. ' from ' .. distinct .. ' instance(s)'
    end
  end
end
if cause then
  local u = now + cooldown
  redis.call('HSET', state, 'until', u, 'probation', u + window, 'kind', 'failures', 'cause', cause, 'by', instance)
  redis.call('PEXPIRE', state, cooldown + window + 1000)
  redis.call('DEL', failures)
  redis.call('PUBLISH', channel, 'failures\n' .. name .. '\n' .. cooldown .. '\n' .. instance .. '\n' .. cause)
  return {2, cooldown}
end
return {0, count}
"#;

/// Publishes an opening: a trip (set exactly, `force = 1`) or a local opening pushed on
/// re-sync (kept only when it ends later than what Redis holds).
const PUSH_OPENING: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state, index = KEYS[1], KEYS[2]
local name, instance, remaining = ARGV[1], ARGV[2], tonumber(ARGV[3])
local kind, cause, window, channel, force = ARGV[4], ARGV[5], tonumber(ARGV[6]), ARGV[7], ARGV[8]
redis.call('SADD', index, name)
local u = now + remaining
if force ~= '1' then
  local current = tonumber(redis.call('HGET', state, 'until') or '0') or 0
  if u <= current then return 0 end
end
redis.call('HSET', state, 'until', u, 'probation', u + window, 'kind', kind, 'cause', cause, 'by', instance)
redis.call('PEXPIRE', state, remaining + window + 1000)
redis.call('PUBLISH', channel, kind .. '\n' .. name .. '\n' .. remaining .. '\n' .. instance .. '\n' .. cause)
return 1
"#;

/// Every open breaker: name, remaining ms, kind, cause, instance.
const LOAD: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local st = redis.call('HMGET', ARGV[1] .. ':breaker:' .. name, 'until', 'kind', 'cause', 'by')
  local u = tonumber(st[1] or '0') or 0
  if u > now then
    table.insert(out, name)
    table.insert(out, tostring(u - now))
    table.insert(out, st[2] or 'failures')
    table.insert(out, st[3] or '')
    table.insert(out, st[4] or '')
  end
end
return out
"#;

/// GCRA: admits when the theoretical arrival time minus the burst tolerance has passed.
/// Returns `{1, 0}` to admit, `{0, wait_us}` to refuse.
const GCRA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then tat = now end
local allow_at = tat - tolerance
if now < allow_at then return {0, allow_at - now} end
local new_tat = tat + interval
redis.call('SET', KEYS[1], new_tat, 'PX', math.floor((new_tat - now) / 1000) + 1)
return {1, 0}
"#;

/// An opening learned from Redis for a breaker not attached yet.
#[derive(Debug, Clone)]
struct Known {
    until: Instant,
    trip: bool,
    detail: Arc<str>,
}

enum Command {
    Failure {
        breaker: WeakBreaker,
        name: Arc<str>,
        window: Duration,
        threshold: u32,
        quorum: u32,
        cooldown: Duration,
    },
    Push {
        name: Arc<str>,
        remaining: Duration,
        window: Duration,
        trip: bool,
        force: bool,
        cause: String,
    },
    Resync,
}

#[derive(Debug, Default)]
struct Stats {
    sent: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    received: AtomicU64,
}

struct Shared {
    prefix: Arc<str>,
    instance: Arc<str>,
    timeout: Duration,
    healthy: AtomicBool,
    attached: Mutex<HashMap<Arc<str>, WeakBreaker>>,
    known: Mutex<HashMap<String, Known>>,
    commands: mpsc::Sender<Command>,
    stats: Stats,
    scripts: Scripts,
    _shutdown: watch::Sender<()>,
}

struct Scripts {
    report_failure: Script,
    push_opening: Script,
    load: Script,
    gcra: Script,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// How a store failure is described: its kind only, never a message that could carry the
/// server's address.
fn describe(error: &RedisError) -> String {
    if error.is_timeout() {
        "timed out".to_owned()
    } else if error.is_connection_refusal() {
        "connection refused".to_owned()
    } else if error.is_connection_dropped() {
        "connection dropped".to_owned()
    } else if error.is_io_error() {
        "i/o error".to_owned()
    } else {
        format!("{:?}", error.kind())
    }
}

impl Shared {
    fn state_key(&self, name: &str) -> String {
        format!("{}:breaker:{name}", self.prefix)
    }

    fn index_key(&self) -> String {
        format!("{}:breakers", self.prefix)
    }

    fn channel(&self) -> String {
        format!("{}:breaker:events", self.prefix)
    }

    /// Logs the start of an outage once.
    fn degrade(&self, what: &str) {
        self.stats.failed.fetch_add(1, Ordering::Relaxed);
        if self.healthy.swap(false, Ordering::AcqRel) {
            tracing::warn!(
                target: "policy",
                kind = "store_unavailable",
                name = "redis",
                instance = &*self.instance,
                reason = what,
                "redis is unreachable ({what}): breakers keep working from their in-process mirrors; sharing is paused until it returns"
            );
        }
    }

    /// Logs the end of an outage once, and asks for a re-sync.
    fn recover(&self) {
        if !self.healthy.swap(true, Ordering::AcqRel) {
            tracing::info!(
                target: "policy",
                kind = "store_recovered",
                name = "redis",
                instance = &*self.instance,
                reason = "reachable again",
                "redis is reachable again: re-syncing breaker state"
            );
            let _ = self.commands.try_send(Command::Resync);
        }
    }

    fn send(&self, command: Command) {
        match self.commands.try_send(command) {
            Ok(()) => {}
            Err(_) => {
                // The queue is full (a long outage) or closed: the mirror already holds the
                // state, and the next re-sync pushes openings again.
                if self.stats.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(
                        target: "policy",
                        kind = "store_backlog",
                        name = "redis",
                        reason = "queue full",
                        "redis store queue is full: dropping reports; the mirror keeps its state and the next re-sync repairs Redis"
                    );
                }
            }
        }
    }

    /// Applies an opening another instance shared to the attached breaker, or remembers it for
    /// a breaker not built yet.
    fn learn(&self, name: &str, remaining: Duration, trip: bool, instance: &str, cause: &str) {
        if instance == &*self.instance {
            return;
        }
        let until = Instant::now() + remaining;
        let detail: Arc<str> = Arc::from(format!("instance {instance}: {cause}"));
        let attached = lock(&self.attached)
            .get(name)
            .and_then(WeakBreaker::upgrade);
        match attached {
            Some(breaker) => {
                if accepts(breaker.config().sharing, trip) {
                    self.stats.received.fetch_add(1, Ordering::Relaxed);
                    breaker.apply_shared_opening(until, OpenCause::Shared { detail });
                }
            }
            None => {
                lock(&self.known).insert(
                    name.to_owned(),
                    Known {
                        until,
                        trip,
                        detail,
                    },
                );
            }
        }
    }

    async fn run(&self, conn: &mut ConnectionManager, command: Command) {
        match command {
            Command::Failure {
                breaker,
                name,
                window,
                threshold,
                quorum,
                cooldown,
            } => {
                let mut call = self.scripts.report_failure.prepare_invoke();
                call.key(self.state_key(&name))
                    .key(format!("{}:failures", self.state_key(&name)))
                    .key(format!("{}:seq", self.state_key(&name)))
                    .key(self.index_key())
                    .arg(&*name)
                    .arg(&*self.instance)
                    .arg(millis(window))
                    .arg(threshold)
                    .arg(quorum)
                    .arg(millis(cooldown))
                    .arg(self.channel())
                    .arg(Human(window).to_string());
                let reply: Option<(i64, i64)> = self.invoke(call.invoke_async(conn)).await;
                if let (Some((2, open_ms)), Some(breaker)) = (reply, breaker.upgrade()) {
                    // The fleet opened on this report: the mirror follows at once, without
                    // waiting for its own message on the channel.
                    let until = Instant::now() + Duration::from_millis(open_ms.unsigned_abs());
                    breaker.apply_shared_opening(
                        until,
                        OpenCause::Shared {
                            detail: Arc::from("the fleet's failures reached the threshold"),
                        },
                    );
                }
            }
            Command::Push {
                name,
                remaining,
                window,
                trip,
                force,
                cause,
            } => {
                let mut call = self.scripts.push_opening.prepare_invoke();
                call.key(self.state_key(&name))
                    .key(self.index_key())
                    .arg(&*name)
                    .arg(&*self.instance)
                    .arg(millis(remaining))
                    .arg(if trip { "trip" } else { "failures" })
                    .arg(cause)
                    .arg(millis(window))
                    .arg(self.channel())
                    .arg(if force { "1" } else { "0" });
                let _: Option<i64> = self.invoke(call.invoke_async(conn)).await;
            }
            Command::Resync => self.resync(conn).await,
        }
    }

    async fn invoke<T>(&self, fut: impl Future<Output = Result<T, RedisError>>) -> Option<T> {
        self.stats.sent.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(Ok(value)) => {
                self.recover();
                Some(value)
            }
            Ok(Err(error)) => {
                self.degrade(&describe(&error));
                None
            }
            Err(_) => {
                self.degrade("timed out");
                None
            }
        }
    }

    /// Pushes this instance's shareable local openings, then loads the fleet's.
    async fn resync(&self, conn: &mut ConnectionManager) {
        let breakers: Vec<Breaker> = lock(&self.attached)
            .values()
            .filter_map(WeakBreaker::upgrade)
            .collect();
        for breaker in breakers {
            let Some(until) = breaker.open_until() else {
                continue;
            };
            let snapshot = breaker.snapshot();
            let Some(cause) = snapshot.last_cause else {
                continue;
            };
            let trip = matches!(cause, OpenCause::Tripped { .. });
            let shareable = match (breaker.config().sharing, &cause) {
                (_, OpenCause::Shared { .. }) => false,
                (Sharing::Local, _) => false,
                (Sharing::TripsOnly, _) => trip,
                (Sharing::Openings { quorum }, _) => trip || quorum <= 1,
            };
            if !shareable {
                continue;
            }
            let remaining = until.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                continue;
            }
            let name = breaker.name_arc().clone();
            Box::pin(self.run(
                conn,
                Command::Push {
                    name,
                    remaining,
                    window: breaker.config().open_after.window(),
                    trip,
                    force: false,
                    cause: cause.to_string(),
                },
            ))
            .await;
        }
        self.load(conn).await;
    }

    async fn load(&self, conn: &mut ConnectionManager) {
        let mut call = self.scripts.load.prepare_invoke();
        call.key(self.index_key()).arg(&*self.prefix);
        let Some(rows): Option<Vec<String>> = self.invoke(call.invoke_async(conn)).await else {
            return;
        };
        for row in rows.chunks_exact(5) {
            let [name, remaining, kind, cause, instance] = row else {
                continue;
            };
            let Ok(ms) = remaining.parse::<u64>() else {
                continue;
            };
            self.learn(
                name,
                Duration::from_millis(ms),
                kind == "trip",
                instance,
                cause,
            );
        }
    }
}

fn accepts(sharing: Sharing, trip: bool) -> bool {
    match sharing {
        Sharing::Local => false,
        Sharing::TripsOnly => trip,
        Sharing::Openings { .. } => true,
    }
}

/// Builds a [`RedisStore`]; see [`RedisStore::builder`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct RedisStoreBuilder {
    prefix: String,
    instance: Option<String>,
    timeout: Duration,
    resync_every: Duration,
    queue: usize,
}

impl RedisStoreBuilder {
    /// The key prefix (default `policy`), so several services can share one Redis.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// This instance's identity in Redis (default: a random id per process). Quorums count
    /// distinct instance ids.
    pub fn instance(mut self, id: impl Into<String>) -> Self {
        self.instance = Some(id.into());
        self
    }

    /// The bound on every Redis call (default 200 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How often state is re-synced in both directions (default 5 s).
    pub fn resync_every(mut self, every: Duration) -> Self {
        self.resync_every = every.max(Duration::from_millis(10));
        self
    }

    /// Connects (lazily: an unreachable Redis is logged once and degrades sharing, it is not
    /// an error) and loads the current fleet state before returning, so breakers built
    /// afterwards refuse on their very first call when the fleet has them open. Must run
    /// inside a tokio runtime: it starts the store's background tasks there.
    ///
    /// Fails only when the connection string itself cannot be parsed; the error never
    /// repeats it.
    pub async fn connect(self, url: &str) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(url).map_err(|_| StoreError::InvalidUrl)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            // Reconnect once per request, at once: a dead server is an immediate error (the
            // `on_error` decision), not a wait that turns into a timeout.
            .set_number_of_retries(0)
            .set_min_delay(Duration::from_millis(1));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|_| StoreError::Runtime)?;
        let (commands, receiver) = mpsc::channel(self.queue);
        let (shutdown, shutdown_rx) = watch::channel(());
        let instance = self
            .instance
            .unwrap_or_else(|| format!("{:016x}", rand::random::<u64>()));
        let shared = Arc::new(Shared {
            prefix: Arc::from(self.prefix),
            instance: Arc::from(instance),
            timeout: self.timeout,
            healthy: AtomicBool::new(true),
            attached: Mutex::default(),
            known: Mutex::default(),
            commands,
            stats: Stats::default(),
            scripts: Scripts {
                report_failure: Script::new(REPORT_FAILURE),
                push_opening: Script::new(PUSH_OPENING),
                load: Script::new(LOAD),
                gcra: Script::new(GCRA),
            },
            _shutdown: shutdown,
        });
        let mut first = conn.clone();
        shared.load(&mut first).await;
        tokio::spawn(worker(
            Arc::downgrade(&shared),
            conn.clone(),
            receiver,
            shutdown_rx.clone(),
        ));
        let (subscribed, subscribed_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(subscriber(
            Arc::downgrade(&shared),
            client,
            shared.channel(),
            shutdown_rx.clone(),
            subscribed,
        ));
        // Openings published from now on reach this instance: wait (boundedly) for the
        // subscription before the first admission decision.
        let _ = tokio::time::timeout(self.timeout, subscribed_rx).await;
        tokio::spawn(resyncer(
            Arc::downgrade(&shared),
            self.resync_every,
            shutdown_rx,
        ));
        Ok(RedisStore { shared, conn })
    }
}

/// Why a store could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The connection string could not be parsed (it is not repeated here, since it may hold
    /// a password).
    #[error(
        "the redis connection string could not be parsed; expected `redis://[user:password@]host[:port][/db]` or `rediss://...`"
    )]
    InvalidUrl,
    /// No tokio runtime was running.
    #[error("the redis store must be connected from inside a tokio runtime")]
    Runtime,
}

/// Breaker state shared through Redis, with an in-process mirror per breaker.
///
/// See the [module docs](self) for what is shared, when, and at what cost.
#[derive(Clone)]
pub struct RedisStore {
    shared: Arc<Shared>,
    conn: ConnectionManager,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.shared.prefix)
            .field("instance", &self.shared.instance)
            .field("healthy", &self.shared.healthy.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A builder with the defaults: prefix `policy`, a random instance id, 200 ms timeouts,
    /// re-sync every 5 s.
    pub fn builder() -> RedisStoreBuilder {
        RedisStoreBuilder {
            prefix: "policy".to_owned(),
            instance: None,
            timeout: Duration::from_millis(200),
            resync_every: Duration::from_secs(5),
            queue: 4096,
        }
    }

    /// Connects with the defaults; see [`RedisStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder().connect(url).await
    }

    /// This instance's id.
    pub fn instance(&self) -> &str {
        &self.shared.instance
    }

    /// Whether the last Redis call succeeded.
    pub fn is_healthy(&self) -> bool {
        self.shared.healthy.load(Ordering::Relaxed)
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> StoreStatus {
        let s = &self.shared.stats;
        StoreStatus {
            kind: "redis",
            healthy: self.is_healthy(),
            instance: Some(self.shared.instance.clone()),
            sent: s.sent.load(Ordering::Relaxed),
            failed: s.failed.load(Ordering::Relaxed),
            dropped: s.dropped.load(Ordering::Relaxed),
            received: s.received.load(Ordering::Relaxed),
        }
    }

    /// A fleet-wide rate limiter named `name`: `limit` calls per `per`, sharing this store's
    /// connection. Fails open on timeouts and closed on errors unless told otherwise.
    pub fn rate_limiter(
        &self,
        name: impl Into<Arc<str>>,
        limit: u32,
        per: Duration,
    ) -> RedisRateLimiterBuilder {
        RedisRateLimiterBuilder {
            store: self.clone(),
            name: name.into(),
            limit: limit.max(1),
            per,
            on_timeout: FailMode::Open,
            on_error: FailMode::Closed,
            timeout: Duration::from_millis(50),
        }
    }
}

impl BreakerStore for RedisStore {
    fn status(&self) -> StoreStatus {
        self.snapshot()
    }

    fn attach(&self, breaker: &Breaker) {
        let sharing = breaker.config().sharing;
        if sharing == Sharing::Local {
            return;
        }
        let shared = &self.shared;
        lock(&shared.attached).insert(breaker.name_arc().clone(), breaker.downgrade());
        let known = lock(&shared.known).remove(breaker.name());
        if let Some(known) = known
            && accepts(sharing, known.trip)
            && known.until > Instant::now()
        {
            breaker.apply_shared_opening(
                known.until,
                OpenCause::Shared {
                    detail: known.detail,
                },
            );
        }
    }

    fn failure_recorded(&self, breaker: &Breaker) {
        let config = breaker.config();
        if let (Sharing::Openings { quorum }, OpenAfter::Failures { count, window }) =
            (config.sharing, config.open_after)
        {
            self.shared.send(Command::Failure {
                breaker: breaker.downgrade(),
                name: breaker.name_arc().clone(),
                window,
                threshold: count,
                quorum,
                cooldown: config.cooldown,
            });
        }
    }

    fn opened(&self, breaker: &Breaker, until: Instant, cause: &OpenCause) {
        let config = breaker.config();
        let remaining = until.saturating_duration_since(Instant::now());
        match (config.sharing, cause, config.open_after) {
            (Sharing::Local, _, _) | (_, OpenCause::Shared { .. }, _) => {}
            (_, OpenCause::Tripped { .. }, _) => self.shared.send(Command::Push {
                name: breaker.name_arc().clone(),
                remaining,
                window: config.open_after.window(),
                trip: true,
                force: true,
                cause: cause.to_string(),
            }),
            (Sharing::TripsOnly, _, _) => {}
            (Sharing::Openings { quorum }, _, OpenAfter::Failures { count, window }) => {
                // The failure that opened the mirror counts in the fleet's window too.
                self.shared.send(Command::Failure {
                    breaker: breaker.downgrade(),
                    name: breaker.name_arc().clone(),
                    window,
                    threshold: count,
                    quorum,
                    cooldown: config.cooldown,
                });
            }
            (Sharing::Openings { quorum }, _, OpenAfter::FailureRatio { window, .. }) => {
                // A ratio opening is one report; `quorum` reports from distinct instances open
                // the fleet.
                self.shared.send(Command::Failure {
                    breaker: breaker.downgrade(),
                    name: breaker.name_arc().clone(),
                    window,
                    threshold: quorum.max(1),
                    quorum,
                    cooldown: config.cooldown,
                });
            }
        }
    }
}

async fn worker(
    shared: std::sync::Weak<Shared>,
    mut conn: ConnectionManager,
    mut commands: mpsc::Receiver<Command>,
    mut shutdown: watch::Receiver<()>,
) {
    loop {
        let command = tokio::select! {
            command = commands.recv() => command,
            _ = shutdown.changed() => None,
        };
        let (Some(command), Some(shared)) = (command, shared.upgrade()) else {
            return;
        };
        shared.run(&mut conn, command).await;
    }
}

async fn subscriber(
    shared: std::sync::Weak<Shared>,
    client: redis::Client,
    channel: String,
    mut shutdown: watch::Receiver<()>,
    subscribed: tokio::sync::oneshot::Sender<()>,
) {
    let mut subscribed = Some(subscribed);
    let mut backoff = Duration::from_millis(100);
    let mut first = true;
    loop {
        let Some(timeout) = shared.upgrade().map(|s| s.timeout) else {
            return;
        };
        let connected = tokio::time::timeout(timeout, async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, RedisError>(pubsub)
        })
        .await;
        match connected {
            Ok(Ok(mut pubsub)) => {
                backoff = Duration::from_millis(100);
                if let Some(subscribed) = subscribed.take() {
                    let _ = subscribed.send(());
                }
                if let Some(shared) = shared.upgrade() {
                    shared.recover();
                    if !first {
                        // Anything published while we were away is repaired by a re-sync.
                        let _ = shared.commands.try_send(Command::Resync);
                    }
                }
                first = false;
                let mut messages = pubsub.on_message();
                loop {
                    let message = tokio::select! {
                        message = messages.next() => message,
                        _ = shutdown.changed() => return,
                    };
                    let Some(message) = message else { break };
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    let Ok(payload) = message.get_payload::<String>() else {
                        continue;
                    };
                    let mut parts = payload.splitn(5, '\n');
                    let (Some(kind), Some(name), Some(ms), Some(instance), Some(cause)) = (
                        parts.next(),
                        parts.next(),
                        parts.next(),
                        parts.next(),
                        parts.next(),
                    ) else {
                        continue;
                    };
                    let Ok(ms) = ms.parse::<u64>() else { continue };
                    shared.learn(
                        name,
                        Duration::from_millis(ms),
                        kind == "trip",
                        instance,
                        cause,
                    );
                }
                if let Some(shared) = shared.upgrade() {
                    shared.degrade("the pub/sub connection was lost");
                }
            }
            Ok(Err(error)) => {
                if let Some(shared) = shared.upgrade() {
                    shared.degrade(&describe(&error));
                }
            }
            Err(_) => {
                if let Some(shared) = shared.upgrade() {
                    shared.degrade("timed out");
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = shutdown.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

async fn resyncer(
    shared: std::sync::Weak<Shared>,
    every: Duration,
    mut shutdown: watch::Receiver<()>,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let _ = shared.commands.try_send(Command::Resync);
    }
}

/// Builds a [`RedisRateLimiter`]; see [`RedisStore::rate_limiter`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RedisRateLimiterBuilder {
    store: RedisStore,
    name: Arc<str>,
    limit: u32,
    per: Duration,
    on_timeout: FailMode,
    on_error: FailMode,
    timeout: Duration,
}

impl RedisRateLimiterBuilder {
    /// What to decide when Redis answers too slowly.
    pub fn on_timeout(mut self, mode: FailMode) -> Self {
        self.on_timeout = mode;
        self
    }

    /// What to decide when Redis cannot be reached.
    pub fn on_error(mut self, mode: FailMode) -> Self {
        self.on_error = mode;
        self
    }

    /// How long a decision may wait for Redis (default 50 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Builds the limiter.
    pub fn build(self) -> RedisRateLimiter {
        let period = saturating_nanos(self.per) / 1_000;
        let interval = (period / u64::from(self.limit)).max(1);
        RedisRateLimiter {
            key: format!("{}:ratelimit:{}", self.store.shared.prefix, self.name),
            detail: Arc::from(format!("over {} per {}", self.limit, Human(self.per))),
            interval_us: interval,
            tolerance_us: period.saturating_sub(interval),
            store: self.store,
            name: self.name,
            on_timeout: self.on_timeout,
            on_error: self.on_error,
            timeout: self.timeout,
            stats: LimiterStats::default(),
        }
    }
}

#[derive(Debug, Default)]
struct LimiterStats {
    admitted: AtomicU64,
    refused: AtomicU64,
    failed_open: AtomicU64,
    failed_closed: AtomicU64,
}

/// A fleet-wide rate limiter: GCRA in one Lua round trip on the Redis server's clock.
///
/// Its store's timeouts and errors are two separate decisions, each [`FailMode::Open`] or
/// [`FailMode::Closed`]; see the [`limiter`](crate::limiter) module.
pub struct RedisRateLimiter {
    store: RedisStore,
    name: Arc<str>,
    key: String,
    detail: Arc<str>,
    interval_us: u64,
    tolerance_us: u64,
    on_timeout: FailMode,
    on_error: FailMode,
    timeout: Duration,
    stats: LimiterStats,
}

impl fmt::Debug for RedisRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRateLimiter")
            .field("name", &self.name)
            .field("rate", &self.detail)
            .field("on_timeout", &self.on_timeout)
            .field("on_error", &self.on_error)
            .finish_non_exhaustive()
    }
}

impl RedisRateLimiter {
    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Admits one call, or refuses with a [`ResilienceError`] of kind
    /// [`RateLimited`](crate::RefusalKind::RateLimited). When Redis times out or fails, the
    /// configured [`FailMode`] decides.
    pub async fn acquire(&self) -> Result<(), ResilienceError> {
        let mut conn = self.store.conn.clone();
        let mut call = self.store.shared.scripts.gcra.prepare_invoke();
        call.key(&self.key)
            .arg(self.interval_us)
            .arg(self.tolerance_us);
        let reply =
            tokio::time::timeout(self.timeout, call.invoke_async::<(i64, i64)>(&mut conn)).await;
        match reply {
            Ok(Ok((1, _))) => {
                self.store.shared.recover();
                self.stats.admitted.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Ok(Ok((_, wait_us))) => {
                self.store.shared.recover();
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                let refusal = ResilienceError::new(
                    self.name.clone(),
                    RefusalReason::RateLimited {
                        retry_after: Some(Duration::from_micros(wait_us.unsigned_abs())),
                        detail: self.detail.clone(),
                    },
                );
                observe::refused(&refusal);
                Err(refusal)
            }
            Ok(Err(error)) => {
                self.store.shared.degrade(&describe(&error));
                self.fail(self.on_error, "the limiter's store failed")
            }
            Err(_) => {
                self.store.shared.degrade("timed out");
                self.fail(self.on_timeout, "the limiter's store timed out")
            }
        }
    }

    fn fail(&self, mode: FailMode, what: &'static str) -> Result<(), ResilienceError> {
        match mode {
            FailMode::Open => {
                self.stats.failed_open.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    target: "policy",
                    kind = "limiter_failed_open",
                    name = &*self.name,
                    reason = what,
                    "rate limiter `{}` admits the call: {what} and it fails open",
                    self.name
                );
                Ok(())
            }
            FailMode::Closed => {
                self.stats.failed_closed.fetch_add(1, Ordering::Relaxed);
                let refusal = ResilienceError::new(
                    self.name.clone(),
                    RefusalReason::RateLimited {
                        retry_after: None,
                        detail: Arc::from(format!("{what} and it fails closed")),
                    },
                );
                observe::refused(&refusal);
                Err(refusal)
            }
        }
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> LimiterSnapshot {
        LimiterSnapshot {
            name: self.name.clone(),
            admitted: self.stats.admitted.load(Ordering::Relaxed),
            refused: self.stats.refused.load(Ordering::Relaxed),
            failed_open: self.stats.failed_open.load(Ordering::Relaxed),
            failed_closed: self.stats.failed_closed.load(Ordering::Relaxed),
        }
    }
}

impl crate::registry::LimiterSource for RedisRateLimiter {
    fn limiter_snapshot(&self) -> LimiterSnapshot {
        self.snapshot()
    }
}
