//! The queue itself: its keys, the enqueue script, the process's installed queues, and the
//! stream's figures for the snapshot.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::{RedisError, Script, Value};
use serde::Serialize;
use tokio::sync::OnceCell;

use super::{ConsumerPending, QueueSettings, QueueSnapshot, TaskId};
use crate::bulkhead::Bulkhead;
use crate::deadline::Deadline;
use crate::error::ShedReason;
use crate::instruments::QueueMetrics;
use crate::observe;
use crate::redis_store::{Conn, RedisStore, describe, hash_tag};
use crate::shedding::{Decision, Thresholds, decide};
use velocity_policy_model::{WorkClass, queue_defaults};

/// The consumer group every worker of a queue reads through.
pub(super) const GROUP: &str = "workers";

/// The bound on every field of an entry but its arguments (`v`, `id`, `op`, `at`, `sig`), in
/// bytes: the operation's name included.
pub(super) const MAX_FIELD_BYTES: usize = 256;
/// The most fields an entry may have (the encoding has six).
pub(super) const MAX_FIELDS: usize = 8;
/// The bound on an error kept for a task (in the errors hash and its dead letter), in bytes.
pub(super) const MAX_ERROR_BYTES: usize = 1024;
/// How much of a rejected entry's arguments its dead letter keeps, in bytes.
pub(super) const REJECTED_ARGS_KEPT: usize = 1024;
/// The most consumers the snapshot lists, and the longest name it keeps of each (bytes).
const MAX_CONSUMERS_LISTED: usize = 64;
const MAX_CONSUMER_NAME_BYTES: usize = 128;

/// What a signature covers, before the fields: separates a queue entry from anything else
/// the store's secret signs.
const SIGNED_AS: &str = "velocity-policy-runtime queue entry v1";

/// A script of the queue: `entry.lua`'s checks, then its own body.
macro_rules! script {
    ($file:literal) => {
        Script::new(concat!(
            include_str!("lua/entry.lua"),
            include_str!(concat!("lua/", $file))
        ))
    };
}

/// The queue's scripts, loaded once per queue.
pub(super) struct Scripts {
    pub(super) enqueue: Script,
    pub(super) take: Script,
    pub(super) ack: Script,
    pub(super) record: Script,
    pub(super) dead_letter: Script,
    pub(super) figures: Script,
    pub(super) consumers: Script,
}

impl Scripts {
    fn new() -> Self {
        Self {
            enqueue: script!("enqueue.lua"),
            take: script!("take.lua"),
            ack: script!("ack.lua"),
            record: script!("record.lua"),
            dead_letter: script!("dead_letter.lua"),
            figures: script!("figures.lua"),
            consumers: script!("consumers.lua"),
        }
    }
}

/// What an entry's signature covers: the queue, the task's id, operation, arguments and
/// enqueue time, exactly as the stream holds them (an unambiguous JSON array).
pub(super) fn signed_body(queue: &str, id: &str, operation: &str, args: &str, at: &str) -> Vec<u8> {
    serde_json::to_vec(&(SIGNED_AS, queue, id, operation, args, at)).unwrap_or_default()
}

