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
//!   instance loads the current state in [`RedisStoreBuilder::connect`] (or `connect_cluster`,
//!   `connect_sentinel`), before its first admission decision; a periodic re-sync (every 5 s by default) repairs anything missed while
//!   disconnected, in both directions: openings made locally during an outage are pushed when
//!   Redis returns.
//! - **An outage degrades sharing, never callers.** Admission keeps working from the mirror,
//!   Redis calls have short bounded timeouts (200 ms by default), the outage is logged once
//!   (`kind = "store_unavailable"`) and its end once (`kind = "store_recovered"`). Reports that
//!   do not fit the store's queue during an outage are dropped, counted, and logged once per
//!   outage (`kind = "store_backlog"`); the next re-sync repairs Redis.
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
//! - [`Sharing::Openings { quorum }`](crate::Sharing::Openings): trips, and openings from failures
//!   once the failures inside the window (counted in Redis across the fleet) reach the
//!   breaker's threshold **and** came from at least `quorum` distinct instances. A quorum of 1
//!   shares every opening (fastest, but one sick instance can open the fleet); 2 or more asks
//!   for corroboration. With a quorum of 1 a probe that fails right after a fleet-wide cooldown
//!   reopens the fleet at once, as locally. Breakers that open on a failure *ratio* count
//!   calls only locally (counting every call in Redis would put a command on the hot path), so
//!   they share their openings: each local opening is one report, and `quorum` reports from
//!   distinct instances open the fleet.
//!
//! A chaos drill's openings are never shared, whatever the breaker's sharing: an injected 429
//! trips this instance's breaker alone, and injected failures are neither reported nor pushed
//! (see [`crate::chaos`]), so a drill on a share of the instances stays on that share.
//!
//! A bulkhead still bounds **one instance**: ten instances with four slots each put forty
//! calls at the dependency. That bound belongs to the platform's concurrency setting and the
//! dependency's connection limit; nothing here shares bulkheads.
//!
//! # What comes from Redis is input, not truth
//!
//! **The threat model.** Whoever can write to this Redis (a compromised neighbour service, a
//! leaked password, an operator's typo) can already do much: delete the shared state, fill the
//! server's memory, answer slowly. What they must not be able to do through this store is
//! disable a dependency for longer than this instance's own configuration allows, crash or
//! grow an instance, or make an instance say something it did not. So every opening that
//! arrives, on the channel or from a breaker's state hash, is checked before a breaker hears
//! of it:
//!
//! - **Bounded by the local configuration.** An opening from counted failures may last at
//!   most the receiving breaker's cooldown, a trip at most its `max_retry_after` (5 minutes by
//!   default: [`BreakerBuilder::max_retry_after`](crate::breaker::BreakerBuilder::max_retry_after));
//!   a message asking for longer, or for nothing, is dropped as `out_of_range`, never cut to
//!   fit, since it is either a different configuration or a forgery. The breaker itself never
//!   lets any shared opening outlast the larger of the two
//!   ([`Breaker::apply_shared_opening`]).
//! - **Well-formed or dropped.** A message is one JSON object of one shape, at most 4 KiB,
//!   with short names and no control characters:
//!   `{"v":1,"kind":"trip","name":"search","remaining_ms":3000,"instance":"…","issued_ms":…,"cause":"…","sig":"…"}`
//!   (`kind` is `failures` or `trip`; `issued_ms` is the sender's wall clock, used only
//!   against replays of signed messages; `sig` only with a shared secret). Anything else is
//!   dropped as `malformed` or `too_large`.
//! - **Bounded memory.** Openings for breakers this instance has not built yet are kept for a
//!   breaker built later, up to [`RedisStoreBuilder::pending_capacity`] names (1,024 by
//!   default), each until its opening ends or the next re-sync replaces the set from Redis;
//!   past the bound, messages are dropped as `pending_full`. A flood of names costs a counter,
//!   not memory.
//! - **A quorum counts only what can be checked.** The failures in a breaker's window are
//!   members of a sorted set anyone who can write to Redis can add to, and the script cannot
//!   check a signature (the secret never reaches Redis). With a shared secret, each failure an
//!   instance reports is signed (HMAC over the prefix, the breaker's name, the instance, a
//!   nonce and the time), and the script only records it and hands the newest reports back
//!   once they reach the threshold: the reporting instance counts the ones whose signatures it
//!   checks, issued within the window (give or take the clock tolerance), each once, from
//!   distinct instances, and opens the fleet only on those. Forged members are counted as
//!   rejected (`source = "reports"`) and removed. Without a secret nothing can be told apart,
//!   and a writer can make a quorum, as it can publish an opening: for one local bound each.
//! - **A probation is bounded by the local configuration.** With a quorum of 1, one failure
//!   right after an opening ends reopens the fleet. The script takes a probation only when it
//!   is what an opening leaves behind under this instance's own configuration (it follows an
//!   opening that has ended, and lasts at most this breaker's window past that end); with a
//!   secret, the opening's stored message must also be signed with it, for this breaker, and
//!   fresh within the probation. A probation forged to last a year is none.
//! - **Sizes checked before anything crosses the wire.** Every instance reads the fleet's
//!   state every few seconds, so a value a writer made huge must not reach it: the scripts
//!   check sizes on the server (`STRLEN`, `HSTRLEN`, `LIMIT`) and send only what fits. A load
//!   reads at most the pending bound of names besides this instance's own breakers (which it
//!   asks for by name, so a flood of names cannot crowd them out), none longer than 256 bytes
//!   (a longer one is removed from the index and counted as `too_large`); an opening's stored
//!   message longer than 4 KiB is not sent, and is counted as `too_large`; the fleet's
//!   override set is measured before it is read (see [`crate::overrides`]). A 100 MB name and
//!   a 100 MB message in Redis cost an instance's loads about 2 KB on the wire, not 200 MB
//!   (`a_100_mb_value_in_the_breaker_state_never_crosses_the_wire`). A message published on
//!   the events channel reaches a subscriber whole: past 4 KiB it is dropped unread as
//!   `too_large`, and Redis's own `client-output-buffer-limit pubsub` (32 MB by default)
//!   disconnects a subscriber before a larger one reaches it; keep that limit.
//! - **Optionally signed.** With [`RedisStoreBuilder::shared_secret`], every message this
//!   instance writes carries an HMAC-SHA256 over its fields and the key prefix, and only
//!   messages signed with the same secret are accepted (`unsigned` and `bad_signature`
//!   otherwise); a signed message is refused as `stale` once its own opening and the clock
//!   tolerance ([`RedisStoreBuilder::clock_tolerance`], 30 s) are over, so a replayed message
//!   can extend an opening by at most its own length. Without a secret, someone who can
//!   publish can open a breaker for one local bound per message, for as long as they keep
//!   publishing, and every such opening is counted (`received`) and names the instance it
//!   claims to come from; with one, a writer who does not hold the secret cannot open a
//!   breaker at all. The secret never reaches Redis (messages are signed by the instance before
//!   the script publishes them) and is never printed, `Debug` included. It must be at least 32
//!   bytes: a shorter one, the empty one included, is refused at connect
//!   ([`StoreError::WeakSecret`], which names the fix), since it would claim to sign while
//!   anyone could guess it.
//! - **The mode is said at connect.** Every store logs one INFO event when it connects
//!   (`kind = "store_connected"`, with `signed`, `topology`, `prefix` and `instance`), and a
//!   store without a secret one WARN (`kind = "store_unsigned"`, `reason = "no_shared_secret"`)
//!   naming what a writer to the Redis can then do, once, not per message.
//!
//! Every dropped message is counted in [`StoreStatus::rejected`] (or
//! [`StoreStatus::pending_dropped`]) and logged as `kind = "store_message_rejected"` with the
//! fields `reason` (the codes above), `source` (`pubsub`, `load` or `pending`), `breaker`
//! (the name it gave, when it gave one), `remaining_ms` and `bound_ms` (when known) and
//! `instance` (this instance). The first rejection is a WARN, and one a second after the last
//! WARN; the rest are DEBUG, so a flood cannot flood the logs.
//!
//! # Keys
//!
//! With the default prefix `policy` (set another with [`RedisStoreBuilder::prefix`] so several
//! services can share one Redis), for a breaker or limiter named `search`:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `policy:breaker:{search}` | hash | `until` and `probation` (server ms), `kind`, `cause`, `by` (instance), `message` (the opening's message) |
//! | `policy:breaker:{search}:failures` | sorted set | failures in the window, scored by server ms, member `instance\|seq` (with a secret: a signed report, `instance\|nonce\|issued_ms\|sig`) |
//! | `policy:breaker:{search}:seq` | string | sequence for failure members |
//! | `policy:breakers:open` | sorted set | names of the breakers open now, scored by when each opening ends (server ms) |
//! | `policy:breaker:events` | pub/sub channel (sharded on a cluster) | one opening's message each |
//! | `policy:ratelimit:{search}` | string | the limiter's theoretical arrival time (µs, server clock) |
//!
//! The braces are literal: `{search}` is a hash tag, so every key of one breaker is in one
//! cluster slot (a name that is empty, starts with `#` or holds a brace is tagged by its hex
//! form, `{#…}`, and a prefix may not hold braces at all). Every key expires on its own once
//! its window or opening is over, and ended openings leave the index at the next load. The
//! scripts (in `velocity-policy-runtime/src/redis_store/lua/`) are given every key they touch in
//! `KEYS`, and each touches one breaker's keys only; the worker announces an opening a script
//! stored with two commands of its own, `ZADD` on the index, then `PUBLISH` (`SPUBLISH` on a
//! cluster) on the channel, in that order, so an instance loading at any moment either finds
//! the opening in the index or hears it on the channel it subscribed to before loading. A
//! load reads the index, then each open breaker's state on its own slot (32 at a time). Redis
//! 6.2 or later (for `ZADD GT`); Redis 7 on a cluster (sharded pub/sub).
//!
//! # Standalone, Cluster, Sentinel, TLS
//!
//! The store and its breakers behave the same on each, and a caller cannot tell them apart;
//! only the connecting line differs:
//!
//! - [`RedisStoreBuilder::connect`]: one server, or a primary behind a stable address
//!   (`redis://`, `unix://`; `rediss://`).
//! - [`RedisStoreBuilder::connect_cluster`]: a Redis Cluster (ElastiCache or Memorystore in
//!   cluster mode), through any of its nodes. The `redis` crate's cluster client routes every
//!   command by its key's slot, follows `MOVED` and failovers, and re-subscribes the sharded
//!   channel (`SSUBSCRIBE`) on whichever node owns it; the store does no routing of its own.
//!   A primary that dies costs sharing on its slots until its replica takes over (or the whole
//!   cluster, without a replica, under the default `cluster-require-full-coverage yes`);
//!   callers see nothing, as in any outage.
//! - [`RedisStoreBuilder::connect_sentinel`]: the primary Redis Sentinel names for a service.
//!   When the primary stops answering (refused, dropped, timed out, `READONLY`), the next
//!   command asks the sentinels again; the subscriber does the same on each reconnection and
//!   re-syncs. A failover therefore costs what an outage costs: sharing pauses from the
//!   primary's death until the sentinels promote a replica (their `down-after-milliseconds`
//!   and an election), callers see nothing, and sharing resumes on the new primary.
//!
//! `rediss://` connects over TLS (rustls, the platform's root
//! certificates, or [`RedisStoreBuilder::tls_root_certificate`] for a private CA) on all three.
//!
//! What a fleet costs the server, and where this design stops scaling, is measured by the
//! fleet simulation (`examples/fleet.rs`); see [Capacity](#capacity).
//!
//! # Capacity
//!
//! Measured by the fleet simulation with 10, 50 and 200 instances on one `redis-server`
//! (BENCHMARKS.md has the tables; a 2-core machine, so read these as orders of magnitude).
//! Per instance: **0 commands per call** on the success path, one command per re-sync (every
//! 5 s, plus one per open breaker), one script per failure reported while a breaker is closed
//! (about 21 µs of Redis CPU each, the report's signature checked), about 1 command a second
//! per open breaker while it stays open (a probe after each cooldown), two connections and
//! about 77 KB of Redis memory. An opening costs the server about 5.4 µs per subscriber to fan
//! out.
//!
//! - **1,000 instances:** about 170 commands a second when healthy, 2,000 connections, 77 MB;
//!   an opening is 5.4 ms of the server's time; 10,000 failure reports a second (10 per
//!   instance) are a fifth of a core. One small Redis (or a three-node cluster, for failover).
//! - **10,000 instances:** about 1,700 commands a second when healthy, 20,000 connections
//!   (raise `maxclients`, 10,000 by default), 770 MB; an opening is 54 ms of the server's one
//!   thread, so about 18 openings a second would saturate it.
//!
//! Where it stops scaling: every report for one breaker runs on the primary that holds its
//! hash tag (about 48,000 a second per breaker, however large the cluster), and every opening
//! is written by one server to every subscriber of the one events channel. Past that: report
//! failures in batches or share openings only ([`Sharing::TripsOnly`], or a quorum of
//! instances that opened on their own counts), re-sync less often
//! ([`RedisStoreBuilder::resync_every`]: pub/sub carries the news, the re-sync only repairs
//! what was missed), and for tens of thousands of subscribers a channel per breaker spread
//! over the shards, or one relay per host fanning out to its instances.
//!
//! # The fleet rate limiter
//!
//! [`RedisStore::rate_limiter`] builds a [`RedisRateLimiter`]: one round trip per decision
//! while Redis answers, and, when it does not, the limiter's own [`FailMode`]s for a timeout
//! and for an error, by default a per-instance rate ([`FailMode::Local`]) rather than all
//! admitted or all refused. After one failed call the limiter stops asking Redis and decides
//! locally at once, with no round trip on the caller's path, until a background probe finds
//! Redis again (see [`RedisRateLimiterBuilder`]).
//!
//! The state the limiter keeps in Redis is input too. A genuine one is a number at most one
//! period ahead of the server's clock (the burst tolerance and one interval: the most an
//! admission adds), and expires on its own. Anything else (a far-future value `SET` without a
//! TTL to hold the limiter shut for years, a value that is no number, a key of another type)
//! is corrupt: the script deletes it and decides as if the key were empty, the limiter counts
//! it ([`LimiterSnapshot::store_resets`](crate::limiter::LimiterSnapshot::store_resets)) and
//! logs it (`kind = "limiter_state_reset"`, `reason = "corrupt_state"`, a WARN at most once a
//! minute). No refusal ever asks a caller to wait longer than the limiter's period.
//!
//! # Credentials
//!
//! The connection string is parsed by the `redis` crate and dropped; nothing here prints it,
//! its host or its password, in logs, errors or `Debug`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use velocity_policy_runtime::{Registry, redis_store::RedisStore};
//!
//! # async fn setup() -> Result<(), Box<dyn std::error::Error>> {
//! // At startup, before the first call builds a breaker:
//! let store = RedisStore::builder()
//!     .shared_secret(std::env::var("POLICY_REDIS_SECRET")?)
//!     .connect(&std::env::var("REDIS_URL")?)
//!     .await?;
//! Registry::global().set_breaker_store(Arc::new(store));
//! # Ok(())
//! # }
//! ```
//!
//! [`Sharing`]: crate::Sharing
//! [`Sharing::Local`]: crate::Sharing::Local
//! [`Sharing::TripsOnly`]: crate::Sharing::TripsOnly
//! [`Breaker::apply_shared_opening`]: crate::Breaker::apply_shared_opening
//! [`StoreStatus::rejected`]: crate::breaker::StoreStatus::rejected
//! [`StoreStatus::pending_dropped`]: crate::breaker::StoreStatus::pending_dropped
//! [`FailMode`]: crate::limiter::FailMode
//! [`RedisRateLimiter`]: crate::limiter::RedisRateLimiter
//! [`RedisRateLimiterBuilder`]: crate::limiter::RedisRateLimiterBuilder
//! [`FailMode::Local`]: crate::limiter::FailMode::Local

