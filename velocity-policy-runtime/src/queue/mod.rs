//! Background work on a durable queue: a Redis stream per queue, consumed by every instance
//! through a consumer group, delivered at least once, never silently dropped (feature `redis`).
//!
//! The in-process [background pool](mod@crate::background) loses what it holds when the
//! process dies, and one instance cannot hand work to another. A [`TaskQueue`] puts each task
//! on a Redis stream instead; [`Worker`]s in every instance read it through one consumer group
//! and acknowledge a task only after it finished:
//!
//! - **Enqueue** ([`TaskQueue::enqueue`]): the task's arguments are encoded (serde, the
//!   [encoding](#the-encoding) below), signed when the store has a shared secret, and added
//!   with `XADD ... MAXLEN ~ <bound>`, in one Lua script that first compares the stream's
//!   length with the bound: a stream holding [`max_len`](TaskQueueBuilder::max_len) tasks
//!   refuses the enqueue ([`EnqueueError::Full`]), counted and logged, instead of letting
//!   `MAXLEN` trim a task nobody ran. Arguments past
//!   [`max_task_bytes`](TaskQueueBuilder::max_task_bytes) are refused
//!   ([`EnqueueError::TooLarge`]). Shedding applies first: a queue that
//!   [yields to](TaskQueueBuilder::yield_to) a busy compartment refuses background work at
//!   the background threshold, as the pool does. During a Redis outage an enqueue is refused
//!   ([`EnqueueError::Unavailable`]) after at most the store's timeout; nothing is buffered
//!   in the process.
//! - **Work** ([`Worker`]): `XREADGROUP` hands each new task to one consumer (one per
//!   instance); the worker runs it under the task deadline ([`WorkerBuilder::task_deadline`],
//!   at most four fifths of the visibility timeout) with at most
//!   [`concurrency`](WorkerBuilder::concurrency) tasks at once (the pool's bound: per
//!   instance), and only after it finished acknowledges and deletes it (`XACK`, `XDEL`). A
//!   task that failed stays pending with its error recorded; a task whose worker died stays
//!   pending with no one working on it. Either is claimed again (`XAUTOCLAIM`) by whichever
//!   worker looks first once it was idle for the
//!   [visibility timeout](WorkerBuilder::visibility_timeout), and after
//!   [`max_deliveries`](WorkerBuilder::max_deliveries) deliveries it is moved to the
//!   dead-letter stream with its last error, counted and logged, so one poison task cannot
//!   stall the queue.
//! - **Settling** a delivery (acknowledging it, recording its error, moving it to the dead
//!   letters) is one script each, which first checks that the delivery still owns the task
//!   (`XPENDING`: the same consumer, delivered as many times as when it was handed over). A
//!   delivery that ends after another worker claimed its task (it outran the visibility
//!   timeout, blocking a thread its deadline could not cut) neither acknowledges nor deletes
//!   it: it is counted as `superseded` and the current owner settles the task. The dead
//!   letter is written before the task is acknowledged, so a dead-letter stream Redis will
//!   not write to (`WRONGTYPE`) changes nothing: the task stays pending, and the failure is
//!   logged and counted (`settle_failed`).
//! - **Shutdown** ([`Worker::shutdown`]): the worker stops taking tasks, gives the ones it runs
//!   the drain timeout to finish, and abandons the rest unacknowledged: another worker claims
//!   them after the visibility timeout. Nothing is lost, and an abandoned task may run twice.
//!
//! Delivery is **at least once**: a task whose acknowledgement was lost, or that outran the
//! visibility timeout, runs again. The work must be idempotent (the attributes refuse to
//! compile otherwise), and each task carries an id ([`TaskId`], read inside the work with
//! [`current`]) for the work to deduplicate with.
//!
//! # What a writer to the Redis can do
//!
//! The [store's threat model](crate::redis_store#what-comes-from-redis-is-input-not-truth)
//! holds for the queue: whoever can write to the Redis must not be able to run code, grow an
//! instance, or lose a task without a trace. What a worker reads is input:
//!
//! - **Signed entries, with a shared secret.** With
//!   [`RedisStoreBuilder::shared_secret`](crate::redis_store::RedisStoreBuilder::shared_secret)
//!   every entry carries `sig`, an HMAC-SHA256 (the store's own signer, bound to its key
//!   prefix) over the queue's name, the task's id, operation, arguments and enqueue time. A
//!   worker dead-letters an unsigned entry (`reason` `unsigned`) or one whose signature does
//!   not match (`bad_signature`: forged, changed, signed with another secret, or moved from
//!   another queue) without running it, counts it ([`QueueSnapshot::rejected`]) and logs it
//!   (`kind = "entry_rejected"`, at WARN once a second at most, the rest at DEBUG). Give every
//!   instance the secret at once: an instance with it refuses what one without it enqueued,
//!   and what a version of this crate before signing enqueued (drain the queue before the
//!   upgrade, or enqueue its dead letters again after it).
//!   A signature stops forgeries, not replays: a genuine entry copied back into the stream
//!   runs again under its own id, as a redelivery would, which idempotent work absorbs.
//! - **Without a secret, whoever can write to the Redis can run any handler with any
//!   arguments**: `XADD <prefix>:queue:{<queue>} * v 1 id <32 hex> op refund_order args
//!   '["victim",9999]' at 0` is a task like any other. Set a secret wherever the Redis is
//!   reachable by anything but this service ([`QueueSnapshot::signed`] says which it is).
//! - **Sizes are checked inside Redis.** The scripts that hand out tasks check every field
//!   (256 bytes each, the arguments [`max_task_bytes`](TaskQueueBuilder::max_task_bytes), at
//!   most 8 fields) before anything is sent: an entry past them comes back as its sizes only,
//!   and is dead-lettered (`too_large`) with a kilobyte of its arguments as evidence. The
//!   snapshot's figures come from a script too, which lists at most 64 consumers with names
//!   cut to 128 bytes. A 100 MB entry costs an instance about 4 KB on the wire (the tests
//!   measure it).
//! - **Malformed entries** (a field the encoding does not have, a repeated one, not UTF-8, an
//!   unknown version, an id or time that does not parse) are dead-lettered unrun
//!   (`malformed`), counted and logged the same way.
//! - **Logs carry fields, not sentences built from input**: the operation, the task, the
//!   error are fields of constant messages, so an operation named `x\nINFO forged` cannot
//!   forge a log line.
//!
//! A writer can still delete tasks, acknowledge them, or fill the server's memory: that is
//! beyond what any client can prevent.
//!
//! # Why direct stream commands, not a job-queue crate
//!
//! A job-queue crate (apalis with its Redis backend is the well-kept one) brings its own worker
//! runtime, its own job type and storage layout, its own retry and its own monitoring. Each of
//! those would be a second implementation of something this crate already has, and would have
//! to be kept in step with it: the deadline, shedding, the bulkhead's per-instance bound, the
//! snapshot and the metrics. The stream commands themselves (`XADD`, `XREADGROUP`, `XACK`,
//! `XAUTOCLAIM`) are few, documented by Redis, and sent through the store's existing
//! connection (standalone, Sentinel or Cluster, with its timeouts and its redaction of
//! credentials), so the queue is a small module over the `redis` crate instead of a new
//! dependency with a runtime of its own.
//!
//! # The encoding
//!
//! One stream entry per task, version 1, every field a string:
//!
//! | field | holds |
//! |---|---|
//! | `v` | `1`, the encoding's version; a worker dead-letters an entry of a version it does not know |
//! | `id` | the task id: 32 lowercase hex digits (random, or given with [`TaskQueue::enqueue_with_id`]) |
//! | `op` | the operation (the handler's name), at most 256 bytes |
//! | `args` | the arguments as JSON (`serde_json`): for an attributed function, the tuple of its arguments; at most [`max_task_bytes`](TaskQueueBuilder::max_task_bytes) |
//! | `at` | when it was enqueued, milliseconds since the Unix epoch, by the enqueuer's clock |
//! | `sig` | with a shared secret only: the hex HMAC-SHA256 of `["velocity-policy-runtime queue entry v1", queue, id, op, args, at]` (a JSON array), bound to the store's prefix |
//!
//! A dead letter has the same fields (a rejected entry's arguments cut to a kilobyte) and four
//! more: `error` (the last delivery's error, or why the entry was refused; at most 1 KiB),
//! `reason` (`failed`, `max_deliveries`, `undecodable`, `unsigned`, `bad_signature`,
//! `too_large`, `malformed`), `deliveries` and `entry` (its id in the task stream).
//!
//! # Keys
//!
//! With the store's prefix `policy` and a queue named `embeddings`:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `policy:queue:{embeddings}` | stream | the tasks not yet finished (finished ones are deleted) |
//! | `policy:queue:{embeddings}:dead` | stream | dead letters, trimmed to about 10,000 (`MAXLEN ~`) |
//! | `policy:queue:{embeddings}:errors` | hash | each pending entry's last error |
//!
//! The consumer group is `workers`; each worker's consumer is the store's
//! [instance id](crate::redis_store::RedisStore::instance). The scripts are in
//! `velocity-policy-runtime/src/queue/lua/`.
//!
//! # Durability
//!
//! What the queue keeps, and what it cannot:
//!
//! - **A restart keeps what was persisted.** Redis keeps what it acknowledged across a
//!   restart of `redis-server` only with persistence: run it with `appendonly yes` (and
//!   `appendfsync everysec`, losing at most about a second of writes on a crash of the
//!   machine, or `always`, losing none). Without persistence a restart empties the queue. The
//!   tests restart a server with `appendonly yes` mid-run and check that every acknowledged
//!   task still completes.
//! - **A failover loses what had not reached the replica.** Replication is asynchronous: an
//!   enqueue returns once the primary has the task, and a primary that dies before its
//!   replica copied it takes the task with it when the replica is promoted (as do the
//!   acknowledgements it had not passed on: those tasks run again). For tasks that must
//!   survive a failover, [`TaskQueueBuilder::wait_for_replicas`] makes every enqueue wait
//!   (Redis `WAIT`, on a connection of its own) until so many replicas have it; fewer in
//!   time is [`EnqueueError::NotReplicated`], the task in the stream but not yet safe: enqueue
//!   it again under the same id. `WAIT` narrows the window, it does not make Redis
//!   consistent: a replica that has the write may still not be the one promoted.
//! - **Restoring an older snapshot (RDB) re-runs finished tasks.** Finished tasks are deleted
//!   from the stream; a snapshot taken before they finished brings them back, with the
//!   consumer group as it was then, and they are delivered again. Idempotent work absorbs
//!   this; work that must not repeat keeps the ids it finished ([`TaskId`]) in its own
//!   database and skips them.
//! - **Redis must not evict.** Under memory pressure with any `maxmemory-policy` but
//!   `noeviction`, Redis deletes keys, a stream of unfinished tasks among them, without a
//!   word. A worker reads the policy when it starts (`INFO memory`) and warns once per queue
//!   when it is not `noeviction` (`kind = "eviction_possible"`). With `noeviction` a full
//!   server refuses the enqueue instead ([`EnqueueError::Unavailable`]), visibly.
//! - **Stopped instances leave the group.** Each instance reads as a consumer of its own, so
//!   a fleet that restarts often would leave consumers behind for ever. A worker removes the
//!   consumers idle past a bound (an hour by default,
//!   [`WorkerBuilder::remove_idle_consumers_after`]) that hold no pending task
//!   (`XGROUP DELCONSUMER`); one that still holds tasks stays until another worker claimed
//!   them.
//!
//! # Numbers from a `.policy` file
//!
//! A `queue NAME { max_len = ...; visibility_timeout = ...; max_deliveries = ...;
//! task_deadline = ...; concurrency = ... }` stanza sets a queue's numbers in the policy files.
//! The attribute compiles them into [`QueueSettings`] (`fn_name::queue_settings()`, and on the
//! handler `fn_name::task()` with [`Handler::with_settings`]); nothing reads the files at run
//! time. Each number, in order of precedence:
//!
//! | from | how |
//! |---|---|
//! | an explicit builder call | [`TaskQueueBuilder::max_len`], [`WorkerBuilder::visibility_timeout`], ... |
//! | the stanza, on the queue | [`TaskQueue::configured`] builds the queue from its settings; its [workers](TaskQueue::worker) start from them |
//! | the stanza, on a handler | a worker given `fn_name::task()` takes its worker numbers when the queue carries none (a queue built without the stanza's `max_len` is logged, `settings_not_applied`) |
//! | the runtime's default | [`velocity_policy_model::queue_defaults`]: 10,000 tasks, 30 s, 5 deliveries, 10 s, 4 at once |
//!
//! The settings are defaults of the one queue of that name, not a second queue: the stream,
//! its consumer group and its counters are the same whichever way the numbers arrived.
//!
//! # Without Redis
//!
//! The embedded default is unchanged: an attributed function whose queue is not
//! [installed](install) runs on the in-process background pool.
//!
//! ```no_run
//! # #[cfg(feature = "redis")]
//! # mod example {
//! use std::time::Duration;
//! use velocity_policy_runtime::queue::{self, Handler, TaskQueue};
//! use velocity_policy_runtime::redis_store::RedisStore;
//!
//! # async fn setup() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::connect(&std::env::var("REDIS_URL")?).await?;
//! let embeddings = TaskQueue::builder("embeddings").max_len(100_000).build(&store);
//! queue::install(embeddings.clone());
//!
//! let worker = embeddings
//!     .worker()
//!     .concurrency(4)
//!     .handle(Handler::new("embed_document", |(document,): (String,)| async move {
//!         println!("embedding {document}");
//!         Ok::<_, std::io::Error>(())
//!     }))
//!     .start();
//!
//! let id = embeddings.enqueue("embed_document", &("doc-1".to_owned(),)).await?;
//! println!("enqueued {id}");
//! // At shutdown: what has not finished in 5 s is left to another instance.
//! let drained = worker.shutdown(Duration::from_secs(5)).await;
//! println!("{} finished, {} abandoned", drained.finished, drained.abandoned);
//! # Ok(())
//! # }
//! # }
//! # fn main() {}
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_core::de::DeserializeOwned;