/// Why a task was not enqueued. Each is counted in the [`QueueSnapshot`] and logged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EnqueueError {
    /// The stream holds its bound of tasks not yet finished.
    #[error(
        "queue `{queue}` is full ({length} tasks not yet finished, bound {max_len}): the task was refused, not queued"
    )]
    Full {
        /// The queue.
        queue: Arc<str>,
        /// Tasks in the stream.
        length: u64,
        /// Its bound.
        max_len: u64,
    },
    /// Redis could not be reached (or did not answer in time): the task was not queued.
    #[error("queue `{queue}` is unavailable ({cause}): the task was refused, not queued")]
    Unavailable {
        /// The queue.
        queue: Arc<str>,
        /// What failed: its kind only, never the server's address.
        cause: String,
    },
    /// Shed: a compartment the queue yields to is busy.
    #[error("queue `{queue}` shed the task: {reason}")]
    Shed {
        /// The queue.
        queue: Arc<str>,
        /// Why.
        reason: ShedReason,
    },
    /// The arguments could not be encoded.
    #[error("queue `{queue}` could not encode the task's arguments: {cause}")]
    Encoding {
        /// The queue.
        queue: Arc<str>,
        /// What serde said.
        cause: String,
    },
    /// The encoded arguments, or the operation's name, are longer than the queue takes
    /// ([`TaskQueueBuilder::max_task_bytes`]; 256 bytes for the name): a worker would refuse
    /// the entry unread.
    #[error(
        "queue `{queue}` refused the task: {what} of {bytes} bytes, above the bound of {bound}"
    )]
    TooLarge {
        /// The queue.
        queue: Arc<str>,
        /// `arguments` or `an operation name`.
        what: &'static str,
        /// Their length.
        bytes: usize,
        /// The bound.
        bound: usize,
    },
    /// The task is in the stream, but fewer replicas than asked confirmed it within the
    /// timeout ([`TaskQueueBuilder::wait_for_replicas`]): a failover of the primary now could
    /// lose it. It may run. Enqueue it again under the same id
    /// ([`TaskQueue::enqueue_with_id`]) to be sure: its work deduplicates by id.
    #[error(
        "queue `{queue}` holds task {id}, but {acknowledged} of the {replicas} replicas asked for confirmed it in time: a failover could lose it; enqueue it again under the same id"
    )]
    NotReplicated {
        /// The queue.
        queue: Arc<str>,
        /// The task, as enqueued.
        id: TaskId,
        /// Replicas asked for.
        replicas: u32,
        /// Replicas that confirmed it.
        acknowledged: u64,
    },
}

impl EnqueueError {
    /// A short code for logs and metrics: `full`, `unavailable`, `shed`, `encoding`,
    /// `too_large` or `not_replicated`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Full { .. } => "full",
            Self::Unavailable { .. } => "unavailable",
            Self::Shed { .. } => "shed",
            Self::Encoding { .. } => "encoding",
            Self::TooLarge { .. } => "too_large",
            Self::NotReplicated { .. } => "not_replicated",
        }
    }
}

/// Counters of one queue in this process.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) enqueued: AtomicU64,
    pub(super) refused_full: AtomicU64,
    pub(super) refused_unavailable: AtomicU64,
    pub(super) refused_shed: AtomicU64,
    pub(super) refused_encoding: AtomicU64,
    pub(super) refused_too_large: AtomicU64,
    pub(super) not_replicated: AtomicU64,
    pub(super) completed: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) redelivered: AtomicU64,
    pub(super) dead_lettered: AtomicU64,
    pub(super) rejected: AtomicU64,
    pub(super) superseded: AtomicU64,
    pub(super) abandoned: AtomicU64,
    pub(super) settle_failed: AtomicU64,
    pub(super) consumers_removed: AtomicU64,
    pub(super) running: AtomicU64,
}

/// What the last look at the stream found.
#[derive(Debug, Clone, Default)]
struct Figures {
    read: bool,
    length: u64,
    pending: u64,
    consumers: Vec<ConsumerPending>,
    consumers_total: u64,
    oldest_age_ms: Option<u64>,
    dead_letters: u64,
}