mod breaker;
mod connection;
#[cfg(feature = "overrides")]
mod fleet;
mod message;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{
    Arc, Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak,
};
use std::time::Duration;

use redis::RedisError;
use tokio::sync::{mpsc, watch};

use crate::breaker::StoreStatus;

pub(crate) use connection::Conn;
use connection::{Target, Topology};
#[cfg(feature = "overrides")]
pub use fleet::{FleetError, FleetOverrides, FleetPolicyFile};
pub(crate) use message::Signer;

/// Counters of the breaker store's traffic; see [`StoreStatus`].
#[derive(Debug, Default)]
struct Stats {
    sent: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    received: AtomicU64,
    rejected: AtomicU64,
    pending_dropped: AtomicU64,
    subscribe_failed: AtomicU64,
}

/// What the store's background tasks, its breakers and its limiters share.
struct Shared {
    prefix: Arc<str>,
    instance: Arc<str>,
    topology: Topology,
    timeout: Duration,
    healthy: AtomicBool,
    /// Whether this outage's "queue full" warning was given; re-armed when Redis is reachable
    /// again and when the queue drains.
    backlog_warned: AtomicBool,
    /// Confirmations of the cluster's sharded subscription: every one after the first is a
    /// re-subscription after a reconnection or a failover, and asks for a re-sync.
    shard_subscriptions: AtomicU64,
    commands: mpsc::Sender<breaker::Command>,
    stats: Stats,
    breakers: breaker::Fleet,
    /// Bumped when an override set may have been published (a message on its channel, a
    /// re-subscription, a re-sync): whoever follows the fleet's overrides reads the key again.
    overrides_news: watch::Sender<u64>,
    _shutdown: watch::Sender<()>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

/// The longest re-sync period: longer ones are cut to it (and never overflow an `Instant`).
const MAX_RESYNC_EVERY: Duration = Duration::from_secs(24 * 3600);

/// What a durable queue's entry signature is bound to, so a signature made for another kind of
/// record (an opening, a failure report, an override set) never passes for an entry.
const QUEUE_ENTRY_CONTEXT: &[u8] = b"velocity-policy-runtime queue entry v1";

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The hash tag that keeps every key of one breaker (or limiter) in one cluster slot:
/// `{name}`, or `{#<hex>}` for a name that is empty, starts with `#` or holds a brace (which
/// would end or empty the tag).
pub(crate) fn hash_tag(name: &str) -> String {
    if name.is_empty() || name.starts_with('#') || name.contains(['{', '}']) {
        format!("{{#{}}}", hex::encode(name))
    } else {
        format!("{{{name}}}")
    }
}

/// How a store failure is described: its kind only, never a message that could carry the
/// server's address.
pub(crate) fn describe(error: &RedisError) -> String {
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

/// The `reason` code of an outage, from what [`describe`] (or a caller) said of it; the
/// sentence itself is the event's `detail`.
fn outage_code(what: &str) -> &'static str {
    match what {
        "timed out" => "timeout",
        "connection refused" => "connection_refused",
        "connection dropped" => "connection_dropped",
        "i/o error" => "io_error",
        "a connection to a cluster node was lost" => "node_lost",
        _ => "error",
    }
}

impl Shared {
    /// Says at connect whether what this store writes and reads is signed: one INFO event
    /// (`kind = "store_connected"`, `signed`), and without a secret one WARN
    /// (`kind = "store_unsigned"`) naming what a writer to this Redis can then do.
    fn say_mode(&self) {
        let signed = self.breakers.signed();
        tracing::info!(
            target: "policy",
            mechanism = "store",
            kind = "store_connected",
            name = "redis",
            instance = &*self.instance,
            topology = self.topology.as_str(),
            prefix = &*self.prefix,
            signed,
            reason = if signed { "signed" } else { "unsigned" },
            "redis store connected; messages are {}",
            if signed {
                "signed with the shared secret"
            } else {
                "not signed"
            }
        );
        if !signed {
            tracing::warn!(
                target: "policy",
                mechanism = "store",
                kind = "store_unsigned",
                name = "redis",
                instance = &*self.instance,
                signed,
                reason = "no_shared_secret",
                "redis store messages are not signed: whoever can write to this redis can open breakers (each for at most its local bound), publish override sets (within their envelope) and enqueue tasks; set `RedisStoreBuilder::shared_secret`"
            );
        }
    }

