//! The breaker store: reports failures and openings to Redis from a background worker, learns
//! the fleet's openings from the events channel and from re-syncs, and checks each one before
//! a breaker hears of it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::{PushKind, RedisError, Script, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::connection::{Conn, Subscriber};
use super::message::{self, Codec, Kind, Opening, Rejection};
use super::{RedisStore, Shared, describe, hash_tag, lock, millis};
use crate::breaker::{
    Breaker, BreakerStore, OpenAfter, OpenCause, Sharing, StoreStatus, WeakBreaker,
};
use crate::error::Human;

/// Work for the background worker, off every caller's path.
pub(super) enum Command {
    Failure {
        breaker: WeakBreaker,
        name: Arc<str>,
        window: Duration,
        threshold: u32,
        quorum: u32,
        cooldown: Duration,
        /// A ratio breaker's report is one local opening, not one failure.
        ratio: bool,
    },
    Push {
        name: Arc<str>,
        remaining: Duration,
        window: Duration,
        kind: Kind,
        force: bool,
        cause: String,
    },
    Resync,
}

/// Where a message came from, for the rejection event's `source` field.
#[derive(Debug, Clone, Copy)]
enum Source {
    PubSub,
    Load,
    Pending,
    /// The failure reports (and the claimed probation) a report's decision checked.
    Reports,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Self::PubSub => "pubsub",
            Self::Load => "load",
            Self::Pending => "pending",
            Self::Reports => "reports",
        }
    }
}

/// An opening learned for a breaker not built here yet.
#[derive(Debug)]
struct Pending {
    received: Instant,
    /// How long it lasts from `received`.
    remaining: Duration,
    /// How long its message said it lasts, checked against the breaker once it is built.
    claimed_ms: u64,
    trip: bool,
    detail: Arc<str>,
}

impl Pending {
    fn ends(&self) -> Option<Instant> {
        self.received.checked_add(self.remaining)
    }

    fn is_over(&self, now: Instant) -> bool {
        self.ends().is_some_and(|end| end <= now)
    }
}

/// Openings for breakers not built yet, at most `capacity` names.
#[derive(Debug, Default)]
struct PendingMap {
    map: HashMap<String, Pending>,
    /// When the first entry ends, so a full map is purged only when purging can free room.
    soonest_end: Option<Instant>,
}

impl PendingMap {
    fn purge(&mut self, now: Instant) {
        if self.soonest_end.is_some_and(|end| end <= now) {
            self.map.retain(|_, p| !p.is_over(now));
            self.soonest_end = self.map.values().filter_map(Pending::ends).min();
        }
    }

    fn insert(&mut self, name: &str, pending: Pending, capacity: usize) -> bool {
        let now = Instant::now();
        if self.map.len() >= capacity && !self.map.contains_key(name) {
            self.purge(now);
            if self.map.len() >= capacity {
                return false;
            }
        }
        if let Some(end) = pending.ends() {
            self.soonest_end = Some(self.soonest_end.map_or(end, |s| s.min(end)));
        }
        self.map.insert(name.to_owned(), pending);
        true
    }
}

struct Scripts {
    report_failure: Script,
    push_opening: Script,
    open_names: Script,
    read_opening: Script,
}

/// The breaker side of a store: its scripts, its breakers, and what it learned for breakers
/// not built yet.
pub(super) struct Fleet {
    codec: Codec,
    scripts: Scripts,
    attached: Mutex<HashMap<Arc<str>, WeakBreaker>>,
    pending: Mutex<PendingMap>,
    pending_capacity: usize,
    /// When a rejection was last logged at WARN.
    last_loud_rejection: Mutex<Option<std::time::Instant>>,
}

impl Fleet {
    pub(super) fn new(codec: Codec, pending_capacity: usize) -> Self {
        Self {
            codec,
            scripts: Scripts {
                report_failure: Script::new(include_str!("lua/report_failure.lua")),
                push_opening: Script::new(include_str!("lua/push_opening.lua")),
                open_names: Script::new(include_str!("lua/open_names.lua")),
                read_opening: Script::new(include_str!("lua/read_opening.lua")),
            },
            attached: Mutex::default(),
            pending: Mutex::default(),
            pending_capacity,
            last_loud_rejection: Mutex::new(None),
        }
    }

