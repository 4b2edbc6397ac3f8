//! Background work on a durable queue, against a real `redis-server`: many tasks through two
//! instances, a worker process killed mid-task, a server restarted mid-run with AOF, a poison
//! task, a full queue and a shutdown that abandons its tasks; and what a writer to the Redis
//! can try (issue 39): unsigned and forged entries, a 100 MB entry and a huge consumer list,
//! a dead-letter stream or errors hash of the wrong type, a late acknowledgement, an
//! operation name that carries a forged log line. Then the durability options: `WAIT` for a
//! replica, idle consumers removed, a server that may evict keys.
//!
//! Each test starts its own server (`velocity_policy_testkit::RedisServer`) and uses a key prefix no
//! other test uses. Real time is used here: the point is what crosses the network; the
//! visibility timeouts are short so that redelivery is quick.
#![cfg(feature = "redis")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use velocity_policy_runtime::queue::{self, EnqueueError, Handler, TaskId, TaskQueue};
use velocity_policy_runtime::redis_store::RedisStore;
use velocity_policy_testkit::{RedisCluster, RedisSentinel, RedisServer, RedisTcpServer};

mod common;

const MS: Duration = Duration::from_millis(1);

/// Shared by the instances of the signing test.
const SECRET: &str = "a shared secret of thirty-two bytes or more, for the queue tests";

/// A store on `url` as instance `instance`; stores given the same `prefix` share queues.
async fn store(url: &str, prefix: &str, instance: &str, timeout: Duration) -> RedisStore {
    RedisStore::builder()
        .prefix(prefix)
        .instance(instance)
        .timeout(timeout)
        .connect(url)
        .await
        .unwrap()
}

/// Completions per task id, in the order they happened.
#[derive(Clone, Default)]
struct Completions(Arc<Mutex<HashMap<String, u32>>>);

impl Completions {
    fn record(&self) {
        let task = queue::current().expect("run by a worker");
        *self
            .0
            .lock()
            .unwrap()
            .entry(task.id.to_string())
            .or_default() += 1;
    }