    /// Tells the followers of the fleet's overrides to read the latest set again.
    fn overrides_news(&self) {
        self.overrides_news
            .send_modify(|news| *news = news.wrapping_add(1));
    }

    /// Logs the start of an outage once. Counts nothing: callers count what failed.
    fn mark_unhealthy(&self, what: &str) {
        if self.healthy.swap(false, Ordering::AcqRel) {
            tracing::warn!(
                target: "policy",
                mechanism = "store",
                kind = "store_unavailable",
                name = "redis",
                instance = &*self.instance,
                reason = outage_code(what),
                detail = what,
                "redis is unreachable ({what}): breakers keep working from their in-process mirrors; sharing is paused until it returns"
            );
        }
    }

    /// Logs the end of an outage once, re-arms the backlog warning, and asks for a re-sync.
    fn recover(&self) {
        if !self.healthy.swap(true, Ordering::AcqRel) {
            self.backlog_warned.store(false, Ordering::Release);
            tracing::info!(
                target: "policy",
                mechanism = "store",
                kind = "store_recovered",
                name = "redis",
                instance = &*self.instance,
                reason = "reachable",
                "redis is reachable again: re-syncing breaker state"
            );
            let _ = self.commands.try_send(breaker::Command::Resync);
        }
    }

    /// Queues a command for the worker; a full queue drops it (counted, warned once per
    /// outage): the mirror already holds the state, and the next re-sync repairs Redis.
    fn send(&self, command: breaker::Command) {
        if self.commands.try_send(command).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            if !self.backlog_warned.swap(true, Ordering::AcqRel) {
                tracing::warn!(
                    target: "policy",
                    mechanism = "store",
                    kind = "store_backlog",
                    name = "redis",
                    instance = &*self.instance,
                    reason = "queue_full",
                    "redis store queue is full: dropping reports; the mirror keeps its state and the next re-sync repairs Redis"
                );
            }
        }
    }
}