    /// How this store signs and checks what it writes and reads.
    pub(super) fn codec(&self) -> &Codec {
        &self.codec
    }

    pub(super) fn signed(&self) -> bool {
        self.codec.signer.is_some()
    }

    pub(super) fn pending_len(&self) -> u64 {
        lock(&self.pending).map.len() as u64
    }
}

fn accepts(sharing: Sharing, trip: bool) -> bool {
    match sharing {
        Sharing::Local => false,
        Sharing::TripsOnly => trip,
        Sharing::Openings { .. } => true,
        // A way of sharing this store does not know: share nothing.
        _ => false,
    }
}

/// What a rejection event says besides its reason.
#[derive(Debug, Default, Clone, Copy)]
struct Context<'a> {
    breaker: Option<&'a str>,
    remaining_ms: Option<u64>,
    bound_ms: Option<u64>,
}

/// What one report's decision is about (with a secret, the reporting instance decides).
struct Decision<'a> {
    breaker: &'a WeakBreaker,
    name: &'a str,
    window: Duration,
    threshold: u32,
    quorum: u32,
    cooldown: Duration,
    window_text: &'a str,
}

/// How many of the newest reports the script hands back for checking: enough for the
/// threshold several times over, bounded (each is at most 384 bytes).
fn reports_returned(threshold: u32) -> u32 {
    threshold.saturating_mul(4).clamp(32, 1024)
}

/// The mirror follows an opening the fleet made on this instance's report, at once and for no
/// longer than its own cooldown.
fn follow(breaker: &WeakBreaker, open_for: Duration, cooldown: Duration) {
    if let Some(breaker) = breaker.upgrade()
        && let Some(until) = Instant::now().checked_add(open_for.min(cooldown))
    {
        breaker.apply_shared_opening(
            until,
            OpenCause::Shared {
                detail: Arc::from("the fleet's failures reached the threshold"),
            },
        );
    }
}

/// How many state reads of one load are in flight at once.
const LOAD_CONCURRENCY: usize = 32;

impl Shared {
    /// `<prefix>:breaker:{<name>}`: the hash tag puts every key of one breaker in one cluster
    /// slot.
    fn state_key(&self, name: &str) -> String {
        format!("{}:breaker:{}", self.prefix, hash_tag(name))
    }

    /// The open-breakers index: a sorted set of names scored by when their opening ends.
    fn index_key(&self) -> String {
        format!("{}:breakers:open", self.prefix)
    }

    pub(super) fn channel(&self) -> String {
        format!("{}:breaker:events", self.prefix)
    }

