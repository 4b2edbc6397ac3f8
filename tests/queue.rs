//! `#[background(queue = "...")]` at run time: with the queue installed a call enqueues its
//! arguments on the Redis stream and a worker runs the function from them (`name::task()`);
//! without it, the call runs on the in-process background pool as before.
#![cfg(feature = "redis")]
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Mutex;
use std::time::{Duration, Instant};

use velocity_policy::queue::{self, Delivery, QueueSettings, TaskQueue};
use velocity_policy::redis_store::RedisStore;
use velocity_policy_testkit::RedisServer;

const MS: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct EmbedError(&'static str);

impl std::fmt::Display for EmbedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// What each run of the functions below saw: its arguments and its delivery (none on the
/// in-process pool).
static RUNS: Mutex<Vec<(String, u32, Option<Delivery>)>> = Mutex::new(Vec::new());

fn runs_of(document: &str) -> Vec<(u32, Option<Delivery>)> {
    RUNS.lock()
        .unwrap()
        .iter()
        .filter(|(d, _, _)| d == document)
        .map(|(_, chunks, delivery)| (*chunks, delivery.clone()))
        .collect()
}

async fn wait_for_run(document: &str) -> Vec<(u32, Option<Delivery>)> {
    let start = Instant::now();
    loop {
        let runs = runs_of(document);
        if !runs.is_empty() {
            return runs;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "`{document}` never ran"
        );
        tokio::time::sleep(5 * MS).await;
    }
}

/// Embeds a document's chunks: on the durable queue `embeddings` when it is installed.
#[velocity_policy::background(queue = "embeddings", deadline = "5s")]
#[velocity_policy::idempotent]
async fn embed_document(document: String, chunks: u32) -> Result<(), EmbedError> {
    if document.is_empty() {
        return Err(EmbedError("an empty document has nothing to embed"));
    }
    RUNS.lock()
        .unwrap()
        .push((document, chunks, queue::current()));
    Ok(())
}

/// On a queue this test never installs.
#[velocity_policy::background(queue = "thumbnails")]
#[velocity_policy::idempotent]
async fn make_thumbnail(image: String) {
    RUNS.lock().unwrap().push((image, 0, queue::current()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_enqueues_its_arguments_and_a_worker_runs_the_function() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let store = RedisStore::builder()
        .prefix(server.key_prefix("attribute"))
        .timeout(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let embeddings = TaskQueue::builder("embeddings").build(&store);
    queue::install(embeddings.clone());

    embed_document("report.pdf".to_owned(), 12);
    embed_document(String::new(), 1);
    // Enqueued, not run: no worker yet.
    let start = Instant::now();
    while embeddings.snapshot().enqueued < 2 {
        assert!(start.elapsed() < Duration::from_secs(10), "never enqueued");
        tokio::time::sleep(5 * MS).await;
    }
    assert!(runs_of("report.pdf").is_empty());

    let worker = embeddings
        .worker()
        .max_deliveries(1)
        .poll_every(5 * MS)
        .handle(embed_document::task())
        .start();
    let runs = wait_for_run("report.pdf").await;
    assert_eq!(runs.len(), 1);
    let (chunks, delivery) = &runs[0];
    assert_eq!(*chunks, 12, "the arguments, decoded");
    assert_eq!(delivery.as_ref().unwrap().attempt, 1, "run by the worker");
    // The failing call's own error is its dead letter's.
    while embeddings.snapshot().dead_lettered < 1 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never dead-lettered"
        );
        tokio::time::sleep(5 * MS).await;
    }
    let key = format!(
        "{}:queue:{{embeddings}}:dead",
        server.key_prefix("attribute")
    );
    let letter = server.query(&["XRANGE", &key, "-", "+"]).unwrap();
    assert!(
        letter.contains("an empty document has nothing to embed"),
        "{letter}"
    );
    assert!(letter.contains("embed_document"), "the operation: {letter}");
    worker.shutdown(Duration::from_secs(1)).await;
}

/// On a queue whose enqueues in flight are bounded.
#[velocity_policy::background(queue = "bounded")]
#[velocity_policy::idempotent]
async fn bounded_work(n: u32) {
    let _ = n;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_bound_of_enqueues_waiting_for_redis_are_refused_at_once() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let store = RedisStore::builder()
        .prefix(server.key_prefix("bounded"))
        .timeout(Duration::from_secs(1))
        .connect(&server.url())
        .await
        .unwrap();
    let bounded = TaskQueue::builder("bounded")
        .max_enqueues_in_flight(2)
        .build(&store);
    queue::install(bounded.clone());
    // Redis frozen: the first two wait for it, the other three are refused at once.
    server.pause();
    for n in 0..5 {
        bounded_work(n);
    }
    let snapshot = bounded.snapshot();
    assert_eq!((snapshot.enqueued, snapshot.refused_unavailable), (0, 3));
    server.resume();
    let start = Instant::now();
    while bounded.snapshot().enqueued < 2 {
        assert!(start.elapsed() < Duration::from_secs(10), "never enqueued");
        tokio::time::sleep(5 * MS).await;
    }
    assert_eq!(bounded.snapshot().refused_unavailable, 3);
}

/// Put on queue `filed` by its operation in `tests/policies/service.policy`.
#[velocity_policy::background]
async fn embed_from_file(document: String) {
    RUNS.lock().unwrap().push((document, 0, queue::current()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_file_operation_puts_its_function_on_a_queue() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let store = RedisStore::builder()
        .prefix(server.key_prefix("filed"))
        .timeout(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let filed = TaskQueue::builder("filed").build(&store);
    queue::install(filed.clone());
    let worker = filed
        .worker()
        .poll_every(5 * MS)
        .handle(embed_from_file::task())
        .start();
    embed_from_file("from-the-file.txt".to_owned());
    let runs = wait_for_run("from-the-file.txt").await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].1.as_ref().unwrap().attempt, 1, "run by the worker");
    assert_eq!(filed.snapshot().enqueued, 1);
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_installed_queue_the_call_runs_on_the_in_process_pool() {
    make_thumbnail("cat.png".to_owned());
    let runs = wait_for_run("cat.png").await;
    assert_eq!(runs, [(0, None)], "run once, by no queue worker");
}

/// Always fails; on queue `stanza`, whose numbers `tests/policies/service.policy` declares.
#[velocity_policy::background]
async fn poison_from_file(document: String) -> Result<(), EmbedError> {
    RUNS.lock().unwrap().push((document, 0, queue::current()));
    Err(EmbedError("always fails"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_stanzas_numbers_bound_the_queue_and_run_its_worker() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let settings = poison_from_file::queue_settings();
    let mut expected = QueueSettings::new("stanza");
    expected.max_len = Some(3);
    expected.max_deliveries = Some(2);
    expected.visibility_timeout = Some(200 * MS);
    expected.task_deadline = Some(150 * MS);
    expected.concurrency = Some(2);
    assert_eq!(settings, expected, "the file's numbers, compiled in");
    assert_eq!(poison_from_file::task().settings(), Some(&expected));

    let store = RedisStore::builder()
        .prefix(server.key_prefix("stanza"))
        .timeout(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let stanza = TaskQueue::configured(settings).build(&store);
    queue::install(stanza.clone());
    // `max_len = 3`: the fourth enqueue is refused, visibly.
    for n in 0..4 {
        poison_from_file(format!("poison-{n}"));
    }
    let start = Instant::now();
    while {
        let snapshot = stanza.snapshot();
        snapshot.enqueued + snapshot.refused_full < 4
    } {
        assert!(start.elapsed() < Duration::from_secs(10), "never enqueued");
        tokio::time::sleep(5 * MS).await;
    }
    let snapshot = stanza.snapshot();
    assert_eq!(
        (snapshot.max_len, snapshot.enqueued, snapshot.refused_full),
        (3, 3, 1)
    );

    // The worker takes the file's numbers; an explicit call still wins.
    let builder = stanza.worker().poll_every(5 * MS).refresh_every(20 * MS);
    let shown = format!("{builder:?}");
    for part in [
        "concurrency: 2",
        "visibility: 200ms",
        "max_deliveries: 2",
        "task_deadline: 150ms",
    ] {
        assert!(shown.contains(part), "{part} in {shown}");
    }
    let overridden = format!("{:?}", stanza.worker().max_deliveries(7));
    assert!(overridden.contains("max_deliveries: 7"), "{overridden}");

    // `max_deliveries = 2`: each task is dead-lettered on its second failed delivery.
    let worker = builder.handle(poison_from_file::task()).start();
    let start = Instant::now();
    while stanza.snapshot().dead_lettered < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "not dead-lettered: {:?}",
            stanza.snapshot()
        );
        tokio::time::sleep(10 * MS).await;
    }
    // Nothing runs a dead letter again.
    tokio::time::sleep(500 * MS).await;
    // The calls' enqueues race, so which one was refused is not known: one never ran.
    let attempts: Vec<Vec<u32>> = (0..4)
        .map(|n| {
            runs_of(&format!("poison-{n}"))
                .iter()
                .map(|(_, delivery)| delivery.as_ref().unwrap().attempt)
                .collect()
        })
        .collect();
    assert_eq!(
        attempts.iter().filter(|runs| runs.is_empty()).count(),
        1,
        "the refused task never ran: {attempts:?}"
    );
    for runs in attempts.iter().filter(|runs| !runs.is_empty()) {
        assert_eq!(
            runs,
            &[1, 2],
            "two deliveries, then the dead letter: {attempts:?}"
        );
    }
    let snapshot = stanza.snapshot();
    assert_eq!(
        (
            snapshot.dead_lettered,
            snapshot.redelivered,
            snapshot.completed
        ),
        (3, 3, 0)
    );
    worker.shutdown(Duration::from_secs(1)).await;

    // A queue built without the settings: a worker given the handler still takes its numbers
    // (and the bound it cannot take is logged, `settings_not_applied`).
    let plain = TaskQueue::builder("stanza").build(&store);
    let shown = format!("{:?}", plain.worker().handle(poison_from_file::task()));
    for part in ["visibility: 200ms", "max_deliveries: 2", "concurrency: 2"] {
        assert!(shown.contains(part), "{part} in {shown}");
    }
    let defaults = format!("{:?}", plain.worker());
    assert!(defaults.contains("max_deliveries: 5"), "{defaults}");
}