/// Builds a [`RedisStore`]; see [`RedisStore::builder`].
#[derive(Clone)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct RedisStoreBuilder {
    prefix: String,
    instance: Option<String>,
    timeout: Duration,
    resync_every: Duration,
    queue: usize,
    pending_capacity: usize,
    signer: Option<message::Signer>,
    /// How long the secret given to [`shared_secret`](Self::shared_secret) was: one under
    /// [`message::MIN_SECRET_BYTES`] is refused at connect.
    secret_len: Option<usize>,
    clock_tolerance: Duration,
    /// The primary's credentials behind Sentinel: never printed.
    primary_credentials: Option<(Option<String>, String)>,
    /// A private CA's certificate (PEM) for `rediss://`.
    tls_root: Option<Vec<u8>>,
}

impl fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStoreBuilder")
            .field("prefix", &self.prefix)
            .field("instance", &self.instance)
            .field("timeout", &self.timeout)
            .field("resync_every", &self.resync_every)
            .field("queue", &self.queue)
            .field("pending_capacity", &self.pending_capacity)
            .field("signer", &self.signer)
            .field("clock_tolerance", &self.clock_tolerance)
            .field(
                "primary_credentials",
                &self.primary_credentials.as_ref().map(|_| "<redacted>"),
            )
            .field("tls_root", &self.tls_root.as_ref().map(|_| "set"))
            .finish()
    }
}