    /// Counts and logs a dropped message: WARN for the first and then at most once a second,
    /// DEBUG otherwise, with the same fields.
    fn reject(&self, rejection: Rejection, source: Source, context: Context<'_>) {
        let counter = match rejection {
            Rejection::PendingFull => &self.stats.pending_dropped,
            _ => &self.stats.rejected,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let loud = {
            let mut last = lock(&self.breakers.last_loud_rejection);
            let loud = last.is_none_or(|at| at.elapsed() >= Duration::from_secs(1));
            if loud {
                *last = Some(std::time::Instant::now());
            }
            loud
        };
        macro_rules! event {
            ($level:ident) => {
                tracing::$level!(
                    target: "policy",
                    kind = "store_message_rejected",
                    name = "redis",
                    reason = rejection.as_str(),
                    source = source.as_str(),
                    breaker = context.breaker,
                    remaining_ms = context.remaining_ms,
                    bound_ms = context.bound_ms,
                    instance = &*self.instance,
                    "dropped a {} record from redis ({}): it changes no breaker",
                    source.as_str(),
                    rejection.as_str()
                )
            };
        }
        if loud {
            event!(warn);
        } else {
            event!(debug);
        }
    }

    /// Checks one message from the events channel and passes its opening on.
    fn receive(&self, payload: &[u8]) {
        match self
            .breakers
            .codec
            .decode(payload, message::wall_clock_ms())
        {
            Ok(opening) => {
                let remaining = opening.remaining();
                self.learn(&opening, remaining, Source::PubSub);
            }
            Err(rejection) => self.reject(rejection, Source::PubSub, Context::default()),
        }
    }

    /// Applies an opening another instance shared to the attached breaker, within that
    /// breaker's bounds, or keeps it for a breaker not built yet. `remaining` is how long it
    /// lasts from now (at most what the message claims).
    fn learn(&self, opening: &Opening, remaining: Duration, source: Source) {
        if opening.instance == *self.instance {
            return;
        }
        let trip = opening.kind.is_trip();
        let detail: Arc<str> =
            Arc::from(format!("instance {}: {}", opening.instance, opening.cause));
        let attached = lock(&self.breakers.attached)
            .get(opening.name.as_str())
            .and_then(WeakBreaker::upgrade);
        match attached {
            Some(breaker) => {
                self.apply(
                    &breaker,
                    opening.remaining_ms,
                    remaining,
                    trip,
                    detail,
                    source,
                );
            }
            None => {
                let pending = Pending {
                    received: Instant::now(),
                    remaining,
                    claimed_ms: opening.remaining_ms,
                    trip,
                    detail,
                };
                let kept = lock(&self.breakers.pending).insert(
                    &opening.name,
                    pending,
                    self.breakers.pending_capacity,
                );
                if !kept {
                    self.reject(
                        Rejection::PendingFull,
                        source,
                        Context {
                            breaker: Some(&opening.name),
                            remaining_ms: Some(opening.remaining_ms),
                            bound_ms: None,
                        },
                    );
                }
            }
        }
    }

    /// Opens `breaker` for `remaining` if its sharing takes this kind of opening and the
    /// message's `claimed_ms` is within the breaker's own bound for it.
    fn apply(
        &self,
        breaker: &Breaker,
        claimed_ms: u64,
        remaining: Duration,
        trip: bool,
        detail: Arc<str>,
        source: Source,
    ) {
        let config = breaker.config();
        if !accepts(config.sharing, trip) {
            return;
        }
        let bound_ms = millis(config.longest_opening(trip));
        if claimed_ms > bound_ms {
            self.reject(
                Rejection::OutOfRange,
                source,
                Context {
                    breaker: Some(breaker.name()),
                    remaining_ms: Some(claimed_ms),
                    bound_ms: Some(bound_ms),
                },
            );
            return;
        }
        let Some(until) = Instant::now().checked_add(remaining) else {
            return;
        };
        self.stats.received.fetch_add(1, Ordering::Relaxed);
        breaker.apply_shared_opening(until, OpenCause::Shared { detail });
    }

    async fn run(&self, conn: &mut Conn, command: Command) {
        match command {
            Command::Failure {
                breaker,
                name,
                window,
                threshold,
                quorum,
                cooldown,
                ratio,
            } => {
                let window_text = Human(window).to_string();
                let counted = if ratio {
                    format!(
                        "{threshold} or more instances opened on their failure ratio within {window_text}"
                    )
                } else if quorum <= 1 {
                    format!("{threshold} or more failures within {window_text} across the fleet")
                } else {
                    format!(
                        "{threshold} or more failures within {window_text} from {quorum} or more instances"
                    )
                };
                let announce = |cause: &str| {
                    self.breakers.codec.encode(Opening::new(
                        Kind::Failures,
                        &name,
                        millis(cooldown),
                        &self.instance,
                        cause,
                    ))
                };
                let (on_count, on_probe) = (
                    announce(&counted),
                    announce("a probe failed right after the cooldown"),
                );
                let state = self.state_key(&name);
                let report = self.breakers.codec.failure_report(&name, &self.instance);
                let mut call = self.breakers.scripts.report_failure.prepare_invoke();
                call.key(&state)
                    .key(format!("{state}:failures"))
                    .key(format!("{state}:seq"))
                    .arg(&*self.instance)
                    .arg(millis(window))
                    .arg(threshold)
                    .arg(quorum)
                    .arg(millis(cooldown))
                    .arg(window_text.as_str())
                    .arg(on_count.as_str())
                    .arg(on_probe.as_str())
                    .arg(if report.is_some() { "1" } else { "0" })
                    .arg(report.as_deref().unwrap_or(""))
                    .arg(reports_returned(threshold))
                    .arg(message::MAX_REPORT_BYTES);
                let Some(reply): Option<Vec<Value>> = self.invoke(call.invoke_async(conn)).await
                else {
                    return;
                };
                let int = |at: usize| {
                    reply
                        .get(at)
                        .and_then(|value| redis::from_redis_value_ref::<i64>(value).ok())
                };
                match int(0) {
                    Some(2) => {
                        let (Some(open_ms), Some(which), Some(until)) = (int(1), int(2), int(3))
                        else {
                            return;
                        };
                        // The fleet opened on this report: the mirror follows at once, without
                        // waiting for its own message on the channel, and for no longer than its
                        // own cooldown.
                        follow(
                            &breaker,
                            Duration::from_millis(open_ms.unsigned_abs()),
                            cooldown,
                        );
                        let message = if which == 2 { on_probe } else { on_count };
                        self.announce(conn, &name, until, message).await;
                    }
                    Some(3) => {
                        let decision = Decision {
                            breaker: &breaker,
                            name: &name,
                            window,
                            threshold,
                            quorum,
                            cooldown,
                            window_text: &window_text,
                        };
                        self.decide(
                            conn,
                            &decision,
                            reply.get(1..).unwrap_or_default(),
                            on_count,
                            on_probe,
                        )
                        .await;
                    }
                    _ => {}
                }
            }
            Command::Push {
                name,
                remaining,
                window,
                kind,
                force,
                cause,
            } => {
                let message = self.breakers.codec.encode(Opening::new(
                    kind,
                    &name,
                    millis(remaining),
                    &self.instance,
                    &cause,
                ));
                let mut call = self.breakers.scripts.push_opening.prepare_invoke();
                call.key(self.state_key(&name))
                    .arg(&*self.instance)
                    .arg(millis(remaining))
                    .arg(kind.as_str())
                    .arg(cause)
                    .arg(millis(window))
                    .arg(if force { "1" } else { "0" })
                    .arg(message.as_str());
                let reply: Option<(i64, i64)> = self.invoke(call.invoke_async(conn)).await;
                if let Some((1, until)) = reply {
                    self.announce(conn, &name, until, message).await;
                }
            }
            Command::Resync => self.resync(conn).await,
        }
    }

    /// With a secret, the reporting instance decides what the script could not: whether the
    /// claimed probation came from a genuine opening (its message signed with the fleet's
    /// secret, and fresh within the probation), and how many of the reports in the window are
    /// signed, fresh and distinct, from how many instances. Forged members are counted as
    /// rejected and removed; the breaker opens fleet-wide only on what was checked.
    async fn decide(
        &self,
        conn: &mut Conn,
        decision: &Decision<'_>,
        // The failures counted, the claimed probation's message, then the reports.
        rest: &[Value],
        on_count: String,
        on_probe: String,
    ) {
        let bytes = |value: &Value| match value {
            Value::BulkString(bytes) => Some(bytes.clone()),
            Value::SimpleString(text) => Some(text.clone().into_bytes()),
            _ => None,
        };
        let now_ms = message::wall_clock_ms();
        let context = Context {
            breaker: Some(decision.name),
            ..Context::default()
        };
        let probation = rest.get(1).and_then(bytes).unwrap_or_default();
        if !probation.is_empty() {
            match self
                .breakers
                .codec
                .decode_within(&probation, now_ms, decision.window)
            {
                Ok(opening) if opening.name == decision.name => {
                    let cause = "a probe failed right after the cooldown";
                    self.open_fleet(conn, decision, cause, on_probe).await;
                    return;
                }
                Ok(_) => self.reject(Rejection::Malformed, Source::Reports, context),
                Err(rejection) => self.reject(rejection, Source::Reports, context),
            }
        }
        let mut reports = HashSet::new();
        let mut instances = HashSet::new();
        let mut forged = Vec::new();
        for member in rest.iter().skip(2).filter_map(bytes) {
            match self
                .breakers
                .codec
                .check_report(decision.name, &member, now_ms, decision.window)
            {
                Ok((instance, nonce)) => {
                    instances.insert(instance.clone());
                    reports.insert((instance, nonce));
                }
                Err(rejection) => {
                    self.reject(rejection, Source::Reports, context);
                    if rejection != Rejection::Stale {
                        forged.push(member);
                    }
                }
            }
        }
        if !forged.is_empty() {
            let mut zrem = redis::cmd("ZREM");
            zrem.arg(format!("{}:failures", self.state_key(decision.name)))
                .arg(forged);
            let _: Option<i64> = self.invoke(zrem.query_async(conn)).await;
        }
        let (count, distinct) = (reports.len(), instances.len());
        if count >= decision.threshold as usize && distinct >= decision.quorum.max(1) as usize {
            let cause = format!(
                "{count} failures within {} from {distinct} instance(s)",
                decision.window_text
            );
            self.open_fleet(conn, decision, &cause, on_count).await;
        }
    }

    /// Stores an opening this instance decided from checked reports (emptying the failures
    /// counted), has the mirror follow it, and announces it.
    async fn open_fleet(
        &self,
        conn: &mut Conn,
        decision: &Decision<'_>,
        cause: &str,
        message: String,
    ) {
        let state = self.state_key(decision.name);
        let mut call = self.breakers.scripts.push_opening.prepare_invoke();
        call.key(&state)
            .key(format!("{state}:failures"))
            .arg(&*self.instance)
            .arg(millis(decision.cooldown))
            .arg(Kind::Failures.as_str())
            .arg(cause)
            .arg(millis(decision.window))
            .arg("0")
            .arg(message.as_str());
        let reply: Option<(i64, i64)> = self.invoke(call.invoke_async(conn)).await;
        if let Some((1, until)) = reply {
            follow(decision.breaker, decision.cooldown, decision.cooldown);
            self.announce(conn, decision.name, until, message).await;
        }
    }

    /// Tells the fleet about an opening just stored: first the open-breakers index (so an
    /// instance that loads after this finds it), then the events channel (so every instance
    /// subscribed before that load hears it). Two commands, one per slot: the index and the
    /// channel are keys of their own, apart from the breaker's.
    async fn announce(&self, conn: &mut Conn, name: &str, until: i64, message: String) {
        let index = redis::cmd("ZADD")
            .arg(self.index_key())
            .arg("GT")
            .arg(until)
            .arg(name)
            .to_owned();
        let _: Option<i64> = self.invoke(index.query_async(conn)).await;
        let publish = redis::cmd(self.topology.publish())
            .arg(self.channel())
            .arg(message)
            .to_owned();
        let _: Option<i64> = self.invoke(publish.query_async(conn)).await;
    }

    /// One call to Redis, bounded by the timeout; counted in `sent`, and in `failed` when it
    /// fails.
    pub(super) async fn invoke<T>(
        &self,
        fut: impl Future<Output = Result<T, RedisError>>,
    ) -> Option<T> {
        self.stats.sent.fetch_add(1, Ordering::Relaxed);
        let failure = match tokio::time::timeout(self.timeout, fut).await {
            Ok(Ok(value)) => {
                self.recover();
                return Some(value);
            }
            Ok(Err(error)) => describe(&error),
            Err(_) => "timed out".to_owned(),
        };
        self.stats.failed.fetch_add(1, Ordering::Relaxed);
        self.mark_unhealthy(&failure);
        None
    }

    /// Pushes this instance's shareable local openings, then loads the fleet's.
    async fn resync(&self, conn: &mut Conn) {
        let breakers: Vec<Breaker> = lock(&self.breakers.attached)
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
                _ if cause.injected_by().is_some() => false,
                (Sharing::Local, _) => false,
                (Sharing::TripsOnly, _) => trip,
                (Sharing::Openings { quorum }, _) => trip || quorum <= 1,
                _ => false,
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
                    kind: if trip { Kind::Trip } else { Kind::Failures },
                    force: false,
                    cause: cause.to_string(),
                },
            ))
            .await;
        }
        self.load(conn).await;
    }

    /// Loads every open breaker of the fleet: the names in the open-breakers index, then each
    /// one's state from its own slot (a few at a time). The openings kept for breakers not
    /// built yet are replaced by what Redis holds now. At most as many names are read as
    /// could be kept: every breaker built here first, then up to the pending bound.
    async fn load(&self, conn: &mut Conn) {
        let mut call = self.breakers.scripts.open_names.prepare_invoke();
        call.key(self.index_key())
            .arg(self.breakers.pending_capacity)
            .arg(message::MAX_NAME_BYTES);
        for name in lock(&self.breakers.attached).keys() {
            call.arg(&**name);
        }
        let Some((oversized, names)): Option<(u64, Vec<Vec<u8>>)> =
            self.invoke(call.invoke_async(conn)).await
        else {
            return;
        };
        // Sizes were checked by the script: an oversized name never crossed the wire.
        for _ in 0..oversized {
            self.reject(Rejection::TooLarge, Source::Load, Context::default());
        }
        let names: Vec<String> = names
            .into_iter()
            .filter_map(|name| match String::from_utf8(name) {
                Ok(name) => Some(name),
                Err(_) => {
                    self.reject(Rejection::Malformed, Source::Load, Context::default());
                    None
                }
            })
            .collect();
        let reads = futures_util::stream::iter(names.into_iter().map(|name| {
            let mut conn = conn.clone();
            async move {
                let mut call = self.breakers.scripts.read_opening.prepare_invoke();
                call.key(self.state_key(&name))
                    .arg(message::MAX_MESSAGE_BYTES);
                let row: Option<(String, Vec<u8>, u8)> =
                    self.invoke(call.invoke_async(&mut conn)).await;
                (name, row)
            }
        }))
        .buffer_unordered(LOAD_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
        if reads.iter().any(|(_, row)| row.is_none()) {
            // Part of the fleet's state could not be read: keep what is kept until a load
            // that reads it all.
            return;
        }
        *lock(&self.breakers.pending) = PendingMap::default();
        let now_ms = message::wall_clock_ms();
        for (name, row) in reads {
            let Some((remaining, payload, too_large)) = row else {
                continue;
            };
            let context = Context {
                breaker: Some(&name),
                ..Context::default()
            };
            if too_large != 0 {
                self.reject(Rejection::TooLarge, Source::Load, context);
                continue;
            }
            let Ok(server_ms) = remaining.parse::<u64>() else {
                self.reject(Rejection::Malformed, Source::Load, context);
                continue;
            };
            if server_ms == 0 {
                // Ended between the index and the read.
                continue;
            }
            let opening = match self.breakers.codec.decode(&payload, now_ms) {
                // A message moved into another breaker's state is not that breaker's.
                Ok(opening) if opening.name != name => Err(Rejection::Malformed),
                decoded => decoded,
            };
            match opening {
                Ok(opening) => {
                    // The server's clock says how much is left; never more than the message
                    // claimed.
                    let remaining = Duration::from_millis(server_ms.min(opening.remaining_ms));
                    self.learn(&opening, remaining, Source::Load);
                }
                Err(rejection) => self.reject(rejection, Source::Load, context),
            }
        }
    }

    /// A message the cluster connection pushed: an opening on the sharded channel, a
    /// confirmation of the subscription (after the first: a re-subscription, so a re-sync
    /// repairs what was missed), or a lost node connection.
    pub(super) fn pushed(&self, info: redis::PushInfo) {
        match info.kind {
            PushKind::SMessage | PushKind::Message => match info.data.as_slice() {
                #[cfg(feature = "overrides")]
                [Value::BulkString(channel), _]
                    if channel.as_slice() == self.overrides_channel().as_bytes() =>
                {
                    self.overrides_news();
                }
                [_, Value::BulkString(payload)] => self.receive(payload),
                _ => {}
            },
            PushKind::SSubscribe if self.shard_subscriptions.fetch_add(1, Ordering::AcqRel) > 0 => {
                self.recover();
                let _ = self.commands.try_send(Command::Resync);
                self.overrides_news();
            }
            PushKind::Disconnection => {
                self.stats.subscribe_failed.fetch_add(1, Ordering::Relaxed);
                self.mark_unhealthy("a connection to a cluster node was lost");
            }
            _ => {}
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
        let shared = &*self.shared;
        lock(&shared.breakers.attached).insert(breaker.name_arc().clone(), breaker.downgrade());
        let pending = lock(&shared.breakers.pending).map.remove(breaker.name());
        if let Some(pending) = pending {
            // An opening too long to end on this clock is still checked, and dropped, by the
            // breaker's bound.
            let remaining = pending.ends().map_or(pending.remaining, |end| {
                end.saturating_duration_since(Instant::now())
            });
            if remaining.is_zero() {
                return;
            }
            shared.apply(
                breaker,
                pending.claimed_ms,
                remaining,
                pending.trip,
                pending.detail,
                Source::Pending,
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
                ratio: false,
            });
        }
    }

    fn opened(&self, breaker: &Breaker, until: Instant, cause: &OpenCause) {
        let config = breaker.config();
        let remaining = until.saturating_duration_since(Instant::now());
        match (config.sharing, cause, config.open_after) {
            (Sharing::Local, _, _) | (_, OpenCause::Shared { .. }, _) => {}
            // A drill's opening is this instance's own, whatever it injected: never shared.
            _ if cause.injected_by().is_some() => {}
            (_, OpenCause::Tripped { .. }, _) => self.shared.send(Command::Push {
                name: breaker.name_arc().clone(),
                remaining,
                window: config.open_after.window(),
                kind: Kind::Trip,
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
                    ratio: false,
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
                    ratio: true,
                });
            }
            // A way of sharing or a rule this store does not know: nothing is shared.
            _ => {}
        }
    }
}