pub(super) struct Inner {
    pub(super) name: Arc<str>,
    pub(super) key: String,
    pub(super) dead_key: String,
    pub(super) errors_key: String,
    pub(super) max_len: u64,
    pub(super) dead_max_len: u64,
    /// The bound on a task's encoded arguments, in bytes.
    pub(super) max_task_bytes: usize,
    /// Replicas every enqueue waits for, and for how long at most.
    replicas: Option<(u32, Duration)>,
    /// The connection replicated enqueues use (a `WAIT` blocks the connection it is sent on),
    /// opened at the first.
    replicated: OnceCell<Conn>,
    /// The numbers it was [configured](TaskQueue::configured) with, if it was: its workers
    /// start from them.
    pub(super) settings: Option<QueueSettings>,
    thresholds: Thresholds,
    yield_to: Vec<Bulkhead>,
    pub(super) store: RedisStore,
    pub(super) conn: Conn,
    pub(super) scripts: Scripts,
    pub(super) counters: Counters,
    pub(super) metrics: QueueMetrics,
    figures: Mutex<Figures>,
    /// Whether this outage's warning was given.
    warned: AtomicBool,
    /// Whether the server's eviction policy was checked.
    eviction_checked: AtomicBool,
    /// When a rejected entry was last logged at WARN (a flood of them is logged at DEBUG).
    pub(super) last_loud_rejection: Mutex<Option<std::time::Instant>>,
    /// Attributed calls' enqueues waiting for Redis, and their bound.
    detached: AtomicU32,
    max_detached: u32,
}

/// A durable queue on a Redis stream. Cloning is cheap and clones share the queue.
///
/// See the [module docs](super).
#[derive(Clone)]
pub struct TaskQueue {
    pub(super) inner: Arc<Inner>,
}

impl fmt::Debug for TaskQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskQueue")
            .field("name", &self.inner.name)
            .field("max_len", &self.inner.max_len)
            .finish_non_exhaustive()
    }
}

/// Builds a [`TaskQueue`]; see [`TaskQueue::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct TaskQueueBuilder {
    name: Arc<str>,
    settings: Option<QueueSettings>,
    max_len: u64,
    dead_max_len: u64,
    max_task_bytes: usize,
    replicas: Option<(u32, Duration)>,
    thresholds: Thresholds,
    yield_to: Vec<Bulkhead>,
    max_detached: u32,
}

impl fmt::Debug for TaskQueueBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskQueueBuilder")
            .field("name", &self.name)
            .field("max_len", &self.max_len)
            .field("dead_max_len", &self.dead_max_len)
            .finish_non_exhaustive()
    }
}

impl TaskQueueBuilder {
    /// How many unfinished tasks the stream may hold (default 10,000; at least 1). An enqueue
    /// past it is refused ([`EnqueueError::Full`]).
    pub fn max_len(mut self, tasks: u64) -> Self {
        self.max_len = tasks.max(1);
        self
    }

    /// About how many dead letters are kept (default 10,000): the oldest are trimmed past it
    /// (`MAXLEN ~`), so a flood of poison tasks cannot fill Redis.
    pub fn dead_letters_kept(mut self, letters: u64) -> Self {
        self.dead_max_len = letters.max(1);
        self
    }

    /// The bound on one task's encoded arguments, in bytes (default 1 MiB; at least 64). An
    /// enqueue past it is refused ([`EnqueueError::TooLarge`]), and a worker dead-letters an
    /// entry past it (or with any other field over 256 bytes) without reading it: the sizes
    /// are checked inside Redis, so a huge entry never crosses the wire. Give every instance
    /// of the fleet the same bound.
    pub fn max_task_bytes(mut self, bytes: usize) -> Self {
        self.max_task_bytes = bytes.max(64);
        self
    }