impl RedisStoreBuilder {
    /// The key prefix (default `policy`), so several services can share one Redis. It may not
    /// hold `{` or `}`: the store puts each breaker's name in a hash tag of its own.
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

    /// How often state is re-synced in both directions (default 5 s), from 10 ms to a day
    /// (a longer period, `Duration::MAX` included, is a day: the re-sync is what repairs a
    /// missed message). The first re-sync comes after a random half to whole period, so that
    /// a fleet started together does not re-sync all at once.
    pub fn resync_every(mut self, every: Duration) -> Self {
        self.resync_every = every.clamp(Duration::from_millis(10), MAX_RESYNC_EVERY);
        self
    }

    /// How many reports may wait for Redis (default 4,096); past it, reports are dropped and
    /// counted ([`StoreStatus::dropped`]) until the queue drains.
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.queue = capacity.max(1);
        self
    }

    /// How many breakers not built here yet may have an opening kept for them (default
    /// 1,024). Past it, openings for further unknown names are dropped and counted
    /// ([`StoreStatus::pending_dropped`]); a breaker built later still learns its opening at
    /// the next re-sync.
    pub fn pending_capacity(mut self, capacity: usize) -> Self {
        self.pending_capacity = capacity;
        self
    }

    /// Signs every message this instance writes with HMAC-SHA256 over `secret`, and accepts
    /// only messages signed with the same secret: give every instance of the fleet the same
    /// one. The secret is kept only as keyed HMAC state, never sent to Redis, and never
    /// printed (`Debug` included). See the [module docs](self) for what it protects against.
    ///
    /// At least 32 bytes (an empty or short secret is guessable, and would still claim to
    /// sign): [`connect`](Self::connect) refuses a shorter one with
    /// [`StoreError::WeakSecret`]. `openssl rand -hex 32` makes a good one.
    pub fn shared_secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        let secret = secret.as_ref();
        self.signer = Some(message::Signer::new(secret));
        self.secret_len = Some(secret.len());
        self
    }

    /// How far apart the instances' wall clocks may be (default 30 s). With a shared secret,
    /// a signed message is refused as a replay once its opening plus this is over.
    pub fn clock_tolerance(mut self, tolerance: Duration) -> Self {
        self.clock_tolerance = tolerance;
        self
    }

    /// The credentials of the primary behind Sentinel, for
    /// [`connect_sentinel`](Self::connect_sentinel), when they differ from none (the
    /// sentinels' own come from their URLs). Kept inside the `redis` crate's connection
    /// settings and never printed.
    pub fn primary_credentials(
        mut self,
        username: Option<&str>,
        password: impl Into<String>,
    ) -> Self {
        self.primary_credentials = Some((username.map(str::to_owned), password.into()));
        self
    }

    /// Trusts `pem` (one or more PEM certificates of a private CA) for `rediss://`, instead of
    /// the platform's root certificates.
    pub fn tls_root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root = Some(pem.into());
        self
    }

    /// Connects to one Redis server (or a primary behind a stable address): `redis://`,
    /// `rediss://` (TLS) or `unix://`. Connects lazily: an
    /// unreachable Redis is logged once and degrades sharing, it is not an error. Loads the
    /// current fleet state before returning, so breakers built afterwards refuse on their very
    /// first call when the fleet has them open. Must run inside a tokio runtime: it starts the
    /// store's background tasks there.
    ///
    /// Fails only when the connection string or the prefix cannot be used; the error never
    /// repeats the connection string.
    pub async fn connect(self, url: &str) -> Result<RedisStore, StoreError> {
        let target = Target::standalone(url, self.tls_root.as_deref())
            .map_err(|_| StoreError::InvalidUrl)?;
        self.connect_to(target).await
    }

    /// Connects to a Redis Cluster through any of its nodes (`redis://host:port` or
    /// `rediss://...` each; the `redis` crate discovers the rest and follows slots as they
    /// move). Every key of one breaker shares a hash slot, and openings travel on sharded
    /// pub/sub (`SPUBLISH`/`SSUBSCRIBE`, Redis 7), so callers see no difference from a
    /// standalone Redis; see the [module docs](self). Otherwise as [`connect`](Self::connect).
    pub async fn connect_cluster<I, S>(self, nodes: I) -> Result<RedisStore, StoreError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let nodes: Vec<String> = nodes.into_iter().map(|n| n.as_ref().to_owned()).collect();
        let target = Target::cluster(&nodes, self.tls_root.as_deref())
            .map_err(|_| StoreError::InvalidUrl)?;
        self.connect_to(target).await
    }

    /// Connects to the primary that Redis Sentinel names for `service` (the sentinels'
    /// `redis://host:26379` URLs, `rediss://` for TLS to the sentinels and the primary). After
    /// a failover the store asks the sentinels again and follows the new primary; until it
    /// does, sharing is paused as in any outage and callers see nothing. The primary's
    /// credentials, when it has any: [`primary_credentials`](Self::primary_credentials).
    /// Otherwise as [`connect`](Self::connect).
    pub async fn connect_sentinel<I, S>(
        self,
        sentinels: I,
        service: &str,
    ) -> Result<RedisStore, StoreError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let sentinels: Vec<String> = sentinels
            .into_iter()
            .map(|n| n.as_ref().to_owned())
            .collect();
        let target = Target::sentinel(
            &sentinels,
            service,
            self.primary_credentials.clone(),
            self.tls_root.as_deref(),
        )
        .map_err(|_| StoreError::InvalidUrl)?;
        self.connect_to(target).await
    }

    async fn connect_to(self, target: Target) -> Result<RedisStore, StoreError> {
        if self.prefix.contains(['{', '}']) {
            return Err(StoreError::InvalidPrefix);
        }
        if let Some(bytes) = self.secret_len.filter(|&n| n < message::MIN_SECRET_BYTES) {
            return Err(StoreError::WeakSecret { bytes });
        }
        let topology = target.topology();
        {
            // rustls needs a process-wide crypto provider; one installed by the application
            // first is kept.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        // A cluster's pushed messages (sharded pub/sub) reach the store through this, once it
        // exists.
        let cell: Arc<OnceLock<Weak<Shared>>> = Arc::default();
        let on_push = {
            let cell = cell.clone();
            Arc::new(move |info: redis::PushInfo| {
                if let Some(shared) = cell.get().and_then(Weak::upgrade) {
                    shared.pushed(info);
                }
            })
        };
        let (conn, subscriber, dialer) =
            connection::open(target, self.timeout, on_push).map_err(|_| StoreError::InvalidUrl)?;
        let (commands, receiver) = mpsc::channel(self.queue);
        let (shutdown, shutdown_rx) = watch::channel(());
        let instance = self
            .instance
            .unwrap_or_else(|| format!("{:016x}", rand::random::<u64>()));
        let codec = message::Codec {
            prefix: self.prefix.clone(),
            signer: self.signer,
            clock_tolerance: self.clock_tolerance,
        };
        let shared = Arc::new(Shared {
            prefix: Arc::from(self.prefix),
            instance: Arc::from(instance),
            topology,
            timeout: self.timeout,
            healthy: AtomicBool::new(true),
            backlog_warned: AtomicBool::new(false),
            shard_subscriptions: AtomicU64::new(0),
            commands,
            stats: Stats::default(),
            breakers: breaker::Fleet::new(codec, self.pending_capacity),
            overrides_news: watch::channel(0).0,
            _shutdown: shutdown,
        });
        let _ = cell.set(Arc::downgrade(&shared));
        shared.say_mode();
        breaker::start(
            &shared,
            subscriber,
            conn.clone(),
            receiver,
            shutdown_rx,
            self.resync_every,
        )
        .await;
        Ok(RedisStore {
            shared,
            conn,
            dialer,
        })
    }
}

