//! Background work on a durable queue (Redis Streams): at least once, claimed after a crash, dead-lettered.
//!
//! # Background work on a durable queue (Redis Streams)
//!
//! The background pool loses what it holds when the process dies. With the `redis` feature, a
//! `TaskQueue` puts each task on a Redis stream instead, and a worker in every instance takes
//! tasks through one consumer group: delivered at least once, acknowledged only after the work
//! finished, claimed by another instance once a dead worker's visibility timeout passed, and moved
//! to a dead-letter stream with its last error after `max_deliveries` attempts. A full stream
//! (`max_len`, enforced before `XADD ... MAXLEN ~` could trim anything) and an unreachable Redis
//! refuse the enqueue, counted and logged; nothing is dropped silently. Without an installed queue
//! the same function runs on the in-process pool, unchanged:
//!
//! ```text
//! #[velocity_policy::background(queue = "embeddings", deadline = "30s")]
//! #[velocity_policy::idempotent]
//! async fn embed_document(id: u64, text: String) -> Result<(), EmbedError> { .. }
//!
//! embed_document(7, text); // enqueued (its arguments as JSON); whichever instance takes it runs it
//! ```
//!
//! A `.policy` operation says the same with `queue = embeddings` (`operation embed_document:
//! background, idempotent { queue = embeddings }`); on any other class it is an error
//! (`policy::queue-not-background`), and `policy explain` shows the enqueue as the chain's first
//! step, with the queue's numbers.
//!
//! The queue's numbers can live in the file too, in a `queue` stanza whose keys are the builders'
//! own names; each is optional and keeps the runtime's default when absent (shown in brackets):
//!
//! ```text
//! queue embeddings {
//!     max_len = 100000 // unfinished tasks the stream holds; past it, refused [10000]
//!     visibility_timeout = 30s // unacknowledged this long, another worker claims it [30s]
//!     max_deliveries = 5 // then dead-lettered with its last error [5]
//!     task_deadline = 20s // the bound on one delivery, at most 4/5 of the visibility [10s]
//!     concurrency = 4 // tasks one instance runs at once [4]
//! }
//! ```
//!
//! Declaring a queue is optional: a `queue = name` (or `#[background(queue = "name")]`) that no
//! stanza declares runs with the defaults (a name close to a declared queue's is warned,
//! `policy::undeclared-queue`). A `task_deadline` past four fifths of the visibility timeout is an
//! error (`policy::task-deadline-exceeds-visibility`: the task could be claimed and run twice at
//! once), and a zero count or duration is refused. The attribute compiles the stanza into
//! `embed_document::queue_settings()`, and `embed_document::task()` carries the same settings:
//! `TaskQueue::configured(embed_document::queue_settings())` builds the queue with its bound, and
//! its worker starts from the rest (a worker given `embed_document::task()` does too); an explicit
//! builder call still wins over the file. One queue, one entry: the file's numbers are the
//! defaults of the one `TaskQueue` of that name, never a second queue.
//!
//! ```rust,no_run
//! # #[cfg(feature = "redis")]
//! # async fn startup() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use velocity_policy::queue::{self, Handler, TaskQueue};
//!
//! let store = velocity_policy::redis_store::RedisStore::connect(&std::env::var("REDIS_URL")?).await?;
//! // With a `queue embeddings { ... }` stanza: `TaskQueue::configured(embed_document::queue_settings())`.
//! let embeddings = TaskQueue::builder("embeddings").max_len(100_000).build(&store);
//! queue::install(embeddings.clone()); // `#[background(queue = "embeddings")]` enqueues here now
//! let worker = embeddings
//!     .worker()
//!     .concurrency(4) // per instance, like the pool
//!     .visibility_timeout(Duration::from_secs(30))
//!     .max_deliveries(5)
//!     // An attributed function's handler is `embed_document::task()`; by hand:
//!     .handle(Handler::new("resize", |(path,): (String,)| async move {
//!         let _ = path;
//!         Ok::<_, std::io::Error>(())
//!     }))
//!     .start();
//! // At shutdown: stop taking tasks; what has not finished in 5 s is redelivered elsewhere.
//! let drained = worker.shutdown(Duration::from_secs(5)).await;
//! # let _ = drained;
//! # Ok(())
//! # }
//! ```
//!
//! Each task carries an id (`velocity_policy::queue::current()` inside the work) to deduplicate with. What
//! Redis acknowledged survives a restart of `redis-server` only with persistence: run it with
//! `appendonly yes`. The dashboard's `queues` table and the `policy_queue_*` metrics show each
//! queue's length, pending tasks per consumer, the age of its oldest task, redeliveries and dead
//! letters. Why direct stream commands rather than a job-queue crate, the encoding and the keys:
//! `velocity_policy_runtime::queue`.
//!
//! **Durability.** An enqueue returns once the Redis primary has the task; it survives a restart of
//! `redis-server` only with persistence (`appendonly yes`). Replication is asynchronous, so a
//! failover can lose tasks the replica had not copied: `TaskQueueBuilder::wait_for_replicas(n,
//! timeout)` makes each enqueue wait (Redis `WAIT`, on a connection of its own) and reports
//! `NotReplicated` when fewer replicas confirm. Restoring an older RDB snapshot brings back tasks
//! that had finished since, and they run again: work that must not repeat records the task ids it
//! finished. Run Redis with `maxmemory-policy noeviction` (a worker warns otherwise), and set a
//! shared secret wherever anything but this service can write to the Redis: without one, whoever
//! can write to it can run any handler with any arguments (details: `velocity_policy_runtime::queue`,
//! "Durability").
