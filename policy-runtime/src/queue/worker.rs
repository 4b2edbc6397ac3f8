//! A queue's worker: reads through the consumer group, runs each task under its deadline with a
//! bounded number at once, acknowledges after it finished, claims what dead workers left, and
//! dead-letters what keeps failing.

use std::collections::HashMap;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::FutureExt;
use redis::RedisError;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamPendingCountReply, StreamReadReply};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::stream::{GROUP, TaskQueue};
use super::{Delivery, Handler, Outcome, QueueSettings, TaskId, delivering};
use crate::redis_store::describe;
use policy_model::queue_defaults;

/// Builds and starts a [`Worker`]; see [`TaskQueue::worker`].
///
/// Each number comes from, in order: this builder's own call; the
/// [settings](super::QueueSettings) the queue was [configured](TaskQueue::configured) with, or
/// else those a [handler](Self::handle) of this queue carries (an attributed function's
/// `task()` carries its `.policy` queue stanza's); the runtime's default
/// ([`policy_model::queue_defaults`]).
#[must_use = "a worker does nothing until `start` is called"]
pub struct WorkerBuilder {
    queue: TaskQueue,
    handlers: HashMap<Arc<str>, Handler>,
    /// What this builder was told, each `None` until a call sets it.
    explicit: QueueSettings,
    poll_every: Duration,
    refresh_every: Duration,
}

impl fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let numbers = self.numbers();
        f.debug_struct("WorkerBuilder")
            .field("queue", &self.queue.name())
            .field("handlers", &self.handlers.keys().collect::<Vec<_>>())
            .field("concurrency", &numbers.concurrency)
            .field("visibility", &numbers.visibility)
            .field("max_deliveries", &numbers.max_deliveries)
            .field("task_deadline", &numbers.task_deadline)
            .finish_non_exhaustive()
    }
}

/// The worker numbers in force, resolved.
struct Numbers {
    concurrency: u32,
    visibility: Duration,
    max_deliveries: u32,
    task_deadline: Duration,
}

impl WorkerBuilder {
    pub(super) fn new(queue: TaskQueue) -> Self {
        Self {
            explicit: QueueSettings::new(queue.inner.name.clone()),
            queue,
            handlers: HashMap::new(),
            poll_every: Duration::from_millis(50),
            refresh_every: Duration::from_secs(1),
        }
    }

    /// The numbers in force: this builder's, else the queue's settings (or its handlers'),
    /// else the defaults.
    fn numbers(&self) -> Numbers {
        let inherited = self
            .queue
            .settings()
            .filter(|s| s.sets_worker())
            .or_else(|| {
                self.handlers
                    .values()
                    .filter_map(Handler::settings)
                    .find(|s| s.name() == self.queue.name())
            });
        let pick = |own: &dyn Fn(&QueueSettings) -> Option<u64>, default: u64| {
            own(&self.explicit)
                .or_else(|| inherited.and_then(own))
                .unwrap_or(default)
        };
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let concurrency = pick(
            &|s| s.concurrency.map(u64::from),
            u64::from(queue_defaults::CONCURRENCY),
        );
        let max_deliveries = pick(
            &|s| s.max_deliveries.map(u64::from),
            u64::from(queue_defaults::MAX_DELIVERIES),
        );
        let visibility = Duration::from_millis(pick(
            &|s| s.visibility_timeout.map(ms),
            ms(queue_defaults::VISIBILITY_TIMEOUT),
        ))
        .max(Duration::from_millis(10));
        let task_deadline = Duration::from_millis(pick(
            &|s| s.task_deadline.map(ms),
            ms(queue_defaults::TASK_DEADLINE),
        ));
        Numbers {
            concurrency: u32::try_from(concurrency).unwrap_or(u32::MAX).max(1),
            visibility,
            max_deliveries: u32::try_from(max_deliveries).unwrap_or(u32::MAX).max(1),
            task_deadline: task_deadline.min(visibility),
        }
    }

