//! A queue's worker: reads through the consumer group, runs each task under its deadline with a
//! bounded number at once, acknowledges after it finished, claims what dead workers left, and
//! dead-letters what keeps failing or should never run.
//!
//! Every exchange with the stream is one of the queue's scripts (`lua/`): the entries it is
//! handed were size-checked inside Redis, and every settlement (acknowledgement, error record,
//! dead letter) first checks that the delivery settling it still owns the task.

use std::collections::HashMap;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::FutureExt;
use redis::{RedisError, Value};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::stream::{
    GROUP, MAX_ERROR_BYTES, MAX_FIELD_BYTES, MAX_FIELDS, REJECTED_ARGS_KEPT, TaskQueue, signed_body,
};
use super::{Delivery, Handler, Outcome, QueueSettings, TaskId, delivering};
use crate::redis_store::describe;
use velocity_policy_model::queue_defaults;

/// Consumers removed per pass at most.
const MAX_REMOVED_PER_PASS: u32 = 100;

/// Builds and starts a [`Worker`]; see [`TaskQueue::worker`].
///
/// Each number comes from, in order: this builder's own call; the
/// [settings](super::QueueSettings) the queue was [configured](TaskQueue::configured) with, or
/// else those a [handler](Self::handle) of this queue carries (an attributed function's
/// `task()` carries its `.policy` queue stanza's); the runtime's default
/// ([`velocity_policy_model::queue_defaults`]).
#[must_use = "a worker does nothing until `start` is called"]
pub struct WorkerBuilder {
    queue: TaskQueue,
    handlers: HashMap<Arc<str>, Handler>,
    /// What this builder was told, each `None` until a call sets it.
    explicit: QueueSettings,
    poll_every: Duration,
    refresh_every: Duration,
    idle_consumers: Duration,
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
    /// The task deadline asked for, when it was asked for and lowered to fit.
    lowered_from: Option<Duration>,
}

// Where a worker is made from its queue: the worker's side, so the stream knows nothing of it.
impl TaskQueue {
    /// A worker for this queue, to be given its handlers and started.
    pub fn worker(&self) -> WorkerBuilder {
        WorkerBuilder::new(self.clone())
    }
}