    fn distinct(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    fn ids(&self) -> HashSet<String> {
        self.0.lock().unwrap().keys().cloned().collect()
    }

    fn duplicates(&self) -> u32 {
        self.0.lock().unwrap().values().map(|n| n - 1).sum()
    }

    /// Waits (real time, at most `limit`) until `count` distinct tasks completed.
    async fn wait_for(&self, count: usize, limit: Duration) {
        let start = Instant::now();
        while self.distinct() < count {
            assert!(
                start.elapsed() < limit,
                "only {} of {count} tasks completed within {limit:?}",
                self.distinct()
            );
            tokio::time::sleep(10 * MS).await;
        }
    }
}

fn recording(operation: &str, completions: &Completions) -> Handler {
    let completions = completions.clone();
    Handler::new(operation, move |(_n,): (u32,)| {
        let completions = completions.clone();
        async move {
            completions.record();
            Ok::<_, std::io::Error>(())
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_tasks_from_two_instances_complete_exactly_once_each() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("fleet");
    let completions = Completions::default();
    let mut queues = Vec::new();
    let mut workers = Vec::new();
    for instance in ["a", "b"] {
        let store = store(&server.url(), &prefix, instance, Duration::from_secs(2)).await;
        let queue = TaskQueue::builder("embeddings")
            .max_len(20_000)
            .build(&store);
        workers.push(
            queue
                .worker()
                .concurrency(16)
                .poll_every(5 * MS)
                .handle(recording("embed", &completions))
                .start(),
        );
        queues.push(queue);
    }
    // Each instance enqueues 5,000, 20 callers at a time.
    let mut callers = Vec::new();
    for queue in &queues {
        for caller in 0..20u32 {
            let queue = queue.clone();
            callers.push(tokio::spawn(async move {
                let mut ids = Vec::new();
                for n in 0..250 {
                    ids.push(queue.enqueue("embed", &(caller * 1000 + n,)).await.unwrap());
                }
                ids
            }));
        }
    }
    let mut enqueued = HashSet::new();
    for caller in callers {
        enqueued.extend(caller.await.unwrap().into_iter().map(|id| id.to_string()));
    }
    assert_eq!(enqueued.len(), 10_000, "every enqueue got an id of its own");
    completions.wait_for(10_000, Duration::from_secs(90)).await;
    assert_eq!(
        completions.ids(),
        enqueued,
        "exactly the enqueued tasks completed"
    );
    let (a, b) = (queues[0].snapshot(), queues[1].snapshot());
    eprintln!(
        "10,000 tasks: instance a completed {}, b {}, duplicates {}",
        a.completed,
        b.completed,
        completions.duplicates()
    );
    assert!(
        a.completed > 0 && b.completed > 0,
        "both instances consumed"
    );
    assert_eq!(
        u64::from(completions.duplicates()) + 10_000,
        a.completed + b.completed,
        "every completion was acknowledged, duplicates included"
    );
    assert_eq!((a.enqueued, b.enqueued), (5_000, 5_000));
    queues[0].refresh().await.unwrap();
    let figures = queues[0].snapshot();
    assert_eq!((figures.length, figures.pending), (0, 0), "{figures:?}");
    for worker in workers {
        let drained = worker.shutdown(Duration::from_secs(1)).await;
        assert_eq!(drained.abandoned, 0);
    }
}

/// The worker process the kill test starts (not a test of its own): takes tasks of `slow` as
/// instance `doomed`, says which one it started on stdout, and never finishes it.
#[tokio::test]
#[ignore = "a helper: the worker process `a_killed_worker_process_task_is_redelivered` starts"]
async fn worker_process() {
    let (Ok(url), Ok(prefix)) = (std::env::var("QUEUE_URL"), std::env::var("QUEUE_PREFIX")) else {
        panic!("QUEUE_URL and QUEUE_PREFIX are set by the test that starts this process");
    };
    let store = store(&url, &prefix, "doomed", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("media").build(&store);
    let _worker = queue
        .worker()
        .poll_every(5 * MS)
        .handle(Handler::new("slow", |(_n,): (u32,)| async move {
            let task = queue::current().unwrap();
            println!("started {}", task.id);
            tokio::time::sleep(Duration::from_secs(600)).await;
            Ok::<_, std::io::Error>(())
        }))
        .start();
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_process_task_is_redelivered_to_the_other_instance() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("kill");
    let store = store(&server.url(), &prefix, "survivor", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("media").build(&store);
    let id = queue.enqueue("slow", &(7u32,)).await.unwrap();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "worker_process", "--ignored", "--nocapture"])
        .env("QUEUE_URL", server.url())
        .env("QUEUE_PREFIX", &prefix)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let started = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("started ").map(str::to_owned))
    });
    let started = tokio::time::timeout(Duration::from_secs(30), started)
        .await
        .expect("the worker process started the task")
        .unwrap();
    assert_eq!(started.as_deref(), Some(id.as_str()));
    // SIGKILL, mid-task: nothing of the process runs again.
    child.kill().unwrap();
    child.wait().unwrap();

    let runs = Arc::new(Mutex::new(Vec::new()));
    let seen = runs.clone();
    let worker = queue
        .worker()
        .visibility_timeout(300 * MS)
        .poll_every(5 * MS)
        .handle(Handler::new("slow", move |(_n,): (u32,)| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(queue::current().unwrap());
                Ok::<_, std::io::Error>(())
            }
        }))
        .start();
    let start = Instant::now();
    while runs.lock().unwrap().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never redelivered"
        );
        tokio::time::sleep(10 * MS).await;
    }
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, id, "the same task, by its id");
    assert_eq!(runs[0].attempt, 2, "its second delivery");
    worker.shutdown(Duration::from_secs(1)).await;
    let snapshot = queue.snapshot();
    assert_eq!((snapshot.redelivered, snapshot.completed), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_with_aof_loses_nothing_acknowledged_and_refuses_during_the_outage() {
    let Some(mut server) = RedisServer::start_durable() else {
        return;
    };
    let prefix = server.key_prefix("restart");
    let store = store(&server.url(), &prefix, "a", 300 * MS).await;
    let queue = TaskQueue::builder("embeddings").build(&store);
    let completions = Completions::default();
    let slow = {
        let completions = completions.clone();
        Handler::new("embed", move |(_n,): (u32,)| {
            let completions = completions.clone();
            async move {
                tokio::time::sleep(5 * MS).await;
                completions.record();
                Ok::<_, std::io::Error>(())
            }
        })
    };
    let worker = queue
        .worker()
        .concurrency(2)
        .visibility_timeout(500 * MS)
        .poll_every(5 * MS)
        .handle(slow)
        .start();
    let mut acknowledged = HashSet::new();
    for n in 0..300u32 {
        acknowledged.insert(queue.enqueue("embed", &(n,)).await.unwrap().to_string());
    }
    // Mid-run: most of them are still waiting or running.
    assert!(completions.distinct() < 300);
    server.kill();
    let mut refused = 0;
    for n in 0..20u32 {
        match queue.enqueue("embed", &(1000 + n,)).await {
            Err(EnqueueError::Unavailable { .. }) => refused += 1,
            other => panic!("an enqueue during the outage was not refused: {other:?}"),
        }
    }
    assert_eq!(refused, 20);
    assert_eq!(queue.snapshot().refused_unavailable, 20, "counted");
    server.restart();
    // Enqueues are taken again once the store reconnects.
    let start = Instant::now();
    loop {
        match queue.enqueue("embed", &(2000u32,)).await {
            Ok(id) => {
                acknowledged.insert(id.to_string());
                break;
            }
            Err(_) if start.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(20 * MS).await;
            }
            Err(error) => panic!("redis did not come back: {error}"),
        }
    }
    for n in 0..100u32 {
        acknowledged.insert(
            queue
                .enqueue("embed", &(3000 + n,))
                .await
                .unwrap()
                .to_string(),
        );
    }
    completions
        .wait_for(acknowledged.len(), Duration::from_secs(60))
        .await;
    assert_eq!(
        completions.ids(),
        acknowledged,
        "every acknowledged task completed, and no refused one"
    );
    eprintln!(
        "restart: {} acknowledged tasks completed, {} duplicates",
        acknowledged.len(),
        completions.duplicates()
    );
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_task_is_dead_lettered_after_its_deliveries_while_the_queue_flows() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("poison");
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("embeddings").build(&store);
    let completions = Completions::default();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let poison = {
        let attempts = attempts.clone();
        Handler::new("poison", move |(): ()| {
            let attempts = attempts.clone();
            async move {
                attempts
                    .lock()
                    .unwrap()
                    .push(queue::current().unwrap().attempt);
                Err::<(), _>(std::io::Error::other("cannot embed an empty document"))
            }
        })
    };
    let worker = queue
        .worker()
        .max_deliveries(3)
        .visibility_timeout(100 * MS)
        .poll_every(5 * MS)
        .handle(poison)
        .handle(recording("embed", &completions))
        .start();
    let poisoned = queue.enqueue("poison", &()).await.unwrap();
    let mut flowing = 0;
    let start = Instant::now();
    while queue.snapshot().dead_lettered == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never dead-lettered"
        );
        queue.enqueue("embed", &(flowing,)).await.unwrap();
        flowing += 1;
        tokio::time::sleep(5 * MS).await;
    }
    completions
        .wait_for(flowing as usize, Duration::from_secs(10))
        .await;
    assert_eq!(
        *attempts.lock().unwrap(),
        [1, 2, 3],
        "three deliveries, then none"
    );
    let snapshot = queue.snapshot();
    assert_eq!((snapshot.dead_lettered, snapshot.failed), (1, 3));
    assert!(
        flowing > 10,
        "the queue kept flowing: {flowing} tasks meanwhile"
    );
    let key = format!("{prefix}:queue:{{embeddings}}:dead");
    let letter = server.query(&["XRANGE", &key, "-", "+"]).unwrap();
    assert!(letter.contains(poisoned.as_str()), "{letter}");
    assert!(
        letter.contains("cannot embed an empty document"),
        "{letter}"
    );
    assert!(letter.contains("deliveries\n3"), "{letter}");
    queue.refresh().await.unwrap();
    assert_eq!(queue.snapshot().dead_letters, 1);
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_full_queue_refuses_the_enqueue_visibly() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("full");
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("embeddings").max_len(5).build(&store);
    for n in 0..5u32 {
        queue.enqueue("embed", &(n,)).await.unwrap();
    }
    let refusal = queue.enqueue("embed", &(5u32,)).await.unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "queue `embeddings` is full (5 tasks not yet finished, bound 5): the task was refused, not queued"
    );
    let key = format!("{prefix}:queue:{{embeddings}}");
    assert_eq!(
        server.query(&["XLEN", &key]).unwrap(),
        "5",
        "nothing trimmed"
    );
    queue.refresh().await.unwrap();
    let snapshot = queue.snapshot();
    assert_eq!(
        (snapshot.enqueued, snapshot.refused_full, snapshot.length),
        (5, 1, 5)
    );
    assert!(snapshot.oldest_age_ms.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_abandons_unfinished_tasks_and_another_worker_finishes_them() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("drain");
    let store_a = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let store_b = store(&server.url(), &prefix, "b", Duration::from_secs(2)).await;
    let queue_a = TaskQueue::builder("media").build(&store_a);
    let queue_b = TaskQueue::builder("media").build(&store_b);
    let started = Arc::new(Mutex::new(0));
    let counting = started.clone();
    let stuck = queue_a
        .worker()
        .concurrency(2)
        .poll_every(5 * MS)
        .handle(Handler::new("transcode", move |(_n,): (u32,)| {
            *counting.lock().unwrap() += 1;
            async move {
                tokio::time::sleep(Duration::from_secs(600)).await;
                Ok::<_, std::io::Error>(())
            }
        }))
        .start();
    let ids: HashSet<String> = [
        queue_a.enqueue("transcode", &(1u32,)).await.unwrap(),
        queue_a.enqueue("transcode", &(2u32,)).await.unwrap(),
    ]
    .into_iter()
    .map(|id: TaskId| id.to_string())
    .collect();
    while *started.lock().unwrap() < 2 {
        tokio::time::sleep(5 * MS).await;
    }
    let drained = stuck.shutdown(50 * MS).await;
    assert_eq!((drained.finished, drained.abandoned), (0, 2));
    assert_eq!(queue_a.snapshot().abandoned, 2);

    let completions = Completions::default();
    let other = queue_b
        .worker()
        .visibility_timeout(200 * MS)
        .poll_every(5 * MS)
        .handle(recording("transcode", &completions))
        .start();
    completions.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(completions.ids(), ids);
    other.shutdown(Duration::from_secs(1)).await;
}