    /// Runs the tasks of `handler`'s operation. A task of an operation no handler runs is a
    /// failed delivery (`no handler`), redelivered and in the end dead-lettered: give every
    /// worker of a queue the same handlers.
    ///
    /// A handler that carries its queue's [settings](Handler::with_settings) (an attributed
    /// function's `task()`) gives this worker its numbers, unless the queue was configured
    /// with its own. When they bound the queue itself (`max_len`) and the queue was built
    /// without them, a warning says so: build it with [`TaskQueue::configured`].
    pub fn handle(mut self, handler: Handler) -> Self {
        if let Some(settings) = handler.settings()
            && settings.name() == self.queue.name()
            && self.queue.settings().is_none()
            && settings
                .max_len
                .is_some_and(|max_len| max_len != self.queue.inner.max_len)
        {
            tracing::warn!(
                target: "policy::queue",
                event = "settings_not_applied",
                queue = %self.queue.name(),
                operation = %handler.operation(),
                max_len = self.queue.inner.max_len,
                policy_max_len = settings.max_len,
                "queue `{}` was built without its policy settings: build it with `TaskQueue::configured({}::queue_settings())`",
                self.queue.name(),
                handler.operation(),
            );
        }
        self.handlers.insert(handler.operation.clone(), handler);
        self
    }

    /// Tasks this instance runs at once (default 4, the background pool's; at least 1): the
    /// bound is per instance, like a bulkhead's.
    pub fn concurrency(mut self, tasks: u32) -> Self {
        self.explicit.concurrency = Some(tasks.max(1));
        self
    }

    /// How long a delivered task may stay unacknowledged before another worker claims it
    /// (default 30 s). Keep it above the [task deadline](Self::task_deadline): a task still
    /// running past it may be claimed and run twice. The task deadline is lowered to fit.
    pub fn visibility_timeout(mut self, timeout: Duration) -> Self {
        self.explicit.visibility_timeout = Some(timeout.max(Duration::from_millis(10)));
        self
    }

    /// Deliveries after which a task that has not finished goes to the dead-letter stream
    /// (default 5; at least 1).
    pub fn max_deliveries(mut self, deliveries: u32) -> Self {
        self.explicit.max_deliveries = Some(deliveries.max(1));
        self
    }

    /// The bound on one delivery's run (default 10 s, at most the visibility timeout); an
    /// expired delivery is a failed one. The work's own deadline, when it has one, applies
    /// inside it.
    pub fn task_deadline(mut self, deadline: Duration) -> Self {
        self.explicit.task_deadline = Some(deadline);
        self
    }

    /// How long the worker waits before reading again when the stream had nothing for it
    /// (default 50 ms).
    pub fn poll_every(mut self, every: Duration) -> Self {
        self.poll_every = every.max(Duration::from_millis(1));
        self
    }

    /// How often the worker reads the stream's figures for the snapshot (default 1 s).
    pub fn refresh_every(mut self, every: Duration) -> Self {
        self.refresh_every = every.max(Duration::from_millis(10));
        self
    }

    /// Starts the worker on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start(self) -> Worker {
        let numbers = self.numbers();
        let state = Arc::new(State {
            consumer: Arc::from(self.queue.inner.store.instance()),
            task_deadline: numbers.task_deadline,
            queue: self.queue,
            handlers: self.handlers,
            concurrency: numbers.concurrency as usize,
            visibility: numbers.visibility,
            max_deliveries: numbers.max_deliveries,
            poll_every: self.poll_every,
            refresh_every: self.refresh_every,
        });
        let (stop, stopped) = watch::channel(false);
        let run = tokio::spawn(state.clone().run(stopped));
        Worker { state, stop, run }
    }
}

/// What a worker shares with the tasks it runs.
struct State {
    queue: TaskQueue,
    consumer: Arc<str>,
    handlers: HashMap<Arc<str>, Handler>,
    concurrency: usize,
    visibility: Duration,
    max_deliveries: u32,
    task_deadline: Duration,
    poll_every: Duration,
    refresh_every: Duration,
}