use crate::defer::DeferredOutcome;

// A function's lookup of its queue: the installed queues with `redis`, none without. Chosen
// here, once.
#[cfg_attr(not(feature = "redis"), path = "no_slot.rs")]
mod slot;
pub(crate) use slot::Lookup;
#[cfg(feature = "redis")]
mod stream;
#[cfg(feature = "redis")]
mod worker;

#[cfg(feature = "redis")]
pub(crate) use stream::installs;
#[cfg(feature = "redis")]
pub use stream::{EnqueueError, TaskQueue, TaskQueueBuilder, install, installed};
#[cfg(feature = "redis")]
pub use worker::{Drained, Worker, WorkerBuilder};

/// A point-in-time view of one queue, for dashboards: this process's counts, and the stream's
/// figures as last read (every second while a worker runs, or on `TaskQueue::refresh`).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct QueueSnapshot {
    /// The queue's name.
    pub name: Arc<str>,
    /// Its bound on unfinished tasks.
    pub max_len: u64,
    /// Whether the stream's figures below were read at least once.
    pub read: bool,
    /// Unfinished tasks in the stream (waiting or being worked on), fleet-wide.
    pub length: u64,
    /// Tasks delivered and not yet acknowledged, fleet-wide.
    pub pending: u64,
    /// Pending tasks per consumer (instance): at most 64 consumers, each name cut to 128
    /// bytes (the list is cut inside Redis).
    pub consumers: Vec<ConsumerPending>,
    /// Consumers holding pending tasks, all of them (`consumers` lists at most 64).
    pub consumers_total: u64,
    /// Age of the oldest unfinished task, by the Redis server's clock.
    pub oldest_age_ms: Option<u64>,
    /// Dead letters kept in the dead-letter stream, fleet-wide.
    pub dead_letters: u64,
    /// Whether entries are signed and checked (the store has a shared secret). Without,
    /// whoever can write to the Redis can have the workers run any handler.
    pub signed: bool,
    /// Tasks this process enqueued.
    pub enqueued: u64,
    /// Enqueues refused because the stream was full.
    pub refused_full: u64,
    /// Enqueues refused because Redis could not be reached.
    pub refused_unavailable: u64,
    /// Enqueues shed under pressure.
    pub refused_shed: u64,
    /// Enqueues refused because their arguments (or operation name) were too large.
    pub refused_too_large: u64,
    /// Enqueues in the stream that fewer replicas than asked confirmed in time (counted in
    /// `enqueued` too).
    pub not_replicated: u64,
    /// Tasks this process's workers finished and acknowledged.
    pub completed: u64,
    /// Deliveries here that failed (left for redelivery or dead-lettered).
    pub failed: u64,
    /// Tasks this process claimed from a worker that had not finished them in time.
    pub redelivered: u64,
    /// Tasks this process moved to the dead-letter stream (`rejected` ones included).
    pub dead_lettered: u64,
    /// Entries this process's workers dead-lettered without running them: unsigned or
    /// wrongly signed (with a shared secret), past the size bounds, or malformed.
    pub rejected: u64,
    /// Deliveries here that ended after another worker had claimed their task: their
    /// outcome was not recorded (the task's current owner settles it).
    pub superseded: u64,
    /// Acknowledgements, error records and dead-letter moves Redis did not take (each
    /// logged; the task stays pending and is claimed again after the visibility timeout).
    pub settle_failed: u64,
    /// Idle consumers (stopped instances) this process's workers removed from the group.
    pub consumers_removed: u64,
    /// Tasks abandoned unfinished at a shutdown (left for redelivery).
    pub abandoned: u64,
    /// Tasks running here now.
    pub running: u64,
}