impl WorkerBuilder {
    pub(super) fn new(queue: TaskQueue) -> Self {
        Self {
            explicit: QueueSettings::new(queue.inner.name.clone()),
            queue,
            handlers: HashMap::new(),
            poll_every: Duration::from_millis(50),
            refresh_every: Duration::from_secs(1),
            idle_consumers: Duration::from_secs(3600),
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
        let pick = |own: &dyn Fn(&QueueSettings) -> Option<u64>| {
            own(&self.explicit).or_else(|| inherited.and_then(own))
        };
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let concurrency = pick(&|s| s.concurrency.map(u64::from))
            .unwrap_or(u64::from(queue_defaults::CONCURRENCY));
        let max_deliveries = pick(&|s| s.max_deliveries.map(u64::from))
            .unwrap_or(u64::from(queue_defaults::MAX_DELIVERIES));
        let visibility = Duration::from_millis(
            pick(&|s| s.visibility_timeout.map(ms))
                .unwrap_or(ms(queue_defaults::VISIBILITY_TIMEOUT)),
        )
        .max(Duration::from_millis(10));
        let asked = pick(&|s| s.task_deadline.map(ms)).map(Duration::from_millis);
        let wanted = asked.unwrap_or(queue_defaults::TASK_DEADLINE);
        let task_deadline = wanted.min(queue_defaults::task_deadline_bound(visibility));
        Numbers {
            concurrency: u32::try_from(concurrency).unwrap_or(u32::MAX).max(1),
            visibility,
            max_deliveries: u32::try_from(max_deliveries).unwrap_or(u32::MAX).max(1),
            task_deadline,
            lowered_from: asked.filter(|asked| *asked > task_deadline),
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
                target: "policy",
                mechanism = "queue",
                kind = "settings_not_applied",
                name = self.queue.name(),
                operation = handler.operation(),
                max_len = self.queue.inner.max_len,
                policy_max_len = settings.max_len,
                help = "build the queue with `TaskQueue::configured(<function>::queue_settings())`",
                "a queue was built without its policy settings"
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
    /// (default 30 s). The [task deadline](Self::task_deadline) stays within four fifths of
    /// it.
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

    /// The bound on one delivery's run (default 10 s); an expired delivery is a failed one.
    /// The work's own deadline, when it has one, applies inside it.
    ///
    /// It is kept **at most four fifths of the [visibility
    /// timeout](Self::visibility_timeout)**: a delivery still running when another worker
    /// may claim its task would run twice at once, and the fifth left over absorbs the
    /// acknowledgement's round trip and the gap between this process's clock and Redis's. A
    /// longer one is lowered to fit when the worker starts, with a warning
    /// (`kind = "task_deadline_lowered"`), not refused: the worker still starts. A `.policy`
    /// file's queue stanza that asks for more is a compile error
    /// (`policy::task-deadline-exceeds-visibility`).
    ///
    /// Past the deadline the work is dropped: that bounds work that awaits, not work that
    /// blocks its thread. A delivery that ends after its task was claimed elsewhere anyway is
    /// not acknowledged (the acknowledgement checks who owns the task): it is counted as
    /// `superseded` and the task's current owner settles it.
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

    /// Removes from the consumer group the consumers idle for longer than `idle` that hold
    /// no pending task (default 1 hour; at least 100 ms): each instance reads as a consumer
    /// of its own, and instances that stopped would otherwise stay in the group for ever. A
    /// consumer with pending tasks is kept until another worker claimed them. A running
    /// worker reads every [`poll_every`](Self::poll_every), so keep `idle` far above that.
    /// The worker looks every half of `idle` (at most every minute), removing at most 100
    /// consumers a pass.
    pub fn remove_idle_consumers_after(mut self, idle: Duration) -> Self {
        self.idle_consumers = idle.max(Duration::from_millis(100));
        self
    }

    /// Starts the worker on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start(self) -> Worker {
        let numbers = self.numbers();
        if let Some(asked) = numbers.lowered_from {
            tracing::warn!(
                target: "policy",
                mechanism = "queue",
                kind = "task_deadline_lowered",
                name = self.queue.name(),
                task_deadline_ms = millis(asked),
                visibility_timeout_ms = millis(numbers.visibility),
                lowered_to_ms = millis(numbers.task_deadline),
                help = "keep `task_deadline` at most four fifths of `visibility_timeout`",
                "the task deadline was lowered to four fifths of the visibility timeout, so that no task runs twice at once"
            );
        }
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
            idle_consumers: self.idle_consumers,
        });
        let (stop, stopped) = watch::channel(false);
        let run = tokio::spawn(state.clone().run(stopped));
        Worker { state, stop, run }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
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
    idle_consumers: Duration,
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
            .field("task_deadline", &self.state.task_deadline)
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

    /// The bound on one delivery's run in force: at most four fifths of the visibility
    /// timeout ([`WorkerBuilder::task_deadline`]).
    pub fn task_deadline(&self) -> Duration {
        self.state.task_deadline
    }

    /// The visibility timeout in force.
    pub fn visibility_timeout(&self) -> Duration {
        self.state.visibility
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
                "a shutdown abandoned unfinished tasks: another worker claims them after the visibility timeout"
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

/// An entry's fields as the stream holds them: (name, value) pairs, as bytes.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// An entry as the take script handed it over: its fields, or, past the size bounds, why not
/// (they stayed in Redis).
struct Entry {
    stream_id: String,
    deliveries: u32,
    fields: Result<Fields, String>,
}

/// A task's fields, in the encoding's version 1, checked.
struct Task {
    id: TaskId,
    operation: String,
    args: String,
}

/// Why an entry is dead-lettered without running: a `reason` code and a sentence.
struct Rejected {
    reason: &'static str,
    detail: String,
}

fn rejected(reason: &'static str, detail: impl Into<String>) -> Rejected {
    Rejected {
        reason,
        detail: detail.into(),
    }
}

/// Checks an entry's fields: exactly the encoding's (no duplicate, no other), each text, the
/// version known, the id and time well-formed, and, with a shared secret, signed with it over
/// this queue's name and the task's fields.
fn parse(queue: &TaskQueue, fields: &[(Vec<u8>, Vec<u8>)]) -> Result<Task, Rejected> {
    let mut found: HashMap<&str, &str> = HashMap::new();
    for (name, value) in fields {
        let (Ok(name), Ok(value)) = (std::str::from_utf8(name), std::str::from_utf8(value)) else {
            return Err(rejected("malformed", "a field is not UTF-8 text"));
        };
        if !matches!(name, "v" | "id" | "op" | "args" | "at" | "sig") {
            return Err(rejected("malformed", "a field the encoding does not have"));
        }
        if found.insert(name, value).is_some() {
            return Err(rejected("malformed", format!("field `{name}` is repeated")));
        }
    }
    let field = |name: &str| found.get(name).copied();
    match field("v") {
        Some("1") => {}
        Some(_) => return Err(rejected("malformed", "an unknown encoding version")),
        None => return Err(rejected("malformed", "no encoding version")),
    }
    let id = field("id")
        .and_then(TaskId::parse)
        .ok_or_else(|| rejected("malformed", "no task id of 32 lowercase hex digits"))?;
    let operation = field("op")
        .filter(|op| !op.is_empty())
        .ok_or_else(|| rejected("malformed", "no operation"))?;
    let args = field("args").ok_or_else(|| rejected("malformed", "no arguments"))?;
    let at = field("at")
        .filter(|at| at.parse::<u64>().is_ok())
        .ok_or_else(|| rejected("malformed", "no enqueue time"))?;
    let body = signed_body(queue.name(), id.as_str(), operation, args, at);
    queue
        .inner
        .store
        .verify(&body, field("sig"))
        .map_err(|reason| {
            let detail = if reason == "unsigned" {
                "the entry is not signed, and the store has a shared secret"
            } else {
                "the entry's signature does not match its fields (forged, changed, or signed with another secret or for another queue)"
            };
            rejected(reason, detail)
        })?;
    Ok(Task {
        id,
        operation: operation.to_owned(),
        args: args.to_owned(),
    })
}

/// The text of a bulk string (lossy) or a number.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The take script's reply: `{cursor, {{id, deliveries, 'ok', {name, value, ...}} or
/// {id, deliveries, 'too_large', why}, ...}}`.
fn take_reply(value: Value) -> Option<(String, Vec<Entry>)> {
    let Value::Array(mut parts) = value else {
        return None;
    };
    if parts.len() != 2 {
        return None;
    }
    let listed = parts.pop()?;
    let cursor = text(&parts[0])?;
    let Value::Array(listed) = listed else {
        return Some((cursor, Vec::new()));
    };
    let entries = listed
        .into_iter()
        .filter_map(|entry| {
            let Value::Array(mut entry) = entry else {
                return None;
            };
            if entry.len() != 4 {
                return None;
            }
            let content = entry.pop()?;
            let status = text(&entry[2])?;
            let deliveries = text(&entry[1])?.parse::<u64>().ok()?;
            let fields = match (status.as_str(), content) {
                ("ok", Value::Array(flat)) => {
                    let mut fields = Vec::with_capacity(flat.len() / 2);
                    let mut flat = flat.into_iter();
                    while let (Some(name), Some(value)) = (flat.next(), flat.next()) {
                        let (Value::BulkString(name), Value::BulkString(value)) = (name, value)
                        else {
                            return None;
                        };
                        fields.push((name, value));
                    }
                    Ok(fields)
                }
                (_, why) => Err(text(&why).unwrap_or_else(|| "past the size bounds".to_owned())),
            };
            Some(Entry {
                stream_id: text(&entry[0])?,
                deliveries: u32::try_from(deliveries).unwrap_or(u32::MAX),
                fields,
            })
        })
        .collect();
    Some((cursor, entries))
}

fn is_nogroup(error: &RedisError) -> bool {
    error.code() == Some("NOGROUP")
}

/// A settlement's failure for the logs: the server's error code (`WRONGTYPE`, `NOGROUP`), or
/// the failure's kind; never a message that could carry the server's address.
fn failure(error: &RedisError) -> String {
    error
        .code()
        .filter(|code| code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
        .map_or_else(|| describe(error), str::to_owned)
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// How a settlement went, as the script said.
enum Settled {
    /// Done (`ok`), possibly with the errors hash left as it was.
    Done { errors_unwritable: bool },
    /// Not done: the delivery no longer owns the task (`claimed`, `not_pending`).
    NotOwned(&'static str),
}

fn settled(reply: &str) -> Settled {
    match reply {
        "ok" => Settled::Done {
            errors_unwritable: false,
        },
        "ok_errors_unwritable" | "errors_unwritable" => Settled::Done {
            errors_unwritable: true,
        },
        "not_pending" => Settled::NotOwned("not_pending"),
        _ => Settled::NotOwned("claimed"),
    }
}

impl State {
    async fn run(self: Arc<Self>, mut stopped: watch::Receiver<bool>) -> JoinSet<()> {
        let mut tasks = JoinSet::new();
        let mut group_ready = self.ensure_group().await.is_ok();
        let mut cursor = "0-0".to_owned();
        let mut last_claim: Option<Instant> = None;
        let mut last_refresh: Option<Instant> = None;
        let mut last_cleanup: Option<Instant> = None;
        let cleanup_every = (self.idle_consumers / 2).min(Duration::from_secs(60));
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
            if group_ready && last_cleanup.is_none_or(|at| at.elapsed() >= cleanup_every) {
                last_cleanup = Some(Instant::now());
                self.remove_idle_consumers().await;
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
                match self.take(Some(&mut cursor), free).await {
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
                match self.take(None, free - entries.len()).await {
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
            _ => {
                self.queue.check_eviction().await;
                Ok(())
            }
        }
    }

    /// Tasks for this worker, at most `count`: with a `cursor`, claimed (`XAUTOCLAIM`) from
    /// workers that left them idle past the visibility timeout; without, new ones
    /// (`XREADGROUP`). In one script each, which checks every entry's size before it is sent.
    async fn take(
        &self,
        cursor: Option<&mut String>,
        count: usize,
    ) -> Result<Vec<Entry>, RedisError> {
        let inner = &*self.queue.inner;
        let mut conn = inner.conn.clone();
        let claiming = cursor.is_some();
        let reply: Value = inner
            .scripts
            .take
            .key(&inner.key)
            .key(&inner.errors_key)
            .arg(GROUP)
            .arg(&*self.consumer)
            .arg(count)
            .arg(if claiming {
                millis(self.visibility).to_string()
            } else {
                String::new()
            })
            .arg(cursor.as_deref().map_or("0-0", String::as_str))
            .arg(MAX_FIELD_BYTES)
            .arg(inner.max_task_bytes)
            .arg(MAX_FIELDS)
            .invoke_async(&mut conn)
            .await?;
        let Some((next, entries)) = take_reply(reply) else {
            return Ok(Vec::new());
        };
        if let Some(cursor) = cursor {
            *cursor = next;
        }
        if claiming && !entries.is_empty() {
            let claimed = entries.len() as u64;
            inner
                .counters
                .redelivered
                .fetch_add(claimed, Ordering::Relaxed);
            for _ in 0..claimed {
                inner.metrics.redelivered.increment();
            }
        }
        Ok(entries)
    }

    /// Runs one delivery and settles it: acknowledged, recorded as failed, or dead-lettered.
    async fn deliver(self: Arc<Self>, entry: Entry) {
        let counters = &self.queue.inner.counters;
        let task = match &entry.fields {
            Err(why) => {
                return self
                    .reject(&entry, rejected("too_large", why.clone()))
                    .await;
            }
            Ok(fields) => match parse(&self.queue, fields) {
                Ok(task) => task,
                // No delivery may ever run it.
                Err(why) => return self.reject(&entry, why).await,
            },
        };
        if entry.deliveries > self.max_deliveries {
            // Its earlier workers died (or gave up) without settling it: its dead letter
            // carries the last error recorded for it.
            let fallback = format!(
                "delivered {} times without finishing (its workers stopped)",
                entry.deliveries - 1
            );
            self.dead_letter(&entry, Some(&task), "", "max_deliveries", &fallback)
                .await;
            return;
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
            Err(error) => {
                self.dead_letter(&entry, Some(&task), &error, "undecodable", "")
                    .await;
                return;
            }
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

    /// An entry no delivery may run (unsigned, forged, too large, malformed): dead-lettered
    /// unrun, counted, and logged (at WARN once a second at most, the rest at DEBUG, so a
    /// flood of them cannot flood the logs).
    async fn reject(&self, entry: &Entry, why: Rejected) {
        let inner = &*self.queue.inner;
        if !self
            .dead_letter(entry, None, &why.detail, why.reason, "")
            .await
        {
            return;
        }
        inner.counters.rejected.fetch_add(1, Ordering::Relaxed);
        inner.metrics.rejected(why.reason);
        if self.loud() {
            tracing::warn!(
                target: "policy",
                mechanism = "queue",
                kind = "entry_rejected",
                name = &*inner.name,
                reason = why.reason,
                detail = why.detail.as_str(),
                entry = entry.stream_id.as_str(),
                deliveries = entry.deliveries,
                "a queue entry was refused unrun and dead-lettered"
            );
        } else {
            tracing::debug!(
                target: "policy",
                mechanism = "queue",
                kind = "entry_rejected",
                name = &*inner.name,
                reason = why.reason,
                detail = why.detail.as_str(),
                entry = entry.stream_id.as_str(),
                deliveries = entry.deliveries,
                "a queue entry was refused unrun and dead-lettered"
            );
        }
    }

    /// Whether an event about a rejected entry is logged at WARN: the first, and one a second
    /// after the last; the rest go to DEBUG, so a writer adding entries by the million cannot
    /// flood the logs.
    fn loud(&self) -> bool {
        let mut last = crate::redis_store::lock(&self.queue.inner.last_loud_rejection);
        let now = std::time::Instant::now();
        let loud = last.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1));
        if loud {
            *last = Some(now);
        }
        loud
    }

    /// Acknowledges and deletes a finished task, in one script that first checks this
    /// delivery still owns it; tried up to three times.
    async fn acknowledge(&self, entry: &Entry, task: &Task) {
        let inner = &*self.queue.inner;
        let mut conn = inner.conn.clone();
        for attempt in 0..3 {
            let done: Result<String, RedisError> = inner
                .scripts
                .ack
                .key(&inner.key)
                .key(&inner.errors_key)
                .arg(GROUP)
                .arg(&entry.stream_id)
                .arg(&*self.consumer)
                .arg(entry.deliveries)
                .invoke_async(&mut conn)
                .await;
            match done.as_deref().map(settled) {
                Ok(Settled::Done { errors_unwritable }) => {
                    inner.counters.completed.fetch_add(1, Ordering::Relaxed);
                    inner.metrics.completed.increment();
                    if errors_unwritable {
                        self.errors_unwritable();
                    }
                    return;
                }
                // An earlier attempt whose answer was lost went through.
                Ok(Settled::NotOwned("not_pending")) if attempt > 0 => {
                    inner.counters.completed.fetch_add(1, Ordering::Relaxed);
                    inner.metrics.completed.increment();
                    return;
                }
                Ok(Settled::NotOwned(why)) => return self.superseded(task, entry, why),
                Err(error) if attempt == 2 => {
                    inner.counters.settle_failed.fetch_add(1, Ordering::Relaxed);
                    inner.metrics.settle_failed.increment();
                    // A script that Redis refused changed nothing: the task runs again. One
                    // whose answer did not come back may have gone through.
                    if error.kind() == redis::ErrorKind::Io
                        || error.is_timeout()
                        || error.is_connection_dropped()
                        || error.is_connection_refusal()
                    {
                        tracing::warn!(
                            target: "policy",
                            mechanism = "queue",
                            kind = "ack_failed",
                            name = &*inner.name,
                            operation = task.operation.as_str(),
                            task = task.id.as_str(),
                            reason = failure(error),
                            "a finished task's acknowledgement went unanswered: unless it reached redis, the task runs again after the visibility timeout"
                        );
                    } else {
                        tracing::warn!(
                            target: "policy",
                            mechanism = "queue",
                            kind = "ack_failed",
                            name = &*inner.name,
                            operation = task.operation.as_str(),
                            task = task.id.as_str(),
                            reason = failure(error),
                            "redis refused a finished task's acknowledgement: the task runs again after the visibility timeout"
                        );
                    }
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50 << attempt)).await,
            }
        }
    }

    /// A delivery that ended after its task was claimed by another worker (or settled by
    /// one): its outcome is not recorded; the task's current owner settles it.
    fn superseded(&self, task: &Task, entry: &Entry, why: &'static str) {
        let inner = &*self.queue.inner;
        inner.counters.superseded.fetch_add(1, Ordering::Relaxed);
        inner.metrics.superseded.increment();
        tracing::info!(
            target: "policy",
            mechanism = "queue",
            kind = "superseded",
            name = &*inner.name,
            operation = task.operation.as_str(),
            task = task.id.as_str(),
            attempt = entry.deliveries,
            reason = why,
            "a delivery ended after its task was claimed by another worker: its outcome is left to the task's current owner"
        );
    }

    fn errors_unwritable(&self) {
        tracing::warn!(
            target: "policy",
            mechanism = "queue",
            kind = "errors_unwritable",
            name = &*self.queue.inner.name,
            key = self.queue.inner.errors_key.as_str(),
            "the queue's errors key is not a hash: tasks' last errors cannot be kept"
        );
    }

    /// A failed delivery: dead-lettered when it was the last one allowed, else its error is
    /// recorded and it waits, pending, for a worker to claim it after the visibility timeout.
    async fn failed(&self, entry: &Entry, task: &Task, error: String) {
        let inner = &*self.queue.inner;
        inner.counters.failed.fetch_add(1, Ordering::Relaxed);
        inner.metrics.failed.increment();
        let error = cut(&error, MAX_ERROR_BYTES);
        if entry.deliveries >= self.max_deliveries {
            self.dead_letter(entry, Some(task), error, "failed", "")
                .await;
            return;
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
            error,
            "a delivery failed: the task is claimed again after the visibility timeout"
        );
        self.record(entry, Some(task), error).await;
    }

    /// Records `error` as the task's last one, if this delivery still owns it.
    async fn record(&self, entry: &Entry, task: Option<&Task>, error: &str) {
        let inner = &*self.queue.inner;
        let mut conn = inner.conn.clone();
        let recorded: Result<String, RedisError> = inner
            .scripts
            .record
            .key(&inner.key)
            .key(&inner.errors_key)
            .arg(GROUP)
            .arg(&entry.stream_id)
            .arg(&*self.consumer)
            .arg(entry.deliveries)
            .arg(error)
            .invoke_async(&mut conn)
            .await;
        match (recorded.as_deref().map(settled), task) {
            (Ok(Settled::Done { errors_unwritable }), _) => {
                if errors_unwritable {
                    self.errors_unwritable();
                }
            }
            (Ok(Settled::NotOwned(why)), Some(task)) => self.superseded(task, entry, why),
            (Ok(Settled::NotOwned(_)), None) => {}
            (Err(e), _) => {
                inner.counters.settle_failed.fetch_add(1, Ordering::Relaxed);
                inner.metrics.settle_failed.increment();
                tracing::warn!(
                    target: "policy",
                    mechanism = "queue",
                    kind = "record_failed",
                    name = &*inner.name,
                    operation = task.map_or("", |t| t.operation.as_str()),
                    task = task.map_or("", |t| t.id.as_str()),
                    reason = failure(e),
                    "a failed delivery's error could not be recorded: the task stays pending and is claimed again after the visibility timeout"
                );
            }
        }
    }

    /// Moves a task to the dead-letter stream with its error (`""`: the last one recorded, or
    /// `fallback`) and `reason`, in one script that checks this delivery still owns it, writes
    /// the dead letter first, then acknowledges and deletes the task. If Redis refuses it,
    /// nothing changed: the task stays pending and is tried again after the visibility
    /// timeout; the failure is logged and counted. Whether it was moved.
    ///
    /// Without a `task` (a rejected entry), the move is logged by the caller, and a failure at
    /// WARN only as often as [`loud`](Self::loud) allows.
    async fn dead_letter(
        &self,
        entry: &Entry,
        task: Option<&Task>,
        error: &str,
        reason: &'static str,
        fallback: &str,
    ) -> bool {
        let inner = &*self.queue.inner;
        // A rejected entry's arguments are kept only in part: they are evidence, never run.
        let args_kept = if task.is_some() {
            inner.max_task_bytes
        } else {
            REJECTED_ARGS_KEPT
        };
        let mut conn = inner.conn.clone();
        let moved: Result<String, RedisError> = inner
            .scripts
            .dead_letter
            .key(&inner.key)
            .key(&inner.dead_key)
            .key(&inner.errors_key)
            .arg(GROUP)
            .arg(&entry.stream_id)
            .arg(&*self.consumer)
            .arg(entry.deliveries)
            .arg(cut(error, MAX_ERROR_BYTES))
            .arg(reason)
            .arg(inner.dead_max_len)
            .arg(MAX_FIELD_BYTES)
            .arg(args_kept)
            .arg(MAX_ERROR_BYTES)
            .arg(if fallback.is_empty() { error } else { fallback })
            .invoke_async(&mut conn)
            .await;
        let operation = task.map_or("", |t| t.operation.as_str());
        let id = task.map_or("", |t| t.id.as_str());
        match moved.as_deref().map(settled) {
            Ok(Settled::Done { .. }) => {}
            Ok(Settled::NotOwned(why)) => {
                if let Some(task) = task {
                    self.superseded(task, entry, why);
                }
                return false;
            }
            Err(e) => {
                inner.counters.settle_failed.fetch_add(1, Ordering::Relaxed);
                inner.metrics.settle_failed.increment();
                if task.is_some() || self.loud() {
                    tracing::warn!(
                        target: "policy",
                        mechanism = "queue",
                        kind = "dead_letter_failed",
                        name = &*inner.name,
                        operation,
                        task = id,
                        entry = entry.stream_id.as_str(),
                        reason = failure(e),
                        dead_letter_reason = reason,
                        "a task could not be moved to the dead-letter stream: it stays pending and is tried again after the visibility timeout"
                    );
                } else {
                    tracing::debug!(
                        target: "policy",
                        mechanism = "queue",
                        kind = "dead_letter_failed",
                        name = &*inner.name,
                        entry = entry.stream_id.as_str(),
                        reason = failure(e),
                        dead_letter_reason = reason,
                        "a task could not be moved to the dead-letter stream: it stays pending and is tried again after the visibility timeout"
                    );
                }
                // So that the next try carries this error, not a guess.
                if !error.is_empty() {
                    self.record(entry, task, cut(error, MAX_ERROR_BYTES)).await;
                }
                return false;
            }
        }
        inner.counters.dead_lettered.fetch_add(1, Ordering::Relaxed);
        inner.metrics.dead_lettered.increment();
        if task.is_none() {
            return true;
        }
        tracing::warn!(
            target: "policy",
            mechanism = "queue",
            kind = "dead_lettered",
            name = &*inner.name,
            operation,
            task = id,
            entry = entry.stream_id.as_str(),
            deliveries = entry.deliveries,
            reason,
            error = cut(if error.is_empty() { fallback } else { error }, MAX_ERROR_BYTES),
            "a task was moved to the dead-letter stream"
        );
        true
    }

    /// Removes consumers idle past the bound that hold no pending task (stopped instances).
    async fn remove_idle_consumers(&self) {
        let inner = &*self.queue.inner;
        let mut conn = inner.conn.clone();
        let removed: Result<(u64, u64), RedisError> = inner
            .scripts
            .consumers
            .key(&inner.key)
            .arg(GROUP)
            .arg(&*self.consumer)
            .arg(millis(self.idle_consumers))
            .arg(MAX_REMOVED_PER_PASS)
            .invoke_async(&mut conn)
            .await;
        if let Ok((removed, kept)) = removed
            && removed > 0
        {
            inner
                .counters
                .consumers_removed
                .fetch_add(removed, Ordering::Relaxed);
            for _ in 0..removed {
                inner.metrics.consumers_removed.increment();
            }
            tracing::info!(
                target: "policy",
                mechanism = "queue",
                kind = "consumers_removed",
                name = &*inner.name,
                count = removed,
                kept,
                idle_ms = millis(self.idle_consumers),
                "idle consumers holding no task were removed from the queue's group"
            );
        }
    }
}