/// A running worker of one queue. Stop it with [`shutdown`](Self::shutdown); dropping it
/// stops it too, abandoning what it runs.
///
/// See the [module docs](super).
pub struct Worker {
    state: Arc<State>,
    stop: watch::Sender<bool>,
    run: tokio::task::JoinHandle<JoinSet<()>>,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("queue", &self.state.queue.name())
            .field("consumer", &self.state.consumer)
            .field("concurrency", &self.state.concurrency)
            .finish_non_exhaustive()
    }
}

/// How a worker's shutdown went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Drained {
    /// Tasks that were running at the shutdown and ended within the drain timeout.
    pub finished: u64,
    /// Tasks still running at the end of the drain timeout: dropped unacknowledged, so another
    /// worker claims them after the visibility timeout.
    pub abandoned: u64,
}

impl Worker {
    /// The consumer name it reads as (the store's instance id).
    pub fn consumer(&self) -> &str {
        &self.state.consumer
    }

    /// Stops taking tasks, waits at most `drain` for the ones running, and abandons the rest
    /// unacknowledged (they are redelivered to another worker after the visibility timeout).
    pub async fn shutdown(mut self, drain: Duration) -> Drained {
        let _ = self.stop.send(true);
        let Ok(mut tasks) = (&mut self.run).await else {
            return Drained {
                finished: 0,
                abandoned: 0,
            };
        };
        let mut finished = 0;
        // `Duration::MAX` ("wait for everything") saturates: tokio's sleep takes it, where
        // `Instant + Duration` would overflow.
        let ends = tokio::time::sleep(drain);
        tokio::pin!(ends);
        while !tasks.is_empty() {
            let next = tokio::select! {
                joined = tasks.join_next() => Ok(joined),
                () = &mut ends => Err(()),
            };
            match next {
                Ok(Some(_)) => finished += 1,
                Ok(None) | Err(_) => break,
            }
        }
        let abandoned = tasks.len() as u64;
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        let counters = &self.state.queue.inner.counters;
        counters.abandoned.fetch_add(abandoned, Ordering::Relaxed);
        if abandoned > 0 {
            tracing::warn!(
                target: "policy",
                mechanism = "queue",
                kind = "tasks_abandoned",
                name = self.state.queue.name(),
                count = abandoned,
                "shutdown abandoned {abandoned} unfinished tasks of queue `{}`: another worker claims them after the visibility timeout",
                self.state.queue.name()
            );
        }
        Drained {
            finished,
            abandoned,
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// A task read from the stream, with how many times it was delivered.
struct Entry {
    stream_id: StreamId,
    deliveries: u32,
}

/// A task's fields, in the encoding's version 1.
struct Task {
    id: TaskId,
    operation: String,
    args: String,
}

fn parse(entry: &StreamId) -> Result<Task, String> {
    match entry.get::<String>("v").as_deref() {
        Some("1") => {}
        Some(other) => return Err(format!("unknown encoding version `{other}`")),
        None => return Err("no encoding version".to_owned()),
    }
    let id = entry
        .get::<String>("id")
        .and_then(|id| TaskId::parse(&id))
        .ok_or("no task id")?;
    let operation = entry.get::<String>("op").ok_or("no operation")?;
    let args = entry.get::<String>("args").ok_or("no arguments")?;
    Ok(Task {
        id,
        operation,
        args,
    })
}

fn is_nogroup(error: &RedisError) -> bool {
    error.code() == Some("NOGROUP")
}

impl State {
    async fn run(self: Arc<Self>, mut stopped: watch::Receiver<bool>) -> JoinSet<()> {
        let mut tasks = JoinSet::new();
        let mut group_ready = self.ensure_group().await.is_ok();
        let mut cursor = "0-0".to_owned();
        let mut last_claim: Option<Instant> = None;
        let mut last_refresh: Option<Instant> = None;
        let mut idle = self.poll_every;
        loop {
            if *stopped.borrow() {
                break;
            }
            while tasks.try_join_next().is_some() {}
            if last_refresh.is_none_or(|at| at.elapsed() >= self.refresh_every) {
                last_refresh = Some(Instant::now());
                let _ = self.queue.refresh().await;
            }
            let free = self.concurrency.saturating_sub(tasks.len());
            if free == 0 {
                tokio::select! {
                    _ = tasks.join_next() => {}
                    _ = stopped.changed() => break,
                }
                continue;
            }
            if !group_ready {
                group_ready = self.ensure_group().await.is_ok();
            }
            let mut entries = Vec::new();
            let mut failed = false;
            // Claim what other workers left, at most every half visibility timeout.
            if last_claim.is_none_or(|at| at.elapsed() >= self.visibility / 2) {
                match self.claim(&mut cursor, free).await {
                    Ok(claimed) => {
                        // The cursor returns to the start when a pass is complete: only then
                        // wait for the next one.
                        if cursor == "0-0" || claimed.is_empty() {
                            last_claim = Some(Instant::now());
                        }
                        entries = claimed;
                    }
                    Err(error) => {
                        failed = true;
                        group_ready &= !is_nogroup(&error);
                    }
                }
            }
            if entries.len() < free {
                match self.read_new(free - entries.len()).await {
                    Ok(new) => entries.extend(new),
                    Err(error) => {
                        failed = true;
                        group_ready &= !is_nogroup(&error);
                    }
                }
            }
            if entries.is_empty() {
                // Nothing to do, or Redis is away: wait longer each time it fails, up to 1 s.
                idle = if failed {
                    (idle * 2).min(Duration::from_secs(1))
                } else {
                    self.poll_every
                };
                tokio::select! {
                    () = tokio::time::sleep(idle) => {}
                    _ = stopped.changed() => break,
                }
                continue;
            }
            idle = self.poll_every;
            for entry in entries {
                tasks.spawn(self.clone().deliver(entry));
            }
        }
        tasks
    }

    async fn ensure_group(&self) -> Result<(), RedisError> {
        let inner = &*self.queue.inner;
        let mut conn = inner.conn.clone();
        let created: Result<(), RedisError> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&inner.key)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut conn)
            .await;
        match created {
            Err(e) if e.code() != Some("BUSYGROUP") => Err(e),
            _ => Ok(()),
        }
    }

    async fn read_new(&self, count: usize) -> Result<Vec<Entry>, RedisError> {
        let inner = &*self.queue.inner;
        let mut conn = inner.conn.clone();
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&*self.consumer)
            .arg("COUNT")
            .arg(count)
            .arg("STREAMS")
            .arg(&inner.key)
            .arg(">")
            .query_async(&mut conn)
            .await?;
        Ok(reply
            .into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|k| k.ids)
            .map(|stream_id| Entry {
                stream_id,
                deliveries: 1,
            })
            .collect())
    }

    /// `XAUTOCLAIM`s tasks idle past the visibility timeout, then asks `XPENDING` how often
    /// each was delivered (the claim counted one more).
    async fn claim(&self, cursor: &mut String, count: usize) -> Result<Vec<Entry>, RedisError> {
        let inner = &*self.queue.inner;
        let mut conn = inner.conn.clone();
        let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
            .arg(&inner.key)
            .arg(GROUP)
            .arg(&*self.consumer)
            .arg(u64::try_from(self.visibility.as_millis()).unwrap_or(u64::MAX))
            .arg(&*cursor)
            .arg("COUNT")
            .arg(count)
            .query_async(&mut conn)
            .await?;
        cursor.clone_from(&reply.next_stream_id);
        if !reply.deleted_ids.is_empty() {
            let _: Result<(), _> = redis::cmd("HDEL")
                .arg(&inner.errors_key)
                .arg(&reply.deleted_ids)
                .query_async(&mut conn)
                .await;
        }
        let (Some(first), Some(last)) = (reply.claimed.first(), reply.claimed.last()) else {
            return Ok(Vec::new());
        };
        let counts: StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(&inner.key)
            .arg(GROUP)
            .arg(&first.id)
            .arg(&last.id)
            .arg(reply.claimed.len())
            .arg(&*self.consumer)
            .query_async(&mut conn)
            .await?;
        let counts: HashMap<String, usize> = counts
            .ids
            .into_iter()
            .map(|p| (p.id, p.times_delivered))
            .collect();
        let claimed = reply.claimed.len() as u64;
        inner
            .counters
            .redelivered
            .fetch_add(claimed, Ordering::Relaxed);
        for _ in 0..claimed {
            inner.metrics.redelivered.increment();
        }
        Ok(reply
            .claimed
            .into_iter()
            .map(|stream_id| Entry {
                deliveries: counts
                    .get(&stream_id.id)
                    .map_or(2, |&n| u32::try_from(n).unwrap_or(u32::MAX)),
                stream_id,
            })
            .collect())
    }

    /// Runs one delivery and settles it: acknowledged, recorded as failed, or dead-lettered.
    async fn deliver(self: Arc<Self>, entry: Entry) {
        let counters = &self.queue.inner.counters;
        let task = match parse(&entry.stream_id) {
            Ok(task) => task,
            // Malformed: no delivery can ever run it.
            Err(error) => return self.dead_letter(&entry, None, &error).await,
        };
        if entry.deliveries > self.max_deliveries {
            // Its earlier workers died (or gave up) without settling it.
            let last = self.last_error(&entry).await.unwrap_or_else(|| {
                format!(
                    "delivered {} times without finishing (its workers stopped)",
                    entry.deliveries - 1
                )
            });
            return self.dead_letter(&entry, Some(&task), &last).await;
        }
        let Some(handler) = self.handlers.get(task.operation.as_str()) else {
            let error = format!(
                "no handler for operation `{}` on instance `{}`",
                task.operation, self.consumer
            );
            return self.failed(&entry, &task, error).await;
        };
        let work = match handler.start(&task.args) {
            Ok(work) => work,
            Err(error) => return self.dead_letter(&entry, Some(&task), &error).await,
        };
        counters.running.fetch_add(1, Ordering::Relaxed);
        let delivery = Delivery {
            id: task.id.clone(),
            attempt: entry.deliveries,
        };
        let ran = tokio::time::timeout(
            self.task_deadline,
            AssertUnwindSafe(delivering(delivery, work)).catch_unwind(),
        )
        .await;
        counters.running.fetch_sub(1, Ordering::Relaxed);
        let outcome: Outcome = match ran {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err("panicked".to_owned()),
            Err(_) => Err(format!(
                "did not finish within its deadline of {:?}",
                self.task_deadline
            )),
        };
        match outcome {
            Ok(()) => self.acknowledge(&entry, &task).await,
            Err(error) => self.failed(&entry, &task, error).await,
        }
    }

    /// `XACK`, `XDEL` and the error's `HDEL` in one transaction, tried up to three times; if
    /// all fail the task is redelivered later (and runs again: at least once).
    async fn acknowledge(&self, entry: &Entry, task: &Task) {
        let inner = &*self.queue.inner;
        let mut conn = inner.conn.clone();
        for attempt in 0..3 {
            let done: Result<(), RedisError> = redis::pipe()
                .atomic()
                .cmd("XACK")
                .arg(&inner.key)
                .arg(GROUP)
                .arg(&entry.stream_id.id)
                .ignore()
                .cmd("XDEL")
                .arg(&inner.key)
                .arg(&entry.stream_id.id)
                .ignore()
                .cmd("HDEL")
                .arg(&inner.errors_key)
                .arg(&entry.stream_id.id)
                .ignore()
                .query_async(&mut conn)
                .await;
            match done {
                Ok(()) => {
                    inner.counters.completed.fetch_add(1, Ordering::Relaxed);
                    inner.metrics.completed.increment();
                    return;
                }
                Err(error) if attempt == 2 => {
                    inner.counters.ack_failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        target: "policy",
                        mechanism = "queue",
                        kind = "ack_failed",
                        name = &*inner.name,
                        operation = task.operation.as_str(),
                        task = task.id.as_str(),
                        reason = describe(&error),
                        "task {} of queue `{}` finished but could not be acknowledged ({}): it will run again",
                        task.id,
                        inner.name,
                        describe(&error)
                    );
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50 << attempt)).await,
            }
        }
    }

    /// A failed delivery: dead-lettered when it was the last one allowed, else its error is
    /// recorded and it waits, pending, for a worker to claim it after the visibility timeout.
    async fn failed(&self, entry: &Entry, task: &Task, error: String) {
        let inner = &*self.queue.inner;
        inner.counters.failed.fetch_add(1, Ordering::Relaxed);
        inner.metrics.failed.increment();
        if entry.deliveries >= self.max_deliveries {
            return self.dead_letter(entry, Some(task), &error).await;
        }
        tracing::info!(
            target: "policy",
            mechanism = "queue",
            kind = "delivery_failed",
            name = &*inner.name,
            operation = task.operation.as_str(),
            task = task.id.as_str(),
            attempt = entry.deliveries,
            max_deliveries = self.max_deliveries,
            "task {} of queue `{}` failed on delivery {} of {}: {error}",
            task.id,
            inner.name,
            entry.deliveries,
            self.max_deliveries
        );
        let mut conn = inner.conn.clone();
        let _: Result<(), _> = redis::cmd("HSET")
            .arg(&inner.errors_key)
            .arg(&entry.stream_id.id)
            .arg(&error)
            .query_async(&mut conn)
            .await;
    }

    async fn last_error(&self, entry: &Entry) -> Option<String> {
        let inner = &*self.queue.inner;
        let mut conn = inner.conn.clone();
        redis::cmd("HGET")
            .arg(&inner.errors_key)
            .arg(&entry.stream_id.id)
            .query_async::<Option<String>>(&mut conn)
            .await
            .ok()
            .flatten()
    }

    /// Moves a task to the dead-letter stream with its last error, in one transaction with its
    /// acknowledgement.
    async fn dead_letter(&self, entry: &Entry, task: Option<&Task>, error: &str) {
        let inner = &*self.queue.inner;
        let field = |name: &str| entry.stream_id.get::<String>(name).unwrap_or_default();
        let mut conn = inner.conn.clone();
        let moved: Result<(), RedisError> = redis::pipe()
            .atomic()
            .cmd("XADD")
            .arg(&inner.dead_key)
            .arg("MAXLEN")
            .arg("~")
            .arg(inner.dead_max_len)
            .arg("*")
            .arg(&[
                ("v", field("v")),
                ("id", field("id")),
                ("op", field("op")),
                ("args", field("args")),
                ("at", field("at")),
                ("error", error.to_owned()),
                ("deliveries", entry.deliveries.to_string()),
                ("entry", entry.stream_id.id.clone()),
            ])
            .ignore()
            .cmd("XACK")
            .arg(&inner.key)
            .arg(GROUP)
            .arg(&entry.stream_id.id)
            .ignore()
            .cmd("XDEL")
            .arg(&inner.key)
            .arg(&entry.stream_id.id)
            .ignore()
            .cmd("HDEL")
            .arg(&inner.errors_key)
            .arg(&entry.stream_id.id)
            .ignore()
            .query_async(&mut conn)
            .await;
        if moved.is_err() {
            // Still pending: claimed and dead-lettered again later.
            return;
        }
        inner.counters.dead_lettered.fetch_add(1, Ordering::Relaxed);
        inner.metrics.dead_lettered.increment();
        let operation = task.map_or("", |t| t.operation.as_str());
        let id = task.map_or("", |t| t.id.as_str());
        tracing::warn!(
            target: "policy",
            mechanism = "queue",
            kind = "dead_lettered",
            name = &*inner.name,
            operation,
            task = id,
            deliveries = entry.deliveries,
            "task {id} of queue `{}` moved to the dead-letter stream after {} deliveries: {error}",
            inner.name,
            entry.deliveries
        );
    }
}