    /// Makes every enqueue wait until `replicas` replicas confirmed the task (Redis `WAIT`),
    /// for at most `timeout`: for tasks that must survive a failover of the primary. Fewer in
    /// time is [`EnqueueError::NotReplicated`]: the task is in the stream and may run, but a
    /// failover now could lose it. Off by default (an enqueue returns once the primary has
    /// the task; see [Durability](super#durability)).
    ///
    /// The enqueues go through a connection of their own, since a `WAIT` holds up everything
    /// behind it on its connection; each waits at most the store's timeout plus `timeout`. On
    /// a cluster the `redis` crate sends the `WAIT` to every primary and takes the smallest
    /// answer, so every primary needs `replicas` replicas; behind Sentinel the connection
    /// follows failovers as the store's does.
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replicas = (replicas > 0).then_some((replicas, timeout));
        self
    }

    /// How many attributed calls' enqueues may wait for Redis at once (default 1,024): such a
    /// call returns at once and its enqueue runs as a task of its own, so during a slow Redis
    /// these are what the process holds. Past the bound a call's task is refused as
    /// unavailable, counted and logged, instead of piling up.
    pub fn max_enqueues_in_flight(mut self, enqueues: u32) -> Self {
        self.max_detached = enqueues.max(1);
        self
    }

    /// The thresholds for the compartments it yields to (the shedding defaults unless set;
    /// only the background one is used).
    pub fn thresholds(mut self, thresholds: Thresholds) -> Self {
        self.thresholds = thresholds;
        self
    }

    /// Sheds enqueues while `compartment`'s load is at or above the background threshold, as
    /// the [background pool](crate::background::BackgroundPoolBuilder::yield_to) does.
    pub fn yield_to(mut self, compartment: &Bulkhead) -> Self {
        self.yield_to.push(compartment.clone());
        self
    }

    /// Builds the queue on `store`'s connection (and with its key prefix). Sends nothing yet.
    pub fn build(self, store: &RedisStore) -> TaskQueue {
        let tag = hash_tag(&self.name);
        let key = format!("{}:queue:{tag}", store.prefix());
        let inner = Arc::new(Inner {
            dead_key: format!("{key}:dead"),
            errors_key: format!("{key}:errors"),
            key,
            metrics: QueueMetrics::new(&self.name),
            name: self.name,
            max_len: self.max_len,
            dead_max_len: self.dead_max_len,
            max_task_bytes: self.max_task_bytes,
            replicas: self.replicas,
            replicated: OnceCell::new(),
            settings: self.settings,
            thresholds: self.thresholds,
            yield_to: self.yield_to,
            conn: store.connection(),
            store: store.clone(),
            scripts: Scripts::new(),
            counters: Counters::default(),
            figures: Mutex::default(),
            warned: AtomicBool::new(false),
            eviction_checked: AtomicBool::new(false),
            last_loud_rejection: Mutex::new(None),
            detached: AtomicU32::new(0),
            max_detached: self.max_detached,
        });
        register(&inner);
        TaskQueue { inner }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The milliseconds part of a stream entry id (`<ms>-<seq>`).
pub(super) fn entry_ms(entry: &str) -> Option<u64> {
    entry.split_once('-').and_then(|(ms, _)| ms.parse().ok())
}

impl TaskQueue {
    /// A builder for a queue named `name` with the runtime's defaults (for a queue a `.policy`
    /// file declares, [`configured`](Self::configured) starts from its numbers): 10,000
    /// unfinished tasks at most, about 10,000 dead
    /// letters kept, yielding to no compartment.
    pub fn builder(name: impl Into<Arc<str>>) -> TaskQueueBuilder {
        TaskQueueBuilder {
            name: name.into(),
            settings: None,
            max_len: u64::from(queue_defaults::MAX_LEN),
            dead_max_len: 10_000,
            max_task_bytes: 1 << 20,
            replicas: None,
            thresholds: Thresholds::default(),
            yield_to: Vec::new(),
            max_detached: 1024,
        }
    }

    /// A builder for the queue `settings` are for, starting from their numbers: a `.policy`
    /// file's `queue NAME { ... }` stanza, as an attributed function hands it over
    /// (`fn_name::queue_settings()`). The queue's [workers](Self::worker) start from the
    /// worker numbers among them; explicit builder calls still win.
    ///
    /// ```no_run
    /// # use velocity_policy_runtime::queue::{QueueSettings, TaskQueue};
    /// # use velocity_policy_runtime::redis_store::RedisStore;
    /// # async fn setup(store: RedisStore, settings: QueueSettings) {
    /// // `settings` is e.g. `embed_document::queue_settings()`.
    /// let embeddings = TaskQueue::configured(settings).build(&store);
    /// let worker = embeddings.worker().start(); // visibility, deliveries, ... from the file
    /// # }
    /// ```
    pub fn configured(settings: QueueSettings) -> TaskQueueBuilder {
        let mut builder = Self::builder(settings.name.clone());
        if let Some(max_len) = settings.max_len {
            builder = builder.max_len(max_len);
        }
        builder.settings = Some(settings);
        builder
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether it was [configured](Self::configured) from a queue's settings.
    pub(super) fn settings(&self) -> Option<&QueueSettings> {
        self.inner.settings.as_ref()
    }

    /// Enqueues a task of `operation` with `args`, under a fresh [`TaskId`]; the id once Redis
    /// acknowledged the task, or why it was refused.
    pub async fn enqueue<A: Serialize + ?Sized>(
        &self,
        operation: &str,
        args: &A,
    ) -> Result<TaskId, EnqueueError> {
        self.enqueue_with_id(TaskId::random(), operation, args)
            .await
    }

    /// As [`enqueue`](Self::enqueue), under an id of the caller's (say, one derived from the
    /// document the task is about, so the work can tell a repeat).
    pub async fn enqueue_with_id<A: Serialize + ?Sized>(
        &self,
        id: TaskId,
        operation: &str,
        args: &A,
    ) -> Result<TaskId, EnqueueError> {
        let result = self.try_enqueue(&id, operation, args).await;
        let c = &self.inner.counters;
        let enqueued = || {
            c.enqueued.fetch_add(1, Ordering::Relaxed);
            self.inner.metrics.enqueued.increment();
            self.inner.warned.store(false, Ordering::Release);
        };
        match &result {
            Ok(()) => enqueued(),
            Err(error @ EnqueueError::NotReplicated { .. }) => {
                // In the stream all the same: enqueued, and counted as not confirmed.
                enqueued();
                c.not_replicated.fetch_add(1, Ordering::Relaxed);
                self.inner.metrics.not_replicated.increment();
                self.log_refusal(operation, error);
            }
            Err(error) => {
                let counter = match error {
                    EnqueueError::Full { .. } => &c.refused_full,
                    EnqueueError::Unavailable { .. } => &c.refused_unavailable,
                    EnqueueError::Shed { .. } => &c.refused_shed,
                    EnqueueError::TooLarge { .. } => &c.refused_too_large,
                    _ => &c.refused_encoding,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                self.inner.metrics.refused(error.code());
                self.log_refusal(operation, error);
            }
        }
        result.map(|()| id)
    }

    async fn try_enqueue<A: Serialize + ?Sized>(
        &self,
        id: &TaskId,
        operation: &str,
        args: &A,
    ) -> Result<(), EnqueueError> {
        let inner = &*self.inner;
        self.yield_check()?;
        let encoded = serde_json::to_string(args).map_err(|e| EnqueueError::Encoding {
            queue: inner.name.clone(),
            cause: e.to_string(),
        })?;
        let too_large = |what, bytes, bound| EnqueueError::TooLarge {
            queue: inner.name.clone(),
            what,
            bytes,
            bound,
        };
        if operation.len() > MAX_FIELD_BYTES {
            return Err(too_large(
                "an operation name",
                operation.len(),
                MAX_FIELD_BYTES,
            ));
        }
        if encoded.len() > inner.max_task_bytes {
            return Err(too_large("arguments", encoded.len(), inner.max_task_bytes));
        }
        let at = now_ms().to_string();
        let sig = inner
            .store
            .sign(&signed_body(
                &inner.name,
                id.as_str(),
                operation,
                &encoded,
                &at,
            ))
            .unwrap_or_default();
        let unavailable = |e: RedisError| EnqueueError::Unavailable {
            queue: inner.name.clone(),
            cause: describe(&e),
        };
        let mut conn = match inner.replicas {
            None => inner.conn.clone(),
            Some((_, wait)) => inner
                .replicated
                .get_or_try_init(|| {
                    inner
                        .store
                        .dedicated_connection(inner.store.timeout().saturating_add(wait))
                })
                .await
                .map_err(unavailable)?
                .clone(),
        };
        let reply: (u8, Value) = inner
            .scripts
            .enqueue
            .key(&inner.key)
            .arg(inner.max_len)
            .arg(id.as_str())
            .arg(operation)
            .arg(encoded)
            .arg(at)
            .arg(sig)
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        if reply.0 != 1 {
            return Err(EnqueueError::Full {
                queue: inner.name.clone(),
                length: redis::from_redis_value(reply.1).unwrap_or(inner.max_len),
                max_len: inner.max_len,
            });
        }
        let Some((replicas, wait)) = inner.replicas else {
            return Ok(());
        };
        // On the connection that wrote the task: `WAIT` counts the replicas that have every
        // write this connection made so far.
        let acknowledged: u64 = redis::cmd("WAIT")
            .arg(replicas)
            .arg(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1))
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        if acknowledged < u64::from(replicas) {
            return Err(EnqueueError::NotReplicated {
                queue: inner.name.clone(),
                id: id.clone(),
                replicas,
                acknowledged,
            });
        }
        Ok(())
    }

    /// Sheds when a compartment the queue yields to is at or above the background threshold.
    fn yield_check(&self) -> Result<(), EnqueueError> {
        let inner = &*self.inner;
        let Some(busiest) = inner
            .yield_to
            .iter()
            .max_by(|a, b| a.load().total_cmp(&b.load()))
        else {
            return Ok(());
        };
        match decide(
            WorkClass::Background,
            busiest.load(),
            Deadline::MAX_BUDGET,
            Duration::ZERO,
            &inner.thresholds,
        ) {
            Decision::Admit(_) => Ok(()),
            Decision::Shed(reason) => {
                observe::shed(
                    "queue",
                    &inner.name,
                    WorkClass::Background.as_str(),
                    &reason,
                    &format_args!("{reason} of `{}`, which it yields to", busiest.name()),
                );
                Err(EnqueueError::Shed {
                    queue: inner.name.clone(),
                    reason,
                })
            }
        }
    }

    fn log_refusal(&self, operation: &str, error: &EnqueueError) {
        let inner = &*self.inner;
        // An outage refuses every enqueue: the first is a WARN, the rest DEBUG until one
        // succeeds again.
        let quiet = matches!(error, EnqueueError::Unavailable { .. })
            && inner.warned.swap(true, Ordering::AcqRel);
        // The operation is a field, never part of the message; the error's sentence names
        // only the queue (this instance's own configuration) and numbers.
        let detail = error.to_string();
        if quiet {
            tracing::debug!(
                target: "policy",
                mechanism = "queue",
                kind = "enqueue_refused",
                name = &*inner.name,
                operation,
                reason = error.code(),
                detail = detail.as_str(),
                "a task was not enqueued"
            );
        } else if matches!(error, EnqueueError::NotReplicated { .. }) {
            tracing::warn!(
                target: "policy",
                mechanism = "queue",
                kind = "not_replicated",
                name = &*inner.name,
                operation,
                reason = error.code(),
                detail = detail.as_str(),
                "a task was enqueued, but not confirmed by the replicas asked for: a failover could lose it"
            );
        } else {
            tracing::warn!(
                target: "policy",
                mechanism = "queue",
                kind = "enqueue_refused",
                name = &*inner.name,
                operation,
                reason = error.code(),
                detail = detail.as_str(),
                "a task was not enqueued"
            );
        }
    }

    /// Warns once per queue when the server may evict keys: under memory pressure Redis would
    /// then delete a stream of unfinished tasks (or its dead letters) without a word. Asks
    /// `INFO memory` (allowed where `CONFIG` is not); a server that does not say is left alone.
    pub(super) async fn check_eviction(&self) {
        let inner = &*self.inner;
        if inner.eviction_checked.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut conn = inner.conn.clone();
        let info: Result<String, _> = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut conn)
            .await;
        let Ok(info) = info else {
            // Not answered: asked again at the next worker's start.
            inner.eviction_checked.store(false, Ordering::Release);
            return;
        };
        let policy = info.lines().find_map(|line| {
            line.strip_prefix("maxmemory_policy:")
                .map(|policy| policy.trim().to_owned())
        });
        if let Some(policy) = policy
            && policy != "noeviction"
        {
            tracing::warn!(
                target: "policy",
                mechanism = "queue",
                kind = "eviction_possible",
                name = &*inner.name,
                policy = policy.as_str(),
                "the redis server may evict keys under memory pressure, the queue's tasks among them"
            );
        }
    }

    /// Reads the stream's figures for the [snapshot](Self::snapshot) now: its length, its
    /// pending tasks per consumer, the age of its oldest task and its dead letters. A worker
    /// does this every second on its own.
    pub async fn refresh(&self) -> Result<(), EnqueueError> {
        let inner = &*self.inner;
        let mut conn = inner.conn.clone();
        // One script: the consumer list is cut to its bound in Redis, and of the oldest entry
        // only its id comes back.
        type Reply = (u64, u64, String, u64, u64, u64, u64, Vec<(Vec<u8>, u64)>);
        let (length, dead, oldest, secs, micros, pending, consumers_total, consumers): Reply =
            inner
                .scripts
                .figures
                .key(&inner.key)
                .key(&inner.dead_key)
                .arg(GROUP)
                .arg(MAX_CONSUMERS_LISTED)
                .arg(MAX_CONSUMER_NAME_BYTES)
                .invoke_async(&mut conn)
                .await
                .map_err(|e| EnqueueError::Unavailable {
                    queue: inner.name.clone(),
                    cause: describe(&e),
                })?;
        let server_ms = secs * 1000 + micros / 1000;
        let oldest_age_ms = entry_ms(&oldest).map(|ms| server_ms.saturating_sub(ms));
        let consumers = consumers
            .into_iter()
            .map(|(name, pending)| ConsumerPending {
                // A name is whatever a writer gave it: shown without control characters.
                consumer: String::from_utf8_lossy(&name)
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect(),
                pending,
            })
            .collect();
        inner.metrics.figures(length, pending, dead, oldest_age_ms);
        *crate::redis_store::lock(&inner.figures) = Figures {
            read: true,
            length,
            pending,
            consumers,
            consumers_total,
            oldest_age_ms,
            dead_letters: dead,
        };
        Ok(())
    }

    /// A point-in-time view, for dashboards.
    pub fn snapshot(&self) -> QueueSnapshot {
        let inner = &*self.inner;
        let c = &inner.counters;
        let f = crate::redis_store::lock(&inner.figures).clone();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        QueueSnapshot {
            name: inner.name.clone(),
            max_len: inner.max_len,
            read: f.read,
            length: f.length,
            pending: f.pending,
            consumers: f.consumers,
            consumers_total: f.consumers_total,
            oldest_age_ms: f.oldest_age_ms,
            dead_letters: f.dead_letters,
            signed: inner.store.is_signed(),
            enqueued: load(&c.enqueued),
            refused_full: load(&c.refused_full),
            refused_unavailable: load(&c.refused_unavailable),
            refused_shed: load(&c.refused_shed),
            refused_too_large: load(&c.refused_too_large),
            not_replicated: load(&c.not_replicated),
            completed: load(&c.completed),
            failed: load(&c.failed),
            redelivered: load(&c.redelivered),
            dead_lettered: load(&c.dead_lettered),
            rejected: load(&c.rejected),
            superseded: load(&c.superseded),
            settle_failed: load(&c.settle_failed),
            consumers_removed: load(&c.consumers_removed),
            abandoned: load(&c.abandoned),
            running: load(&c.running),
        }
    }

    /// Enqueues without waiting, for an attributed function's call (which returns at once):
    /// the enqueue runs on the current tokio runtime, at most
    /// [`max_enqueues_in_flight`](TaskQueueBuilder::max_enqueues_in_flight) at once, and a
    /// refusal is counted and logged there. Outside a runtime, or past the bound, the task is
    /// refused as unavailable.
    pub(crate) fn enqueue_detached<A: Serialize + ?Sized>(
        &self,
        operation: &'static str,
        args: &A,
    ) {
        let inner = &*self.inner;
        let refuse = |error: EnqueueError| {
            let counter = match &error {
                EnqueueError::Encoding { .. } => &inner.counters.refused_encoding,
                _ => &inner.counters.refused_unavailable,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            inner.metrics.refused(error.code());
            self.log_refusal(operation, &error);
        };
        let value = match serde_json::to_value(args) {
            Ok(value) => value,
            Err(e) => {
                return refuse(EnqueueError::Encoding {
                    queue: inner.name.clone(),
                    cause: e.to_string(),
                });
            }
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return refuse(EnqueueError::Unavailable {
                queue: inner.name.clone(),
                cause: "no tokio runtime to send it from".to_owned(),
            });
        };
        if inner.detached.fetch_add(1, Ordering::AcqRel) >= inner.max_detached {
            inner.detached.fetch_sub(1, Ordering::AcqRel);
            return refuse(EnqueueError::Unavailable {
                queue: inner.name.clone(),
                cause: format!("{} enqueues already wait for redis", inner.max_detached),
            });
        }
        let waiting = Detached(self.clone());
        runtime.spawn(async move {
            let _ = waiting.0.enqueue(operation, &value).await;
        });
    }
}

/// An attributed call's enqueue in flight; gives its place back however it ends.
struct Detached(TaskQueue);

impl Drop for Detached {
    fn drop(&mut self) {
        self.0.inner.detached.fetch_sub(1, Ordering::AcqRel);
    }
}

fn queues() -> &'static Mutex<Vec<Weak<Inner>>> {
    static QUEUES: OnceLock<Mutex<Vec<Weak<Inner>>>> = OnceLock::new();
    QUEUES.get_or_init(Mutex::default)
}

fn register(inner: &Arc<Inner>) {
    let mut queues = crate::redis_store::lock(queues());
    queues.retain(|q| q.strong_count() > 0);
    queues.push(Arc::downgrade(inner));
}

/// Every live queue of the process, sorted by name.
pub(super) fn live_snapshots() -> Vec<QueueSnapshot> {
    let live: Vec<TaskQueue> = crate::redis_store::lock(queues())
        .iter()
        .filter_map(Weak::upgrade)
        .map(|inner| TaskQueue { inner })
        .collect();
    let mut snapshots: Vec<_> = live.iter().map(TaskQueue::snapshot).collect();
    snapshots.sort_by(|a, b| a.name.cmp(&b.name));
    snapshots
}

fn installed_queues() -> &'static RwLock<HashMap<Arc<str>, TaskQueue>> {
    static INSTALLED: OnceLock<RwLock<HashMap<Arc<str>, TaskQueue>>> = OnceLock::new();
    INSTALLED.get_or_init(RwLock::default)
}

/// Makes `queue` the one attributed functions of its name enqueue on
/// (`#[background(queue = "embeddings")]`); replaces a queue installed before under the same
/// name. Without an installed queue those functions run on the in-process background pool.
pub fn install(queue: TaskQueue) {
    let mut installed = crate::redis_store::write(installed_queues());
    installed.insert(queue.inner.name.clone(), queue);
    INSTALLS.fetch_add(1, Ordering::AcqRel);
}

/// How many installs there were: a lookup that found nothing need not be repeated until this
/// changes.
static INSTALLS: AtomicU64 = AtomicU64::new(0);

/// The current install count, for [`installed`]'s callers that remember a miss.
pub(crate) fn installs() -> u64 {
    INSTALLS.load(Ordering::Acquire)
}

/// The queue installed under `name`, if any.
pub fn installed(name: &str) -> Option<TaskQueue> {
    crate::redis_store::read(installed_queues())
        .get(name)
        .cloned()
}
