//! Background work on a durable queue, against a real `redis-server`: many tasks through two
//! instances, a worker process killed mid-task, a server restarted mid-run with AOF, a poison
//! task, a full queue and a shutdown that abandons its tasks.
//!
//! Each test starts its own server (`policy_testkit::RedisServer`) and uses a key prefix no
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

use policy_runtime::queue::{self, EnqueueError, Handler, TaskId, TaskQueue};
use policy_runtime::redis_store::RedisStore;
use policy_testkit::RedisServer;

const MS: Duration = Duration::from_millis(1);

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
    use policy_testkit::recorder::Recorded;

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