#[cfg(feature = "metrics")]
#[tokio::test]
async fn the_queue_metrics_count_enqueues_refusals_and_the_streams_figures() {
    use metrics_util::debugging::DebuggingRecorder;
    use velocity_policy_testkit::recorder::Recorded;

    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("metrics");
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // The handles are registered once, when the queue is built, and kept.
    let queue = metrics::with_local_recorder(&recorder, || {
        TaskQueue::builder("metered").max_len(2).build(&store)
    });
    for n in 0..3u32 {
        let _ = queue.enqueue("embed", &(n,)).await;
    }
    queue.refresh().await.unwrap();
    let recorded = Recorded::take(&snapshotter);
    let tasks = "policy_queue_tasks_total";
    assert_eq!(
        recorded.counter(tasks, &[("name", "metered"), ("event", "enqueued")]),
        2
    );
    assert_eq!(
        recorded.counter(
            tasks,
            &[
                ("name", "metered"),
                ("event", "refused"),
                ("reason", "full")
            ]
        ),
        1
    );
    assert_eq!(
        recorded.gauge("policy_queue_length", &[("name", "metered")]),
        2.0
    );
    assert!(recorded.gauge("policy_queue_oldest_age_seconds", &[("name", "metered")]) >= 0.0);
}

/// Polls `done` every 10 ms (real time) for at most `limit`.
async fn eventually(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(10 * MS).await;
    }
}

/// An entry's fields as `XRANGE` lists them (the only entry of `key`): name, value, ...
fn only_entry(server: &RedisServer, key: &str) -> Vec<String> {
    server
        .query(&["XRANGE", key, "-", "+"])
        .unwrap()
        .lines()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

/// `XADD key * <fields>`, as a writer to the Redis would.
fn xadd(server: &RedisServer, key: &str, fields: &[&str]) {
    let mut command = vec!["XADD", key, "*"];
    command.extend_from_slice(fields);
    server.query(&command).unwrap();
}

/// The field values named `name` in a flat `name\nvalue\n...` listing.
fn values_of<'a>(listing: &'a str, name: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = listing.lines().collect();
    lines
        .windows(2)
        .filter(|pair| pair[0] == name)
        .map(|pair| pair[1])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_secret_an_unsigned_or_forged_entry_is_dead_lettered_and_never_run() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("signed");
    let store = RedisStore::builder()
        .prefix(&prefix)
        .instance("a")
        .timeout(Duration::from_secs(2))
        .shared_secret(SECRET)
        .connect(&server.url())
        .await
        .unwrap();
    let payments = TaskQueue::builder("payments").build(&store);
    let other = TaskQueue::builder("other").build(&store);
    let key = format!("{prefix}:queue:{{payments}}");
    let other_key = format!("{prefix}:queue:{{other}}");

    // Genuine: one task of this queue, one of another queue, both signed by the store.
    let genuine = payments
        .enqueue("refund_order", &("alice".to_owned(), 10u32))
        .await
        .unwrap();
    let signed = only_entry(&server, &key);
    assert!(signed.contains(&"sig".to_owned()), "{signed:?}");
    other
        .enqueue("refund_order", &("bob".to_owned(), 20u32))
        .await
        .unwrap();
    let elsewhere = only_entry(&server, &other_key);

    // What a writer to the Redis tries, in the issue's own words first.
    let victim = r#"["victim",9999]"#;
    let unsigned = TaskId::random();
    xadd(
        &server,
        &key,
        &[
            "v",
            "1",
            "id",
            unsigned.as_str(),
            "op",
            "refund_order",
            "args",
            victim,
            "at",
            "0",
        ],
    );
    let forged = TaskId::random();
    let zeros = "0".repeat(64);
    xadd(
        &server,
        &key,
        &[
            "v",
            "1",
            "id",
            forged.as_str(),
            "op",
            "refund_order",
            "args",
            victim,
            "at",
            "0",
            "sig",
            &zeros,
        ],
    );
    // The genuine entry with its arguments changed, and the other queue's moved here.
    let changed: Vec<&str> = signed
        .chunks(2)
        .flat_map(|pair| {
            let value = if pair[0] == "args" { victim } else { &pair[1] };
            [pair[0].as_str(), value]
        })
        .collect();
    xadd(&server, &key, &changed);
    let moved: Vec<&str> = elsewhere.iter().map(String::as_str).collect();
    xadd(&server, &key, &moved);

    let runs = Arc::new(Mutex::new(Vec::new()));
    let seen = runs.clone();
    let worker = payments
        .worker()
        .poll_every(5 * MS)
        .handle(Handler::new(
            "refund_order",
            move |(who, amount): (String, u32)| {
                let seen = seen.clone();
                async move {
                    seen.lock()
                        .unwrap()
                        .push((who, amount, queue::current().unwrap().id));
                    Ok::<_, std::io::Error>(())
                }
            },
        ))
        .start();
    eventually(Duration::from_secs(10), "every entry settled", || {
        let s = payments.snapshot();
        s.completed == 1 && s.dead_lettered == 4
    })
    .await;
    assert_eq!(
        *runs.lock().unwrap(),
        [("alice".to_owned(), 10, genuine)],
        "only the genuine task ran"
    );
    let snapshot = payments.snapshot();
    assert!(snapshot.signed);
    assert_eq!(snapshot.rejected, 4, "{snapshot:?}");
    let letters = server
        .query(&["XRANGE", &format!("{key}:dead"), "-", "+"])
        .unwrap();
    let mut reasons = values_of(&letters, "reason");
    reasons.sort_unstable();
    assert_eq!(
        reasons,
        [
            "bad_signature",
            "bad_signature",
            "bad_signature",
            "unsigned"
        ],
        "{letters}"
    );
    assert!(letters.contains(unsigned.as_str()) && letters.contains(forged.as_str()));
    assert_eq!(server.query(&["XLEN", &key]).unwrap(), "0", "nothing left");
    worker.shutdown(Duration::from_secs(1)).await;
}