/// Why a store could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The connection string could not be parsed (it is not repeated here, since it may hold
    /// a password).
    #[error(
        "the redis connection string could not be parsed; expected `redis://[user:password@]host[:port][/db]`, `rediss://...` or `unix:///path/to/redis.sock`"
    )]
    InvalidUrl,
    /// The key prefix holds `{` or `}`.
    #[error(
        "the redis key prefix may not hold `{{` or `}}`: each breaker's keys get a hash tag of their own; choose a prefix without braces"
    )]
    InvalidPrefix,
    /// No tokio runtime was running.
    #[error("the redis store must be connected from inside a tokio runtime")]
    Runtime,
    /// The shared secret is shorter than 32 bytes (an empty one included).
    #[error(
        "the redis store's shared secret is {bytes} bytes, fewer than the 32 it needs; give `shared_secret` at least 32 random bytes, say the output of `openssl rand -hex 32`"
    )]
    WeakSecret {
        /// How long the secret given was.
        bytes: usize,
    },
}

/// Breaker state shared through Redis, with an in-process mirror per breaker.
///
/// See the [module docs](self) for what is shared, when, at what cost, and what is checked.
#[derive(Clone)]
pub struct RedisStore {
    shared: Arc<Shared>,
    conn: Conn,
    dialer: connection::Dialer,
}

