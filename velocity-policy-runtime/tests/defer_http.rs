//! Deferred work behind a real axum server on loopback, with a real HTTP client: it starts only
//! after the response is finished, never makes the response wait, and never breaks it.
#![cfg(feature = "http")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

mod defer_support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::response::Response;
use axum::routing::get;
use defer_support::{ChannelBody, Server, client, get as fetch, global_capture};
use http_body_util::BodyExt;
use tokio::sync::{mpsc, oneshot, watch};
use velocity_policy_runtime::AfterResponseLayer;
use velocity_policy_runtime::defer::{AfterResponse, ContainerPlatform, ImmediatePlatform};

const SAFETY: Duration = Duration::from_secs(10);

/// One shared sequence for events recorded on both sides, so order is read from numbers,
/// not from clocks.
#[derive(Clone, Default)]
struct Sequence(Arc<AtomicU64>);

impl Sequence {
    fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
}

/// Slots the handler fills or takes, once.
struct Once<T>(Mutex<Option<T>>);

impl<T> Once<T> {
    fn new(value: Option<T>) -> Arc<Self> {
        Arc::new(Self(Mutex::new(value)))
    }
    fn put(&self, value: T) {
        *self.0.lock().unwrap() = Some(value);
    }
    fn take(&self) -> T {
        self.0.lock().unwrap().take().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_work_starts_only_after_the_response_body_is_finished() {
    let platform = ContainerPlatform::new();
    let seq = Sequence::default();
    let body_ended_at = Arc::new(AtomicU64::new(0));
    let (started_tx, started_rx) = oneshot::channel::<(u64, u64)>();
    let started_tx = Once::new(Some(started_tx));
    let body_sender: Arc<Once<mpsc::Sender<Bytes>>> = Once::new(None);

    let app = {
        let (seq, body_ended_at, started_tx, body_sender) = (
            seq.clone(),
            body_ended_at.clone(),
            started_tx.clone(),
            body_sender.clone(),
        );
        Router::new()
            .route(
                "/save",
                get(move |after: AfterResponse| async move {
                    let started_tx = started_tx.take();
                    let (s, ended) = (seq.clone(), body_ended_at.clone());
                    after.defer("index_document", async move {
                        // What the deferred work sees when it starts.
                        let started_at = s.next();
                        let _ = started_tx.send((started_at, ended.load(Ordering::SeqCst)));
                    });
                    let (s, ended) = (seq.clone(), body_ended_at.clone());
                    let (tx, body) = ChannelBody::new(move || {
                        ended.store(s.next(), Ordering::SeqCst);
                    });
                    body_sender.put(tx);
                    Response::new(Body::new(body))
                }),
            )
            .layer(AfterResponseLayer::with_platform(platform.clone()))
    };
    let server = Server::start(app).await;
    let client = client();

    let response = client
        .get(server.url("/save").parse().unwrap())
        .await
        .unwrap();
    let mut body = response.into_body();
    let chunks = body_sender.take();
    chunks.send(Bytes::from_static(b"saved, ")).await.unwrap();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(&first[..], b"saved, ");

    // The client is reading a response that is still streaming: the work it deferred has not
    // been handed over, let alone started.
    let mut started_rx = started_rx;
    assert!(started_rx.try_recv().is_err(), "started while streaming");
    assert_eq!(platform.in_flight(), 0, "handed over while streaming");

    chunks
        .send(Bytes::from_static(b"indexed later"))
        .await
        .unwrap();
    drop(chunks);
    let rest = body.collect().await.unwrap().to_bytes();
    assert_eq!(&rest[..], b"indexed later");
    let client_done_at = seq.next();

    let (started_at, body_end_seen) = tokio::time::timeout(SAFETY, started_rx)
        .await
        .unwrap()
        .unwrap();
    let body_ended_at = body_ended_at.load(Ordering::SeqCst);
    assert!(body_ended_at > 0, "the body reached its end");
    assert_eq!(
        body_end_seen, body_ended_at,
        "when the deferred work started, the body had already ended"
    );
    assert!(started_at > body_ended_at);
    // For the report: which came first on this run, the client reading the last byte or the
    // deferred work starting (both are after the body's end; their order is a race).
    eprintln!(
        "body ended #{body_ended_at}, deferred started #{started_at}, client had it all #{client_done_at}"
    );
    server.stop().await;
    let report = platform.shutdown(SAFETY).await;
    assert_eq!(report.abandoned, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_has_the_complete_response_while_deferred_work_is_still_running() {
    let platform = ContainerPlatform::new();
    let seq = Sequence::default();
    // The deferred work "sleeps" until the client says it has the whole response; if the
    // response waited for the deferred work, neither would ever finish.
    let (client_has_it_tx, client_has_it_rx) = oneshot::channel::<u64>();
    let (report_tx, report_rx) = oneshot::channel::<(u64, Option<u64>, u64)>();
    let slots = Once::new(Some((client_has_it_rx, report_tx)));
    let handler_returned_at = Arc::new(AtomicU64::new(0));

    let app = {
        let (seq, slots, returned) = (seq.clone(), slots.clone(), handler_returned_at.clone());
        Router::new()
            .route(
                "/save",
                get(move || async move {
                    let (client_has_it, report) = slots.take();
                    let s = seq.clone();
                    velocity_policy_runtime::defer("notify_followers", async move {
                        let started_at = s.next();
                        let signal = tokio::time::timeout(SAFETY, client_has_it).await;
                        let client_done_at = signal.ok().and_then(Result::ok);
                        let _ = report.send((started_at, client_done_at, s.next()));
                    });
                    returned.store(seq.next(), Ordering::SeqCst);
                    "saved"
                }),
            )
            .layer(AfterResponseLayer::with_platform(platform.clone()))
    };
    let server = Server::start(app).await;
    let client = client();

    let (status, body) = fetch(&client, &server.url("/save")).await;
    let client_done_at = seq.next();
    assert_eq!((status, body.as_str()), (200, "saved"));
    client_has_it_tx.send(client_done_at).unwrap();

    let (started_at, seen_by_work, finished_at) = tokio::time::timeout(SAFETY, report_rx)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        seen_by_work,
        Some(client_done_at),
        "the deferred work was still running when the client had the complete response"
    );
    assert!(started_at > handler_returned_at.load(Ordering::SeqCst));
    assert!(finished_at > client_done_at);
    eprintln!(
        "handler returned #{}, deferred started #{started_at}, client had it all #{client_done_at}, deferred finished #{finished_at}",
        handler_returned_at.load(Ordering::SeqCst)
    );
    server.stop().await;
    assert_eq!(platform.shutdown(SAFETY).await.abandoned, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_and_panicking_deferred_work_is_logged_and_never_reaches_a_response() {
    let logs = global_capture();
    let platform = ImmediatePlatform::new();
    let app = Router::new()
        .route(
            "/fail",
            get(|| async {
                velocity_policy_runtime::defer("search_index_f7", async {
                    Err::<(), _>("search index unavailable")
                });
                "saved (fail)"
            }),
        )
        .route(
            "/panic",
            get(|| async {
                velocity_policy_runtime::defer("activity_feed_p7", async {
                    let events: Vec<u32> = Vec::new();
                    let _ = events[3];
                });
                "saved (panic)"
            }),
        )
        .route("/ok", get(|| async { "fine" }))
        .layer(AfterResponseLayer::with_platform(platform.clone()));
    let server = Server::start(app).await;
    let client = client();

    for _ in 0..3 {
        let request = axum::http::Request::get(server.url("/fail"))
            .header("x-request-id", "req-f7")
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        let response = client.request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"saved (fail)");
        assert_eq!(
            fetch(&client, &server.url("/panic")).await,
            (200, "saved (panic)".to_owned())
        );
        assert_eq!(
            fetch(&client, &server.url("/ok")).await,
            (200, "fine".to_owned())
        );
    }
    platform.settled().await;
    assert_eq!(platform.handed_over(), 6);

    // The server kept serving, on the same connections.
    assert_eq!(
        fetch(&client, &server.url("/ok")).await,
        (200, "fine".to_owned())
    );
    server.stop().await;

    let failed = logs.lines_with(&[
        "WARN",
        "kind=\"task_failed\"",
        "name=\"search_index_f7\"",
        "class=\"deferred\"",
        "request=req-f7",
        "search index unavailable",
    ]);
    assert_eq!(failed.len(), 3, "{}", logs.text());
    let panicked = logs.lines_with(&[
        "ERROR",
        "kind=\"task_panicked\"",
        "name=\"activity_feed_p7\"",
        "class=\"deferred\"",
        "index out of bounds",
    ]);
    assert_eq!(panicked.len(), 3, "{}", logs.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_requests_each_deferring_one_task_run_exactly_ten_thousand_tasks() {
    const REQUESTS: u64 = 10_000;
    const CONNECTIONS: u64 = 32;
    let platform = ContainerPlatform::new();
    let ran = Arc::new(AtomicU64::new(0));
    let app = {
        let ran = ran.clone();
        Router::new()
            .route(
                "/save",
                get(move || {
                    let ran = ran.clone();
                    async move {
                        velocity_policy_runtime::defer("count_save", async move {
                            ran.fetch_add(1, Ordering::Relaxed);
                        });
                        "saved"
                    }
                }),
            )
            .layer(AfterResponseLayer::with_platform(platform.clone()))
    };
    let server = Server::start(app).await;
    let client = client();
    let url = server.url("/save");

    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..CONNECTIONS {
        let (client, url) = (client.clone(), url.clone());
        workers.spawn(async move {
            let mut saved = 0u64;
            for _ in (worker..REQUESTS).step_by(CONNECTIONS as usize) {
                let (status, body) = fetch(&client, &url).await;
                assert_eq!((status, body.as_str()), (200, "saved"));
                saved += 1;
            }
            saved
        });
    }
    let mut responses = 0;
    while let Some(saved) = workers.join_next().await {
        responses += saved.unwrap();
    }
    let served_in = started.elapsed();
    assert_eq!(responses, REQUESTS);

    server.stop().await;
    let report = platform.shutdown(SAFETY).await;
    assert_eq!(report.abandoned, 0);
    assert_eq!(ran.load(Ordering::Relaxed), REQUESTS);
    eprintln!(
        "{REQUESTS} requests over {CONNECTIONS} connections in {served_in:?}; {} tasks ran ({} still in flight at the drain)",
        ran.load(Ordering::Relaxed),
        report.finished
    );
}

/// Serves `/quick` (deferring work that waits for `quick`) and `/stuck` (deferring work that
/// waits for `stuck`), then stops the server gracefully: the responses are all finished and
/// every deferred task is in flight.
async fn in_flight_after_graceful_stop(
    platform: &ContainerPlatform,
    quick_requests: usize,
    stuck_requests: usize,
    quick: &watch::Sender<bool>,
    stuck: &watch::Sender<bool>,
) {
    let gated = |gate: watch::Receiver<bool>, name: &'static str| {
        get(move || {
            let mut gate = gate.clone();
            async move {
                velocity_policy_runtime::defer(name, async move {
                    let _ = gate.wait_for(|open| *open).await;
                });
                "saved"
            }
        })
    };
    let app = Router::new()
        .route("/quick", gated(quick.subscribe(), "quick_task"))
        .route("/stuck", gated(stuck.subscribe(), "stuck_task"))
        .layer(AfterResponseLayer::with_platform(platform.clone()));
    let server = Server::start(app).await;
    let client = client();
    let mut requests = tokio::task::JoinSet::new();
    for i in 0..quick_requests + stuck_requests {
        let path = if i < quick_requests {
            "/quick"
        } else {
            "/stuck"
        };
        let (client, url) = (client.clone(), server.url(path));
        requests.spawn(async move { fetch(&client, &url).await });
    }
    while let Some(response) = requests.join_next().await {
        assert_eq!(response.unwrap(), (200, "saved".to_owned()));
    }
    server.stop().await;
    assert_eq!(platform.in_flight(), quick_requests + stuck_requests);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_drains_100_deferred_tasks_or_counts_the_abandoned_exactly() {
    let logs = global_capture();
    let (quick, _) = watch::channel(false);
    let (stuck, _) = watch::channel(false);

    // All 100 finish inside the drain deadline.
    let platform = ContainerPlatform::new();
    in_flight_after_graceful_stop(&platform, 100, 0, &quick, &stuck).await;
    let (report, ()) = tokio::join!(platform.shutdown(SAFETY), async {
        quick.send_replace(true);
    });
    assert_eq!((report.finished, report.abandoned), (100, 0));

    // A drain deadline too short for 60 of them: exactly those are abandoned, each logged.
    let (quick, _) = watch::channel(false);
    let platform = ContainerPlatform::new();
    in_flight_after_graceful_stop(&platform, 40, 60, &quick, &stuck).await;
    let started = Instant::now();
    let (report, ()) = tokio::join!(platform.shutdown(Duration::from_millis(500)), async {
        quick.send_replace(true);
    });
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!((report.finished, report.abandoned), (40, 60));
    let abandoned = logs.lines_with(&[
        "kind=\"task_abandoned\"",
        "name=\"stuck_task\"",
        "the drain deadline passed",
    ]);
    assert_eq!(abandoned.len(), 60, "{}", logs.text());
    let drained = logs.lines_with(&["kind=\"drain\"", "in_flight=100", "abandoned=60"]);
    assert_eq!(drained.len(), 1, "{}", logs.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_client_goes_away_mid_stream_the_deferred_work_still_runs() {
    let platform = ContainerPlatform::new();
    let ended = Arc::new(AtomicBool::new(false));
    let (started_tx, started_rx) = oneshot::channel::<()>();
    let started_tx = Once::new(Some(started_tx));
    let body_sender: Arc<Once<mpsc::Sender<Bytes>>> = Once::new(None);
    let app = {
        let (ended, started_tx, body_sender) =
            (ended.clone(), started_tx.clone(), body_sender.clone());
        Router::new()
            .route(
                "/export",
                get(move |after: AfterResponse| async move {
                    let started_tx = started_tx.take();
                    after.defer("record_export", async move {
                        let _ = started_tx.send(());
                    });
                    let ended = ended.clone();
                    let (tx, body) = ChannelBody::new(move || ended.store(true, Ordering::SeqCst));
                    body_sender.put(tx);
                    Response::new(Body::new(body))
                }),
            )
            .layer(AfterResponseLayer::with_platform(platform.clone()))
    };
    let server = Server::start(app).await;
    let client = client();
    let response = client
        .get(server.url("/export").parse().unwrap())
        .await
        .unwrap();
    let chunks = body_sender.take();
    chunks.send(Bytes::from_static(b"row 1\n")).await.unwrap();
    let mut body = response.into_body();
    let _ = body.frame().await.unwrap().unwrap();
    // The client goes away with the response half read.
    drop(body);
    drop(client);

    // The server notices when it next writes; keep the stream going until it does.
    let mut started_rx = started_rx;
    let noticed = tokio::time::timeout(SAFETY, async {
        loop {
            tokio::select! {
                started = &mut started_rx => return started,
                () = tokio::time::sleep(Duration::from_millis(10)) => {
                    let _ = chunks.try_send(Bytes::from_static(b"row n\n"));
                }
            }
        }
    })
    .await;
    assert!(
        noticed.unwrap().is_ok(),
        "the deferred work ran after the client left"
    );
    assert!(
        !ended.load(Ordering::SeqCst),
        "released by the body's drop, not its end"
    );
    drop(chunks);
    server.stop().await;
    assert_eq!(platform.shutdown(SAFETY).await.abandoned, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extractor_without_the_layer_is_a_500_that_names_the_layer() {
    let app = Router::new().route(
        "/save",
        get(|after: AfterResponse| async move {
            after.defer("never", async {});
            "saved"
        }),
    );
    let server = Server::start(app).await;
    let (status, body) = fetch(&client(), &server.url("/save")).await;
    assert_eq!(status, 500);
    assert!(body.contains("`AfterResponseLayer`"), "{body}");
    assert!(body.contains(".layer(AfterResponseLayer::new())"), "{body}");
    server.stop().await;
}
