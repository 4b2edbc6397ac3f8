//! A saturated background pool behind a real server: background work is shed with its reason,
//! the requests that submit it are not held up, and critical handlers keep their latency.
#![cfg(feature = "http")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

mod defer_support;

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use defer_support::{Client, Server, client, get as fetch, global_capture};
use tokio::sync::watch;
use velocity_policy_runtime::defer::ContainerPlatform;
use velocity_policy_runtime::{AfterResponseLayer, BackgroundPool};

const CAPACITY: usize = 2 + 4;
const SUBMISSIONS: usize = 50;
const CRITICAL: usize = 300;

/// Background work that keeps running, a little CPU at a time, until `done` opens.
async fn enrich(mut done: watch::Receiver<bool>) {
    while !*done.borrow_and_update() {
        std::hint::black_box((0..2_000u64).sum::<u64>());
        tokio::select! {
            _ = done.changed() => {}
            () = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
    }
}

async fn critical_latencies(client: &Client, url: &str) -> (Duration, Duration) {
    let mut latencies = Vec::with_capacity(CRITICAL);
    for _ in 0..CRITICAL {
        let start = Instant::now();
        let (status, body) = fetch(client, url).await;
        latencies.push(start.elapsed());
        assert_eq!((status, body.as_str()), (200, "signed in"));
    }
    latencies.sort();
    (latencies[CRITICAL / 2], latencies[CRITICAL * 99 / 100])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_pool_sheds_background_work_and_critical_handlers_keep_their_latency() {
    let logs = global_capture();
    let platform = ContainerPlatform::new();
    let pool = BackgroundPool::builder("enrichment_http")
        .max_concurrent(2)
        .max_queued(4)
        .platform(platform.clone())
        .build();
    let (done, done_rx) = watch::channel(false);

    let app = {
        let pool = pool.clone();
        Router::new()
            .route("/sign-in", get(|| async { "signed in" }))
            .route(
                "/documents/enrich",
                get(move || {
                    let (pool, done_rx) = (pool.clone(), done_rx.clone());
                    async move {
                        // The response does not depend on the background work: a shed is
                        // reported, not turned into a failure.
                        match pool.submit("embed_document", enrich(done_rx)) {
                            Ok(()) => (StatusCode::ACCEPTED, "queued".to_owned()),
                            Err(refusal) => (StatusCode::OK, format!("skipped: {refusal}")),
                        }
                    }
                }),
            )
            .layer(AfterResponseLayer::with_platform(platform.clone()))
    };
    let server = Server::start(app).await;
    let client = client();
    let critical_url = server.url("/sign-in");

    let (baseline_p50, baseline_p99) = critical_latencies(&client, &critical_url).await;

    // Saturate the pool: 50 submissions at once, room for 2 running and 4 queued.
    let mut submissions = tokio::task::JoinSet::new();
    for _ in 0..SUBMISSIONS {
        let (client, url) = (client.clone(), server.url("/documents/enrich"));
        submissions.spawn(async move {
            let start = Instant::now();
            let response = fetch(&client, &url).await;
            (response, start.elapsed())
        });
    }
    let (mut queued, mut skipped, mut slowest_submission) = (0, 0, Duration::ZERO);
    while let Some(done) = submissions.join_next().await {
        let ((status, body), took) = done.unwrap();
        slowest_submission = slowest_submission.max(took);
        match status {
            202 => queued += 1,
            200 => {
                assert_eq!(
                    body,
                    "skipped: shedding for `enrichment_http` refused the call: background work shed at load 1.00 (threshold 1.00)"
                );
                skipped += 1;
            }
            other => panic!("unexpected status {other}: {body}"),
        }
    }
    assert_eq!((queued, skipped), (CAPACITY, SUBMISSIONS - CAPACITY));
    let snap = pool.snapshot();
    assert_eq!((snap.running, snap.queued), (2, 4));
    assert_eq!(snap.shed_load, (SUBMISSIONS - CAPACITY) as u64);
    let shed_lines = logs.lines_with(&[
        "kind=\"shed\"",
        "name=\"enrichment_http\"",
        "class=\"background\"",
        "reason=\"load\"",
        "of its own capacity",
    ]);
    assert_eq!(shed_lines.len(), SUBMISSIONS - CAPACITY, "{}", logs.text());

    // While the pool stays saturated (its work running, its queue full), critical requests.
    let (saturated_p50, saturated_p99) = critical_latencies(&client, &critical_url).await;
    assert_eq!(pool.running(), 2, "still saturated during the measurement");
    eprintln!(
        "critical p50/p99: {baseline_p50:?}/{baseline_p99:?} idle, {saturated_p50:?}/{saturated_p99:?} with the pool saturated; slowest submission {slowest_submission:?}"
    );
    // Medians of 300 sequential requests; generous, because the machine is shared.
    assert!(
        saturated_p50 <= baseline_p50 * 3 + Duration::from_millis(2),
        "critical latency degraded: {baseline_p50:?} -> {saturated_p50:?}"
    );

    done.send_replace(true);
    server.stop().await;
    let report = platform.shutdown(Duration::from_secs(10)).await;
    assert_eq!(report.abandoned, 0);
    let snap = pool.snapshot();
    assert_eq!((snap.finished, snap.abandoned), (CAPACITY as u64, 0));
}