/// What a fleet mechanism kept in a module of its own (the rate limiter's
/// [`RedisRateLimiter`](crate::limiter::RedisRateLimiter)) uses of the store.
impl RedisStore {
    /// The store's connection (cheap to clone).
    pub(crate) fn conn(&self) -> &Conn {
        &self.conn
    }

    /// Redis answered again.
    pub(crate) fn recovered(&self) {
        self.shared.recover();
    }

    /// Redis failed with `what`.
    pub(crate) fn unhealthy(&self, what: &str) {
        self.shared.mark_unhealthy(what);
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.shared.prefix)
            .field("instance", &self.shared.instance)
            .field("topology", &self.shared.topology.as_str())
            .field("healthy", &self.shared.healthy.load(Ordering::Relaxed))
            .field("signed", &self.shared.breakers.signed())
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A builder with the defaults: prefix `policy`, a random instance id, 200 ms timeouts,
    /// re-sync every 5 s, room for 4,096 queued reports and 1,024 pending openings, no shared
    /// secret.
    pub fn builder() -> RedisStoreBuilder {
        RedisStoreBuilder {
            prefix: "policy".to_owned(),
            instance: None,
            timeout: Duration::from_millis(200),
            resync_every: Duration::from_secs(5),
            queue: 4096,
            pending_capacity: 1024,
            signer: None,
            secret_len: None,
            clock_tolerance: Duration::from_secs(30),
            primary_credentials: None,
            tls_root: None,
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

    /// The key prefix.
    pub(crate) fn prefix(&self) -> &str {
        &self.shared.prefix
    }

    /// The store's signer, when it has a shared secret (at least 32 bytes): sign a record with
    /// `signer.sign(CONTEXT, store.prefix(), body)` and check one with `signer.verify(..)`,
    /// each kind of record under a context of its own.
    #[cfg_attr(
        not(feature = "overrides"),
        allow(
            dead_code,
            reason = "the fleet's override sets and the queue's entries sign with it"
        )
    )]
    pub(crate) fn signer(&self) -> Option<&Signer> {
        self.shared.breakers.codec().signer.as_ref()
    }