/// Starts the subscriber and waits (boundedly) for its subscription, loads the fleet's state,
/// then starts the worker and the periodic re-sync. Subscribing before loading leaves no gap:
/// an opening announced after the load's read is heard on the channel, and one announced
/// before it is in the index the load reads.
pub(super) async fn start(
    shared: &Arc<Shared>,
    subscriber: Subscriber,
    conn: Conn,
    commands: mpsc::Receiver<Command>,
    shutdown: watch::Receiver<()>,
    resync_every: Duration,
) {
    let (subscribed, subscribed_rx) = oneshot::channel();
    match subscriber {
        Subscriber::Cluster(conn) => {
            tokio::spawn(shard_subscriber(
                Arc::downgrade(shared),
                conn,
                shared.channel(),
                shutdown.clone(),
                subscribed,
            ));
        }
        subscriber => {
            tokio::spawn(self::subscriber(
                Arc::downgrade(shared),
                subscriber,
                shared.channel(),
                shutdown.clone(),
                subscribed,
            ));
        }
    }
    // Openings published from now on reach this instance: wait (boundedly) for the
    // subscription before the load and the first admission decision.
    let _ = tokio::time::timeout(shared.timeout, subscribed_rx).await;
    let mut first = conn.clone();
    shared.load(&mut first).await;
    tokio::spawn(worker(
        Arc::downgrade(shared),
        conn,
        commands,
        shutdown.clone(),
    ));
    tokio::spawn(resyncer(Arc::downgrade(shared), resync_every, shutdown));
}