/// Bytes the server has sent to its clients so far.
fn bytes_sent(server: &RedisServer) -> u64 {
    let info = server.query(&["INFO", "stats"]).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("total_net_output_bytes:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_hundred_megabyte_entry_is_refused_inside_redis_and_never_reaches_the_instance() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    // One thread runs everything (the worker, the connection's driver), so the counting
    // allocator, which counts per thread, sees all this instance allocates.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let prefix = server.key_prefix("huge");
    let key = format!("{prefix}:queue:{{media}}");
    let queue = rt.block_on(async {
        let store = store(&server.url(), &prefix, "a", Duration::from_secs(5)).await;
        TaskQueue::builder("media").build(&store)
    });
    // Written inside Redis, so not even this test holds the 100 MB: an entry whose arguments
    // are 100 MB, one with 2,000 fields, then an ordinary task.
    let huge = TaskId::random();
    // The script may take longer than the kit's one-second read: its effect is awaited.
    let _ = server.query(&[
        "EVAL",
        "redis.call('XADD', KEYS[1], '*', 'v', '1', 'id', ARGV[1], 'op', 'transcode', \
         'args', string.rep('x', 100 * 1024 * 1024), 'at', '0')",
        "1",
        &key,
        huge.as_str(),
    ]);
    let start = Instant::now();
    while server.query(&["XLEN", &key]).ok().as_deref() != Some("1") {
        assert!(start.elapsed() < Duration::from_secs(30), "never written");
        std::thread::sleep(50 * MS);
    }
    server
        .query(&[
            "EVAL",
            "local f = {} for i = 1, 4000 do f[i] = 'f' .. i end \
             redis.call('XADD', KEYS[1], '*', unpack(f))",
            "1",
            &key,
        ])
        .unwrap();
    let ordinary = rt.block_on(queue.enqueue("transcode", &(7u32,))).unwrap();
    let done = Completions::default();
    let sent_before = bytes_sent(&server);
    let counted = allocation_counter::measure(|| {
        rt.block_on(async {
            let worker = queue
                .worker()
                .poll_every(5 * MS)
                .handle(recording("transcode", &done))
                .start();
            eventually(Duration::from_secs(20), "all three settled", || {
                let s = queue.snapshot();
                s.completed == 1 && s.dead_lettered == 2
            })
            .await;
            worker.shutdown(Duration::from_secs(1)).await;
        });
    });
    let sent = bytes_sent(&server) - sent_before;
    eprintln!(
        "a 100 MB entry: {sent} bytes sent by the server, at most {} bytes allocated at once here",
        counted.bytes_max
    );
    assert!(sent < 1 << 20, "{sent} bytes crossed the wire");
    assert!(
        counted.bytes_max < 8 << 20,
        "the instance held {} bytes at once",
        counted.bytes_max
    );
    assert_eq!(queue.snapshot().rejected, 2);
    assert_eq!(done.ids(), HashSet::from([ordinary.to_string()]));
    let letters = server
        .query(&["XRANGE", &format!("{key}:dead"), "-", "+"])
        .unwrap();
    assert_eq!(values_of(&letters, "reason"), ["too_large", "too_large"]);
    let errors = values_of(&letters, "error");
    assert!(
        errors.contains(&"field `args` is 104857600 bytes, bound 1048576"),
        "{errors:?}"
    );
    assert!(
        errors.contains(&"the entry has 2000 fields, bound 8"),
        "{errors:?}"
    );
    // The dead letter keeps the task's id and a kilobyte of its arguments, as evidence.
    assert!(letters.contains(huge.as_str()));
    assert!(
        values_of(&letters, "args").iter().all(|a| a.len() <= 1024),
        "arguments cut"
    );
}

#[tokio::test]
async fn the_consumer_list_is_cut_inside_redis_before_it_is_read() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("consumers");
    let key = format!("{prefix}:queue:{{media}}");
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("media").build(&store);
    server
        .query(&["XGROUP", "CREATE", &key, "workers", "0", "MKSTREAM"])
        .unwrap();
    // 2,000 consumers holding a task each, and one whose name is a megabyte.
    server
        .query(&[
            "EVAL",
            "for i = 1, 2001 do \
               redis.call('XADD', KEYS[1], '*', 'v', '1') \
               local name = 'ghost-' .. i \
               if i == 2001 then name = string.rep('n', 1024 * 1024) end \
               redis.call('XREADGROUP', 'GROUP', 'workers', name, 'COUNT', 1, 'STREAMS', KEYS[1], '>') \
             end",
            "1",
            &key,
        ])
        .unwrap();
    let sent_before = bytes_sent(&server);
    queue.refresh().await.unwrap();
    let sent = bytes_sent(&server) - sent_before;
    let snapshot = queue.snapshot();
    assert_eq!((snapshot.pending, snapshot.consumers_total), (2001, 2001));
    assert_eq!(snapshot.consumers.len(), 64, "listed up to the bound");
    assert!(snapshot.consumers.iter().all(|c| c.consumer.len() <= 128));
    assert!(sent < 16 << 10, "{sent} bytes crossed the wire");
}