    /// A clone of the store's connection (clones share it).
    pub(crate) fn connection(&self) -> Conn {
        self.conn.clone()
    }

    /// A connection of its own to the same deployment, every call on it bounded by `timeout`
    /// (the durable queue's `WAIT`, which blocks the connection it is sent on).
    pub(crate) async fn dedicated_connection(&self, timeout: Duration) -> Result<Conn, RedisError> {
        self.dialer.dial(timeout).await
    }

    /// The store's bound on every Redis call.
    pub(crate) fn timeout(&self) -> Duration {
        self.shared.timeout
    }

    /// The hex HMAC-SHA256 of `body` with the store's shared secret (bound to its prefix), when
    /// it has one: the durable queue signs its entries with it.
    pub(crate) fn sign(&self, body: &[u8]) -> Option<String> {
        self.shared.breakers.codec().sign(QUEUE_ENTRY_CONTEXT, body)
    }

    /// Whether `sig` signs `body` with the store's shared secret: always without one; else the
    /// reason it does not (`unsigned`, `bad_signature`).
    pub(crate) fn verify(&self, body: &[u8], sig: Option<&str>) -> Result<(), &'static str> {
        self.shared
            .breakers
            .codec()
            .verify(QUEUE_ENTRY_CONTEXT, body, sig)
            .map_err(message::Rejection::as_str)
    }

    /// Whether the store has a shared secret (signs what it writes, checks what it reads).
    pub(crate) fn is_signed(&self) -> bool {
        self.shared.breakers.signed()
    }

    /// Whether the last Redis call succeeded.
    pub fn is_healthy(&self) -> bool {
        self.shared.healthy.load(Ordering::Relaxed)
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> StoreStatus {
        let s = &self.shared.stats;
        let mut status = StoreStatus::in_process();
        status.kind = "redis";
        status.healthy = self.is_healthy();
        status.instance = Some(self.shared.instance.clone());
        status.sent = s.sent.load(Ordering::Relaxed);
        status.failed = s.failed.load(Ordering::Relaxed);
        status.dropped = s.dropped.load(Ordering::Relaxed);
        status.received = s.received.load(Ordering::Relaxed);
        status.rejected = s.rejected.load(Ordering::Relaxed);
        status.pending = self.shared.breakers.pending_len();
        status.pending_dropped = s.pending_dropped.load(Ordering::Relaxed);
        status.subscribe_failed = s.subscribe_failed.load(Ordering::Relaxed);
        status
    }
}