async fn worker(
    shared: Weak<Shared>,
    mut conn: Conn,
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
        // The backlog is gone while Redis answers: a later one is worth a warning again.
        // During an outage only the recovery re-arms it, so an outage warns once.
        if commands.is_empty() && shared.healthy.load(Ordering::Acquire) {
            shared.backlog_warned.store(false, Ordering::Release);
        }
    }
}

async fn subscriber(
    shared: Weak<Shared>,
    subscriber: Subscriber,
    channel: String,
    mut shutdown: watch::Receiver<()>,
    subscribed: oneshot::Sender<()>,
) {
    let mut subscribed = Some(subscribed);
    let mut backoff = Duration::from_millis(100);
    let mut first = true;
    loop {
        let Some(timeout) = shared.upgrade().map(|s| s.timeout) else {
            return;
        };
        let connected = tokio::time::timeout(timeout, async {
            let mut pubsub = subscriber.pubsub().await?;
            pubsub.subscribe(&channel).await?;
            #[cfg(feature = "overrides")]
            if let Some(shared) = shared.upgrade() {
                pubsub.subscribe(shared.overrides_channel()).await?;
            }
            Ok::<_, RedisError>(pubsub)
        })
        .await;
        let failure = match connected {
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
                        // And an override set published then is read again.
                        shared.overrides_news();
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
                    #[cfg(feature = "overrides")]
                    if message.get_channel_name() == shared.overrides_channel() {
                        shared.overrides_news();
                        continue;
                    }
                    shared.receive(message.get_payload_bytes());
                }
                "the pub/sub connection was lost".to_owned()
            }
            Ok(Err(error)) => describe(&error),
            Err(_) => "timed out".to_owned(),
        };
        if let Some(shared) = shared.upgrade() {
            shared
                .stats
                .subscribe_failed
                .fetch_add(1, Ordering::Relaxed);
            shared.mark_unhealthy(&failure);
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = shutdown.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// Subscribes to the sharded events channel once (retrying until the cluster answers); the
/// `redis` crate keeps the subscription on whichever node owns the channel's slot from then on,
/// and the pushes arrive at [`Shared::pushed`].
async fn shard_subscriber(
    shared: Weak<Shared>,
    mut cluster: redis::cluster_async::ClusterConnection,
    channel: String,
    mut shutdown: watch::Receiver<()>,
    subscribed: oneshot::Sender<()>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let Some(timeout) = shared.upgrade().map(|s| s.timeout) else {
            return;
        };
        let subscribing = async {
            cluster.ssubscribe(&channel).await?;
            #[cfg(feature = "overrides")]
            if let Some(shared) = shared.upgrade() {
                cluster.ssubscribe(shared.overrides_channel()).await?;
            }
            Ok::<_, RedisError>(())
        };
        let failure = match tokio::time::timeout(timeout, subscribing).await {
            Ok(Ok(())) => {
                let _ = subscribed.send(());
                return;
            }
            Ok(Err(error)) => describe(&error),
            Err(_) => "timed out".to_owned(),
        };
        if let Some(shared) = shared.upgrade() {
            shared
                .stats
                .subscribe_failed
                .fetch_add(1, Ordering::Relaxed);
            shared.mark_unhealthy(&failure);
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = shutdown.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

async fn resyncer(shared: Weak<Shared>, every: Duration, mut shutdown: watch::Receiver<()>) {
    // A fleet that starts together (a deploy, a restart) would re-sync together, every
    // instance in the same few milliseconds, for as long as it runs: the first re-sync comes
    // after a random half to whole period instead, which spreads the fleet's over half of it.
    // The builder bounds `every` (at most a day), and the arithmetic saturates besides.
    let first = every / 2 + (every / 2).mul_f64(rand::random::<f64>());
    let start = Instant::now()
        .checked_add(first)
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(24 * 3600));
    let mut tick = tokio::time::interval_at(start, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let _ = shared.commands.try_send(Command::Resync);
        // A published override set this instance missed is read at the next re-sync.
        shared.overrides_news();
    }
}