#[tokio::test]
async fn a_dead_letter_redis_refuses_leaves_the_task_pending_logged_and_counted() {
    let (logs, _guard) = common::capture();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("unmovable");
    let key = format!("{prefix}:queue:{{media}}");
    let dead = format!("{key}:dead");
    // Someone made the dead-letter stream a string: every XADD to it fails with WRONGTYPE.
    server.query(&["SET", &dead, "not a stream"]).unwrap();
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("media").build(&store);
    let worker = queue
        .worker()
        .max_deliveries(1)
        .visibility_timeout(200 * MS)
        .poll_every(5 * MS)
        .handle(Handler::new("transcode", |(): ()| async {
            Err::<(), _>(std::io::Error::other("the codec is missing"))
        }))
        .start();
    let id = queue.enqueue("transcode", &()).await.unwrap();
    eventually(Duration::from_secs(5), "the failed move", || {
        queue.snapshot().settle_failed >= 1
    })
    .await;
    assert_eq!(queue.snapshot().dead_lettered, 0);
    assert_eq!(
        server.query(&["XLEN", &key]).unwrap(),
        "1",
        "the task is still in the stream"
    );
    let pending = server.query(&["XPENDING", &key, "workers"]).unwrap();
    assert!(pending.starts_with("1\n"), "and pending: {pending}");
    let lines = logs.lines_with(&[
        "kind=\"dead_letter_failed\"",
        "reason=\"WRONGTYPE\"",
        id.as_str(),
    ]);
    assert!(!lines.is_empty(), "{}", logs.text());

    // Repaired: the next claim moves it, with the error its last delivery recorded.
    server.query(&["DEL", &dead]).unwrap();
    eventually(Duration::from_secs(5), "the dead letter", || {
        queue.snapshot().dead_lettered == 1
    })
    .await;
    let letters = server.query(&["XRANGE", &dead, "-", "+"]).unwrap();
    assert!(letters.contains(id.as_str()), "{letters}");
    assert_eq!(values_of(&letters, "error"), ["the codec is missing"]);
    assert_eq!(values_of(&letters, "reason"), ["max_deliveries"]);
    assert_eq!(server.query(&["XLEN", &key]).unwrap(), "0");
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn an_acknowledgement_is_reported_as_it_went_when_its_bookkeeping_fails() {
    let (logs, _guard) = common::capture();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("bookkeeping");
    let key = format!("{prefix}:queue:{{media}}");
    // The errors hash is a string: the HDEL that clears a task's last error fails.
    server
        .query(&["SET", &format!("{key}:errors"), "not a hash"])
        .unwrap();
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("media").build(&store);
    let done = Completions::default();
    let worker = queue
        .worker()
        .poll_every(5 * MS)
        .handle(recording("transcode", &done))
        .start();
    queue.enqueue("transcode", &(1u32,)).await.unwrap();
    eventually(Duration::from_secs(5), "settled", || {
        let s = queue.snapshot();
        s.completed + s.settle_failed > 0
    })
    .await;
    tokio::time::sleep(300 * MS).await;
    let snapshot = queue.snapshot();
    assert_eq!(
        (snapshot.completed, snapshot.settle_failed),
        (1, 0),
        "{snapshot:?}"
    );
    assert_eq!(
        server.query(&["XLEN", &key]).unwrap(),
        "0",
        "acknowledged and deleted"
    );
    assert!(
        logs.lines_with(&["kind=\"ack_failed\""]).is_empty(),
        "no false \"runs again\": {}",
        logs.text()
    );
    assert_eq!(logs.lines_with(&["kind=\"errors_unwritable\""]).len(), 1);
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_that_ends_after_another_worker_claimed_its_task_leaves_it_to_that_worker() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("late");
    let key = format!("{prefix}:queue:{{media}}");
    let visibility = Duration::from_secs(1);
    // What each delivery saw: its instance and attempt.
    let runs: Arc<Mutex<Vec<(&'static str, u32)>>> = Arc::default();
    let b_running = Arc::new(AtomicBool::new(false));

    // Instance a, on a thread of its own: its delivery blocks that thread (which its deadline
    // cannot cut) until instance b has claimed the task, past the visibility timeout.
    let (queue_tx, queue_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let a = {
        let (url, prefix) = (server.url(), prefix.clone());
        let (runs, b_running) = (runs.clone(), b_running.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let store = store(&url, &prefix, "a", Duration::from_secs(2)).await;
                let queue = TaskQueue::builder("media").build(&store);
                let worker = queue
                    .worker()
                    .visibility_timeout(visibility)
                    .poll_every(5 * MS)
                    .handle(Handler::new("transcode", move |(): ()| {
                        let (runs, b_running) = (runs.clone(), b_running.clone());
                        async move {
                            runs.lock()
                                .unwrap()
                                .push(("a", queue::current().unwrap().attempt));
                            let start = Instant::now();
                            while !b_running.load(SeqCst) && start.elapsed() < 10 * visibility {
                                std::thread::sleep(MS);
                            }
                            Ok::<_, std::io::Error>(())
                        }
                    }))
                    .start();
                queue_tx.send(queue).unwrap();
                let _ = stop_rx.await;
                worker.shutdown(Duration::from_secs(1)).await;
            });
        })
    };
    let queue_a = queue_rx.recv().unwrap();
    queue_a.enqueue("transcode", &()).await.unwrap();
    eventually(Duration::from_secs(5), "a started", || {
        !runs.lock().unwrap().is_empty()
    })
    .await;

    // Instance b claims the task once it was idle for the visibility timeout, and runs it
    // for 500 ms (within its deadline, four fifths of the timeout).
    let store_b = store(&server.url(), &prefix, "b", Duration::from_secs(2)).await;
    let queue_b = TaskQueue::builder("media").build(&store_b);
    let worker_b = {
        let (runs, b_running) = (runs.clone(), b_running.clone());
        queue_b
            .worker()
            .visibility_timeout(visibility)
            .poll_every(5 * MS)
            .handle(Handler::new("transcode", move |(): ()| {
                let (runs, b_running) = (runs.clone(), b_running.clone());
                async move {
                    runs.lock()
                        .unwrap()
                        .push(("b", queue::current().unwrap().attempt));
                    b_running.store(true, SeqCst);
                    tokio::time::sleep(500 * MS).await;
                    b_running.store(false, SeqCst);
                    Ok::<_, std::io::Error>(())
                }
            }))
            .start()
    };
    // a's delivery ends, successfully, while b runs the task: it must neither acknowledge
    // nor delete it.
    eventually(Duration::from_secs(5), "a's delivery settled", || {
        let s = queue_a.snapshot();
        s.completed + s.superseded > 0
    })
    .await;
    assert!(
        b_running.load(SeqCst),
        "b runs the task now: {:?}",
        runs.lock().unwrap()
    );
    assert_eq!(
        server.query(&["XLEN", &key]).unwrap(),
        "1",
        "the task b runs is still in the stream"
    );
    let pending = server
        .query(&["XPENDING", &key, "workers", "-", "+", "10"])
        .unwrap();
    assert!(pending.contains("\nb\n"), "and pending with b: {pending}");
    let a_snapshot = queue_a.snapshot();
    assert_eq!((a_snapshot.completed, a_snapshot.superseded), (0, 1));

    eventually(Duration::from_secs(5), "b finished", || {
        queue_b.snapshot().completed == 1
    })
    .await;
    assert_eq!(*runs.lock().unwrap(), [("a", 1), ("b", 2)]);
    assert_eq!(server.query(&["XLEN", &key]).unwrap(), "0");
    worker_b.shutdown(Duration::from_secs(1)).await;
    stop_tx.send(()).unwrap();
    a.join().unwrap();
}