/// One consumer's pending tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ConsumerPending {
    /// The consumer: an instance id.
    pub consumer: String,
    /// Tasks it was given and has not acknowledged.
    pub pending: u64,
}

/// Every live queue of the process, sorted by name (none without the `redis` feature).
pub fn snapshots() -> Vec<QueueSnapshot> {
    #[cfg(feature = "redis")]
    return stream::live_snapshots();
    #[cfg(not(feature = "redis"))]
    Vec::new()
}

/// A task's id: 128 bits, written as 32 lowercase hex digits. The same on every delivery of
/// the task, so the work can deduplicate with it.
///
/// ```
/// use velocity_policy_runtime::queue::TaskId;
///
/// let id = TaskId::random();
/// assert_eq!(id.as_str().len(), 32);
/// assert_eq!(TaskId::parse(id.as_str()), Some(id.clone()));
/// assert_eq!(TaskId::parse("not hex"), None);
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(Arc<str>);

impl TaskId {
    /// A fresh random id.
    pub fn random() -> Self {
        Self(Arc::from(format!("{:032x}", rand::random::<u128>())))
    }

    /// `text` as an id, if it is 32 lowercase hex digits.
    pub fn parse(text: &str) -> Option<Self> {
        (text.len() == 32
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| Self(Arc::from(text)))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({})", self.0)
    }
}

