//! The queue itself: its keys, the enqueue script, the process's installed queues, and the
//! stream's figures for the snapshot.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::streams::{StreamPendingReply, StreamRangeReply};
use redis::{Script, Value};
use serde::Serialize;

use super::worker::WorkerBuilder;
use super::{ConsumerPending, QueueSettings, QueueSnapshot, TaskId};
use crate::bulkhead::Bulkhead;
use crate::deadline::Deadline;
use crate::error::ShedReason;
use crate::instruments::QueueMetrics;
use crate::observe;
use crate::redis_store::{Conn, RedisStore, describe, hash_tag};
use crate::shedding::{Decision, Thresholds, decide};
use policy_model::{WorkClass, queue_defaults};

/// The consumer group every worker of a queue reads through.
pub(super) const GROUP: &str = "workers";

/// Length check and `XADD ... MAXLEN ~` in one step: a full stream refuses instead of
/// trimming a task nobody ran.
const ENQUEUE: &str = r"
local len = redis.call('XLEN', KEYS[1])
if len >= tonumber(ARGV[1]) then
  return {0, len}
end
local entry = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*',
  'v', '1', 'id', ARGV[2], 'op', ARGV[3], 'args', ARGV[4], 'at', ARGV[5])
return {1, entry}
";

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
}

impl EnqueueError {
    /// A short code for logs and metrics: `full`, `unavailable`, `shed` or `encoding`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Full { .. } => "full",
            Self::Unavailable { .. } => "unavailable",
            Self::Shed { .. } => "shed",
            Self::Encoding { .. } => "encoding",
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
    pub(super) completed: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) redelivered: AtomicU64,
    pub(super) dead_lettered: AtomicU64,
    pub(super) abandoned: AtomicU64,
    pub(super) ack_failed: AtomicU64,
    pub(super) running: AtomicU64,
}

/// What the last look at the stream found.
#[derive(Debug, Clone, Default)]
struct Figures {
    read: bool,
    length: u64,
    pending: u64,
    consumers: Vec<ConsumerPending>,
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
    /// The numbers it was [configured](TaskQueue::configured) with, if it was: its workers
    /// start from them.
    pub(super) settings: Option<QueueSettings>,
    thresholds: Thresholds,
    yield_to: Vec<Bulkhead>,
    pub(super) store: RedisStore,
    pub(super) conn: Conn,
    script: Script,
    pub(super) counters: Counters,
    pub(super) metrics: QueueMetrics,
    figures: Mutex<Figures>,
    /// Whether this outage's warning was given.
    warned: AtomicBool,
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
            settings: self.settings,
            thresholds: self.thresholds,
            yield_to: self.yield_to,
            conn: store.connection(),
            store: store.clone(),
            script: Script::new(ENQUEUE),
            counters: Counters::default(),
            figures: Mutex::default(),
            warned: AtomicBool::new(false),
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
    /// # use policy_runtime::queue::{QueueSettings, TaskQueue};
    /// # use policy_runtime::redis_store::RedisStore;
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

    /// A worker for this queue, to be given its handlers and started.
    pub fn worker(&self) -> WorkerBuilder {
        WorkerBuilder::new(self.clone())
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
        match &result {
            Ok(()) => {
                c.enqueued.fetch_add(1, Ordering::Relaxed);
                self.inner.metrics.enqueued.increment();
                self.inner.warned.store(false, Ordering::Release);
            }
            Err(error) => {
                let counter = match error {
                    EnqueueError::Full { .. } => &c.refused_full,
                    EnqueueError::Unavailable { .. } => &c.refused_unavailable,
                    EnqueueError::Shed { .. } => &c.refused_shed,
                    EnqueueError::Encoding { .. } => &c.refused_encoding,
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
        let mut conn = inner.conn.clone();
        let reply: (u8, Value) = inner
            .script
            .key(&inner.key)
            .arg(inner.max_len)
            .arg(id.as_str())
            .arg(operation)
            .arg(encoded)
            .arg(now_ms())
            .invoke_async(&mut conn)
            .await
            .map_err(|e| EnqueueError::Unavailable {
                queue: inner.name.clone(),
                cause: describe(&e),
            })?;
        match reply {
            (1, _) => Ok(()),
            (_, length) => Err(EnqueueError::Full {
                queue: inner.name.clone(),
                length: redis::from_redis_value(length).unwrap_or(inner.max_len),
                max_len: inner.max_len,
            }),
        }
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
        if quiet {
            tracing::debug!(
                target: "policy",
                mechanism = "queue",
                kind = "enqueue_refused",
                name = &*inner.name,
                operation,
                reason = error.code(),
                "{error}"
            );
        } else {
            tracing::warn!(
                target: "policy",
                mechanism = "queue",
                kind = "enqueue_refused",
                name = &*inner.name,
                operation,
                reason = error.code(),
                "{error}"
            );
        }
    }

    /// Reads the stream's figures for the [snapshot](Self::snapshot) now: its length, its
    /// pending tasks per consumer, the age of its oldest task and its dead letters. A worker
    /// does this every second on its own.
    pub async fn refresh(&self) -> Result<(), EnqueueError> {
        let inner = &*self.inner;
        let mut conn = inner.conn.clone();
        let unavailable = |e: redis::RedisError| EnqueueError::Unavailable {
            queue: inner.name.clone(),
            cause: describe(&e),
        };
        let (length, dead, first, time): (u64, u64, StreamRangeReply, (u64, u64)) = redis::pipe()
            .cmd("XLEN")
            .arg(&inner.key)
            .cmd("XLEN")
            .arg(&inner.dead_key)
            .cmd("XRANGE")
            .arg(&inner.key)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1)
            .cmd("TIME")
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        // A stream without its group (never worked on, or emptied by a restart without
        // persistence) has nothing pending.
        let pending: StreamPendingReply = redis::cmd("XPENDING")
            .arg(&inner.key)
            .arg(GROUP)
            .query_async(&mut conn)
            .await
            .unwrap_or_default();
        let server_ms = time.0 * 1000 + time.1 / 1000;
        let oldest_age_ms = first
            .ids
            .first()
            .and_then(|entry| entry_ms(&entry.id))
            .map(|ms| server_ms.saturating_sub(ms));
        let (pending, consumers) = match pending {
            StreamPendingReply::Data(data) => (
                data.count as u64,
                data.consumers
                    .into_iter()
                    .map(|c| ConsumerPending {
                        consumer: c.name,
                        pending: c.pending as u64,
                    })
                    .collect(),
            ),
            _ => (0, Vec::new()),
        };
        inner.metrics.figures(length, pending, dead, oldest_age_ms);
        *crate::redis_store::lock(&inner.figures) = Figures {
            read: true,
            length,
            pending,
            consumers,
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
            oldest_age_ms: f.oldest_age_ms,
            dead_letters: f.dead_letters,
            enqueued: load(&c.enqueued),
            refused_full: load(&c.refused_full),
            refused_unavailable: load(&c.refused_unavailable),
            refused_shed: load(&c.refused_shed),
            completed: load(&c.completed),
            failed: load(&c.failed),
            redelivered: load(&c.redelivered),
            dead_lettered: load(&c.dead_lettered),
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