#[tokio::test]
async fn the_task_deadline_is_kept_within_four_fifths_of_the_visibility_timeout() {
    let (logs, _guard) = common::capture();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("deadline");
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("media").build(&store);
    // Asked for a deadline equal to the visibility timeout: another worker could claim the
    // task at the moment this one finishes it.
    let worker = queue
        .worker()
        .visibility_timeout(500 * MS)
        .task_deadline(500 * MS)
        .max_deliveries(1)
        .poll_every(5 * MS)
        .handle(Handler::new("transcode", |(): ()| async {
            tokio::time::sleep(450 * MS).await;
            Ok::<_, std::io::Error>(())
        }))
        .start();
    assert_eq!(worker.task_deadline(), 400 * MS);
    let warned = logs.lines_with(&[
        "kind=\"task_deadline_lowered\"",
        "task_deadline_ms=500",
        "visibility_timeout_ms=500",
        "lowered_to_ms=400",
    ]);
    assert_eq!(warned.len(), 1, "{}", logs.text());
    // A delivery of 450 ms now outlives its deadline.
    queue.enqueue("transcode", &()).await.unwrap();
    eventually(Duration::from_secs(5), "dead-lettered", || {
        queue.snapshot().dead_lettered == 1
    })
    .await;
    let letters = server
        .query(&[
            "XRANGE",
            &format!("{prefix}:queue:{{media}}:dead"),
            "-",
            "+",
        ])
        .unwrap();
    assert_eq!(
        values_of(&letters, "error"),
        ["did not finish within its deadline of 400ms"]
    );
    assert_eq!(queue.snapshot().completed, 0);
    // Within four fifths, nothing is lowered or said.
    let fits = queue
        .worker()
        .visibility_timeout(500 * MS)
        .task_deadline(400 * MS)
        .start();
    assert_eq!(fits.task_deadline(), 400 * MS);
    assert_eq!(
        logs.lines_with(&["kind=\"task_deadline_lowered\""]).len(),
        1
    );
    fits.shutdown(Duration::from_secs(1)).await;
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn an_operation_name_from_the_stream_is_a_field_and_cannot_forge_a_log_line() {
    let (logs, _guard) = common::capture();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("injection");
    let key = format!("{prefix}:queue:{{media}}");
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("media").build(&store);
    // No secret here: a writer may add any well-formed entry. Its operation holds a line
    // break and what would look like an event of its own.
    let forged = "refund\nINFO policy: kind=\"all_clear\" forged";
    let id = TaskId::random();
    xadd(
        &server,
        &key,
        &[
            "v",
            "1",
            "id",
            id.as_str(),
            "op",
            forged,
            "args",
            "[]",
            "at",
            "0",
        ],
    );
    let worker = queue.worker().max_deliveries(1).poll_every(5 * MS).start();
    eventually(Duration::from_secs(5), "dead-lettered", || {
        queue.snapshot().dead_lettered == 1
    })
    .await;
    worker.shutdown(Duration::from_secs(1)).await;
    let text = logs.text();
    assert!(
        !text
            .lines()
            .any(|line| line.starts_with("INFO policy: kind=\"all_clear\"")),
        "a forged line: {text}"
    );
    let lines = logs.lines_with(&[
        "kind=\"dead_lettered\"",
        r#"operation="refund\nINFO policy: kind=\"all_clear\" forged""#,
        id.as_str(),
    ]);
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        !lines[0].contains("a task was moved to the dead-letter stream refund"),
        "the message names no operation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enqueue_can_wait_for_a_replica_without_holding_up_the_rest() {
    let Some(primary) = RedisTcpServer::start(&[]) else {
        return;
    };
    let port = primary.url().rsplit(':').next().unwrap().to_owned();
    let replica = RedisTcpServer::start(&["--replicaof", "127.0.0.1", &port]).unwrap();
    let start = Instant::now();
    while !replica
        .query(&["INFO", "replication"])
        .unwrap()
        .contains("master_link_status:up")
    {
        assert!(start.elapsed() < Duration::from_secs(10), "never in sync");
        std::thread::sleep(20 * MS);
    }
    let prefix = primary.key_prefix("replicated");
    let key = format!("{prefix}:queue:{{ledger}}");
    let store = store(&primary.url(), &prefix, "a", Duration::from_secs(1)).await;
    let ledger = TaskQueue::builder("ledger")
        .wait_for_replicas(1, 500 * MS)
        .build(&store);
    let plain = TaskQueue::builder("thumbnails").build(&store);

    ledger.enqueue("post_entry", &(1u32,)).await.unwrap();
    assert_eq!(
        replica.query(&["XLEN", &key]).unwrap(),
        "1",
        "on the replica when the enqueue returned"
    );

    // The replica dies: the enqueue waits its 500 ms and says the task is not safe yet.
    drop(replica);
    let waiting = {
        let ledger = ledger.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            (
                ledger.enqueue("post_entry", &(2u32,)).await,
                start.elapsed(),
            )
        })
    };
    tokio::time::sleep(50 * MS).await;
    // Meanwhile, enqueues that do not wait go through at once: the WAIT has a connection of
    // its own.
    let quick = Instant::now();
    plain.enqueue("resize", &(3u32,)).await.unwrap();
    assert!(quick.elapsed() < 200 * MS, "{:?}", quick.elapsed());
    let (result, took) = waiting.await.unwrap();
    assert!(took >= 500 * MS, "{took:?}");
    match result {
        Err(EnqueueError::NotReplicated {
            replicas: 1,
            acknowledged: 0,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        primary.query(&["XLEN", &key]).unwrap(),
        "2",
        "in the stream"
    );
    let snapshot = ledger.snapshot();
    assert_eq!((snapshot.enqueued, snapshot.not_replicated), (2, 1));
}

#[tokio::test]
async fn consumers_idle_past_the_bound_with_no_task_leave_the_group() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("ghosts");
    let key = format!("{prefix}:queue:{{media}}");
    server
        .query(&["XGROUP", "CREATE", &key, "workers", "0", "MKSTREAM"])
        .unwrap();
    // A stopped instance that holds nothing, and one that still holds a task.
    server
        .query(&["XGROUP", "CREATECONSUMER", &key, "workers", "ghost"])
        .unwrap();
    xadd(&server, &key, &["v", "1"]);
    server
        .query(&[
            "XREADGROUP",
            "GROUP",
            "workers",
            "holder",
            "COUNT",
            "1",
            "STREAMS",
            &key,
            ">",
        ])
        .unwrap();
    tokio::time::sleep(300 * MS).await;
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("media").build(&store);
    let worker = queue
        .worker()
        .visibility_timeout(Duration::from_secs(60))
        .remove_idle_consumers_after(200 * MS)
        .poll_every(5 * MS)
        .start();
    eventually(Duration::from_secs(5), "the ghost removed", || {
        queue.snapshot().consumers_removed == 1
    })
    .await;
    let consumers = server
        .query(&["XINFO", "CONSUMERS", &key, "workers"])
        .unwrap();
    let names = values_of(&consumers, "name");
    assert!(!names.contains(&"ghost"), "{names:?}");
    assert!(names.contains(&"holder"), "it holds a task: {names:?}");
    tokio::time::sleep(300 * MS).await;
    assert_eq!(queue.snapshot().consumers_removed, 1, "nothing more");
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_server_that_may_evict_keys_is_warned_about_once() {
    let (logs, _guard) = common::capture();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("eviction");
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let checked = |queue: &TaskQueue| {
        let queue = queue.clone();
        async move {
            let worker = queue.worker().poll_every(5 * MS).start();
            tokio::time::sleep(200 * MS).await;
            worker.shutdown(Duration::from_secs(1)).await;
        }
    };
    // The default, `noeviction`: nothing to say.
    checked(&TaskQueue::builder("safe").build(&store)).await;
    assert!(logs.lines_with(&["kind=\"eviction_possible\""]).is_empty());

    server
        .query(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        .unwrap();
    let risky = TaskQueue::builder("risky").build(&store);
    checked(&risky).await;
    checked(&risky).await;
    let warned = logs.lines_with(&[
        "kind=\"eviction_possible\"",
        "name=\"risky\"",
        "policy=\"allkeys-lru\"",
    ]);
    assert_eq!(warned.len(), 1, "{}", logs.text());
}

#[tokio::test]
async fn an_enqueue_past_the_size_bounds_is_refused_and_counted() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("bounds");
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("media").max_task_bytes(64).build(&store);
    let big = queue
        .enqueue("transcode", &("x".repeat(100),))
        .await
        .unwrap_err();
    assert_eq!(
        big.to_string(),
        "queue `media` refused the task: arguments of 104 bytes, above the bound of 64"
    );
    let named = queue.enqueue(&"o".repeat(300), &(1u32,)).await.unwrap_err();
    assert_eq!(named.code(), "too_large");
    queue
        .enqueue("transcode", &("x".repeat(50),))
        .await
        .unwrap();
    let snapshot = queue.snapshot();
    assert_eq!((snapshot.enqueued, snapshot.refused_too_large), (1, 2));
    assert_eq!(
        server
            .query(&["XLEN", &format!("{prefix}:queue:{{media}}")])
            .unwrap(),
        "1"
    );
}

#[tokio::test]
async fn malformed_entries_are_dead_lettered_unrun_and_counted() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("malformed");
    let key = format!("{prefix}:queue:{{media}}");
    let store = store(&server.url(), &prefix, "a", Duration::from_secs(2)).await;
    let queue = TaskQueue::builder("media").build(&store);
    let id = TaskId::random();
    let id = id.as_str();
    // A second `op` after a harmless one, a field the encoding does not have, another
    // version, arguments that are not text.
    xadd(
        &server,
        &key,
        &[
            "v",
            "1",
            "id",
            id,
            "op",
            "transcode",
            "args",
            "[1]",
            "at",
            "0",
            "op",
            "transcode",
        ],
    );
    xadd(
        &server,
        &key,
        &[
            "v",
            "1",
            "id",
            id,
            "op",
            "transcode",
            "args",
            "[1]",
            "at",
            "0",
            "run_as",
            "root",
        ],
    );
    xadd(
        &server,
        &key,
        &[
            "v",
            "2",
            "id",
            id,
            "op",
            "transcode",
            "args",
            "[1]",
            "at",
            "0",
        ],
    );
    server
        .query(&[
            "EVAL",
            "redis.call('XADD', KEYS[1], '*', 'v', '1', 'id', ARGV[1], 'op', 'transcode', \
             'args', string.char(255, 254), 'at', '0')",
            "1",
            &key,
            id,
        ])
        .unwrap();
    let done = Completions::default();
    let worker = queue
        .worker()
        .poll_every(5 * MS)
        .handle(recording("transcode", &done))
        .start();
    eventually(Duration::from_secs(5), "all four dead-lettered", || {
        queue.snapshot().dead_lettered == 4
    })
    .await;
    assert_eq!(done.distinct(), 0, "none ran");
    assert_eq!(queue.snapshot().rejected, 4);
    // Only their reasons and errors: a dead letter keeps the arguments that are not text.
    let letters = server
        .query(&[
            "EVAL",
            "local out = {} \
             for _, entry in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do \
               local f = entry[2] \
               for i = 1, #f, 2 do \
                 if f[i] == 'reason' or f[i] == 'error' then \
                   out[#out + 1] = f[i] out[#out + 1] = f[i + 1] \
                 end \
               end \
             end \
             return out",
            "1",
            &format!("{key}:dead"),
        ])
        .unwrap();
    assert_eq!(values_of(&letters, "reason"), ["malformed"; 4]);
    let mut errors = values_of(&letters, "error");
    errors.sort_unstable();
    assert_eq!(
        errors,
        [
            "a field is not UTF-8 text",
            "a field the encoding does not have",
            "an unknown encoding version",
            "field `op` is repeated",
        ]
    );
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_scripts_run_and_an_enqueue_waits_for_the_replica() {
    let Some(cluster) = RedisCluster::start(3, 1) else {
        return;
    };
    let store = RedisStore::builder()
        .prefix(cluster.key_prefix("queue"))
        .instance("a")
        .timeout(Duration::from_secs(2))
        .shared_secret(SECRET)
        .connect_cluster(cluster.urls())
        .await
        .unwrap();
    let queue = TaskQueue::builder("ledger")
        .wait_for_replicas(1, Duration::from_secs(2))
        .build(&store);
    let done = Completions::default();
    let worker = queue
        .worker()
        .poll_every(5 * MS)
        .handle(recording("post_entry", &done))
        .start();
    let mut ids = HashSet::new();
    for n in 0..20u32 {
        ids.insert(
            queue
                .enqueue("post_entry", &(n,))
                .await
                .unwrap()
                .to_string(),
        );
    }
    done.wait_for(20, Duration::from_secs(20)).await;
    assert_eq!(done.ids(), ids);
    queue.refresh().await.unwrap();
    let snapshot = queue.snapshot();
    assert_eq!(
        (snapshot.completed, snapshot.not_replicated, snapshot.length),
        (20, 0, 0),
        "{snapshot:?}"
    );
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_sentinel_an_enqueue_waits_for_the_replica_on_a_connection_of_its_own() {
    let Some(setup) = RedisSentinel::start() else {
        return;
    };
    let store = RedisStore::builder()
        .prefix(setup.key_prefix("queue"))
        .instance("a")
        .timeout(Duration::from_secs(2))
        .connect_sentinel(setup.sentinel_urls(), RedisSentinel::SERVICE)
        .await
        .unwrap();
    let queue = TaskQueue::builder("ledger")
        .wait_for_replicas(1, Duration::from_secs(2))
        .build(&store);
    let done = Completions::default();
    let worker = queue
        .worker()
        .poll_every(5 * MS)
        .handle(recording("post_entry", &done))
        .start();
    for n in 0..5u32 {
        queue.enqueue("post_entry", &(n,)).await.unwrap();
    }
    done.wait_for(5, Duration::from_secs(20)).await;
    assert_eq!(queue.snapshot().not_replicated, 0);
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_flood_of_forged_entries_is_counted_in_full_and_warned_about_once_a_second() {
    let (logs, _guard) = common::capture();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = server.key_prefix("flood");
    let key = format!("{prefix}:queue:{{media}}");
    let store = RedisStore::builder()
        .prefix(&prefix)
        .instance("a")
        .timeout(Duration::from_secs(2))
        .shared_secret(SECRET)
        .connect(&server.url())
        .await
        .unwrap();
    let queue = TaskQueue::builder("media").build(&store);
    server
        .query(&[
            "EVAL",
            "for i = 1, 500 do \
               redis.call('XADD', KEYS[1], '*', 'v', '1', 'id', ARGV[1], 'op', 'transcode', \
                 'args', '[]', 'at', '0') \
             end",
            "1",
            &key,
            TaskId::random().as_str(),
        ])
        .unwrap();
    let start = Instant::now();
    let worker = queue.worker().concurrency(32).poll_every(5 * MS).start();
    eventually(Duration::from_secs(20), "all rejected", || {
        queue.snapshot().rejected == 500
    })
    .await;
    let seconds = start.elapsed().as_secs();
    worker.shutdown(Duration::from_secs(1)).await;
    let warned = logs.lines_with(&["WARN", "kind=\"entry_rejected\""]).len() as u64;
    let quiet = logs.lines_with(&["DEBUG", "kind=\"entry_rejected\""]).len() as u64;
    eprintln!("500 forged entries in {seconds} s: {warned} WARN, {quiet} DEBUG");
    assert!(
        warned >= 1 && warned <= seconds + 1,
        "{warned} in {seconds} s"
    );
    assert_eq!(warned + quiet, 500, "each one logged");
    assert!(
        logs.lines_with(&["WARN", "kind=\"dead_lettered\""])
            .is_empty(),
        "no second WARN per entry"
    );
}