/// The task a worker is running, as the work sees it through [`current`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivery {
    /// The task's id, the same on every delivery.
    pub id: TaskId,
    /// Which delivery this is: 1 the first time, more when it is redelivered.
    pub attempt: u32,
}

tokio::task_local! {
    static DELIVERY: Delivery;
}

/// The task being run, inside work a [`Worker`] runs; `None` elsewhere (say, on the in-process
/// pool).
///
/// ```
/// assert_eq!(velocity_policy_runtime::queue::current(), None);
/// ```
pub fn current() -> Option<Delivery> {
    DELIVERY.try_with(Clone::clone).ok()
}

/// Runs `work` with `delivery` as the [`current`] task.
#[cfg_attr(
    not(feature = "redis"),
    expect(dead_code, reason = "only a worker runs deliveries")
)]
pub(crate) async fn delivering<F: Future>(delivery: Delivery, work: F) -> F::Output {
    DELIVERY.scope(delivery, work).await
}

/// A queue's numbers as a `.policy` file's `queue NAME { ... }` stanza sets them: what the
/// attribute expansion hands over as `fn_name::queue_settings()` (and carries on
/// `fn_name::task()`), for [`TaskQueue::configured`] and the queue's
/// [worker](TaskQueue::worker) to start from. A field left `None` keeps the runtime's default
/// ([`velocity_policy_model::queue_defaults`]); an explicit builder call still wins over either.
///
/// ```
/// use std::time::Duration;
/// use velocity_policy_runtime::queue::QueueSettings;
///
/// let mut settings = QueueSettings::new("embeddings");
/// settings.max_len = Some(3);
/// settings.max_deliveries = Some(2);
/// assert_eq!(settings.name(), "embeddings");
/// assert_eq!(settings.visibility_timeout, None, "the default, 30 s");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueSettings {
    name: Arc<str>,
    /// Unfinished tasks the stream may hold ([`TaskQueueBuilder::max_len`]).
    pub max_len: Option<u64>,
    /// How long a delivered task may stay unacknowledged before another worker claims it
    /// ([`WorkerBuilder::visibility_timeout`]).
    pub visibility_timeout: Option<Duration>,
    /// Deliveries after which an unfinished task is dead-lettered
    /// ([`WorkerBuilder::max_deliveries`]).
    pub max_deliveries: Option<u32>,
    /// The bound on one delivery's run ([`WorkerBuilder::task_deadline`]).
    pub task_deadline: Option<Duration>,
    /// Tasks one instance's worker runs at once ([`WorkerBuilder::concurrency`]).
    pub concurrency: Option<u32>,
}

impl QueueSettings {
    /// The settings of queue `name`, every number the runtime's default.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self {
            name: name.into(),
            max_len: None,
            visibility_timeout: None,
            max_deliveries: None,
            task_deadline: None,
            concurrency: None,
        }
    }

    /// The queue they are for.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether a worker number (visibility timeout, deliveries, task deadline, concurrency) is
    /// set.
    #[cfg_attr(
        not(feature = "redis"),
        expect(dead_code, reason = "only a worker reads them")
    )]
    pub(crate) fn sets_worker(&self) -> bool {
        self.visibility_timeout.is_some()
            || self.max_deliveries.is_some()
            || self.task_deadline.is_some()
            || self.concurrency.is_some()
    }
}

/// How one delivery ended: `Ok`, or the error recorded for it (its failure or its refusal).
pub(crate) type Outcome = Result<(), String>;

type Run =
    dyn Fn(&str) -> Result<Pin<Box<dyn Future<Output = Outcome> + Send>>, String> + Send + Sync;

/// What a worker runs for the tasks of one operation: the operation's name, and a function of
/// the decoded arguments. An attributed function's is `its_name::task()`.
///
/// The work's output is judged as deferred work's is ([`DeferredOutcome`]): an `Err` or a
/// refusal is a failed delivery, recorded as the task's last error.
///
/// ```
/// use velocity_policy_runtime::queue::Handler;
///
/// let handler = Handler::new("resize", |(path, width): (String, u32)| async move {
///     let _ = (path, width);
///     Ok::<_, std::io::Error>(())
/// });
/// assert_eq!(handler.operation(), "resize");
/// ```
#[derive(Clone)]
pub struct Handler {
    operation: Arc<str>,
    run: Arc<Run>,
    settings: Option<QueueSettings>,
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handler")
            .field("operation", &self.operation)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Handler {
    /// Runs `work` with the arguments decoded from each task of `operation`.
    pub fn new<A, F, Fut>(operation: impl Into<Arc<str>>, work: F) -> Self
    where
        A: DeserializeOwned + Send + 'static,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: DeferredOutcome,
    {
        let run = move |args: &str| {
            let args: A = decode(args)?;
            let work = work(args);
            let outcome: Pin<Box<dyn Future<Output = Outcome> + Send>> = Box::pin(async move {
                let output = work.await;
                if let Some(refusal) = output.refusal() {
                    Err(format!("refused: {refusal}"))
                } else if let Some(failure) = output.failure() {
                    Err(failure.to_string())
                } else {
                    Ok(())
                }
            });
            Ok(outcome)
        };
        Self {
            operation: operation.into(),
            run: Arc::new(run),
            settings: None,
        }
    }

    /// Carries the numbers of the queue its tasks are enqueued on: a worker of that queue
    /// given this handler starts from them where it was not told otherwise. An attributed
    /// function's `task()` carries its `queue_settings()`.
    #[must_use]
    pub fn with_settings(mut self, settings: QueueSettings) -> Self {
        self.settings = Some(settings);
        self
    }

    /// The numbers of its queue, if it carries them.
    pub fn settings(&self) -> Option<&QueueSettings> {
        self.settings.as_ref()
    }

    /// The operation it runs.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// The work for one task's encoded arguments, or why they could not be decoded.
    #[cfg_attr(
        not(feature = "redis"),
        expect(dead_code, reason = "only a worker runs handlers")
    )]
    pub(crate) fn start(
        &self,
        args: &str,
    ) -> Result<Pin<Box<dyn Future<Output = Outcome> + Send>>, String> {
        (self.run)(args)
    }
}

fn decode<A: DeserializeOwned>(args: &str) -> Result<A, String> {
    #[cfg(feature = "redis")]
    return serde_json::from_str(args)
        .map_err(|e| format!("the arguments could not be decoded: {e}"));
    #[cfg(not(feature = "redis"))]
    {
        let _ = args;
        Err("tasks are decoded only with the `redis` feature".to_owned())
    }
}
