//! The request's deadline end to end, between real servers on loopback: one budget per request
//! shared by sibling operations, tightened by the caller's header, carried on to the next
//! service, and refused before any work below the minimum. Feature `http`.
#![cfg(feature = "http")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::routing::get;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use velocity_policy_runtime::layer::{DeadlineLayer, PropagateDeadlineLayer};
use velocity_policy_runtime::{Deadline, RefusalKind};
use velocity_policy_testkit::http::{Server, client, get as fetch};

/// What B saw: the deadline's budget in ms, and the headers it was sent.
async fn report(deadline: Deadline, headers: HeaderMap) -> String {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_owned()
    };
    format!(
        "{} {} {}",
        deadline.budget().as_millis(),
        header("grpc-timeout"),
        header("x-deadline-ms")
    )
}

#[derive(Clone, Default)]
struct Ran(Arc<AtomicU32>);

/// Service B: a 5 s budget, a 100 ms minimum; counts the handler's runs.
fn service_b(ran: Ran) -> Router {
    Router::new()
        .route(
            "/work",
            get(
                |State(ran): State<Ran>, deadline: Deadline, headers: HeaderMap| async move {
                    ran.0.fetch_add(1, Ordering::SeqCst);
                    report(deadline, headers).await
                },
            ),
        )
        .with_state(ran)
        .layer(DeadlineLayer::new(Duration::from_secs(5)).min_budget(Duration::from_millis(100)))
}

async fn request(url: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
    let mut builder = Request::get(url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = client()
        .request(builder.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

fn budget_ms(body: &str) -> u64 {
    body.split(' ').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incoming_header_tightens_the_budget_and_never_widens_it() {
    let ran = Ran::default();
    let b = Server::start(service_b(ran.clone())).await;
    let url = b.url("/work");

    let (_, _, body) = request(&url, &[]).await;
    assert_eq!(budget_ms(&body), 5000, "{body}");
    let (_, _, body) = request(&url, &[("grpc-timeout", "200m")]).await;
    assert_eq!(budget_ms(&body), 200, "{body}");
    let (_, _, body) = request(&url, &[("x-deadline-ms", "150")]).await;
    assert_eq!(budget_ms(&body), 150, "{body}");
    let (_, _, body) = request(&url, &[("grpc-timeout", "1S"), ("x-deadline-ms", "700")]).await;
    assert_eq!(budget_ms(&body), 700, "the smaller of the two: {body}");
    let (_, _, body) = request(&url, &[("grpc-timeout", "10S")]).await;
    assert_eq!(budget_ms(&body), 5000, "a caller cannot widen it: {body}");
    assert_eq!(ran.0.load(Ordering::SeqCst), 5);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_headers_are_ignored_and_the_configured_budget_applies() {
    let ran = Ran::default();
    let b = Server::start(service_b(ran.clone())).await;
    let url = b.url("/work");
    for (name, value) in [
        ("grpc-timeout", "-1S"),
        ("grpc-timeout", "123456789m"),
        ("grpc-timeout", "10x"),
        ("grpc-timeout", ""),
        ("x-deadline-ms", ""),
        ("x-deadline-ms", "-1"),
        ("x-deadline-ms", "123456789"),
        ("x-deadline-ms", "1.5"),
    ] {
        let (status, _, body) = request(&url, &[(name, value)]).await;
        assert_eq!(status, StatusCode::OK, "{name}: {value:?}");
        assert_eq!(budget_ms(&body), 5000, "{name}: {value:?} -> {body}");
    }
    assert_eq!(ran.0.load(Ordering::SeqCst), 8);
    b.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_bad_header_is_a_debug_event_naming_it() {
    let (captured, _guard) = common::capture();
    let svc = DeadlineLayer::new(Duration::from_secs(5)).layer(tower::service_fn(
        |_: Request<Body>| async {
            let budget = Deadline::current().unwrap().budget();
            Ok::<_, Infallible>(axum::http::Response::new(budget.as_millis().to_string()))
        },
    ));
    let request = Request::get("/")
        .header("grpc-timeout", "-1S")
        .body(Body::empty())
        .unwrap();
    let response = svc.oneshot(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"5000");
    let lines = captured.lines_with(&["grpc-timeout", "unparsable_header"]);
    assert_eq!(lines.len(), 1, "{}", captured.text());
    assert!(lines[0].contains("DEBUG"), "{}", lines[0]);
}

/// The layer's events carry the stable fields of every event (`mechanism`, `name`, `kind`, a
/// short `reason`), as the mechanisms' do.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_layer_events_carry_mechanism_name_kind_and_reason() {
    let (captured, _guard) = common::capture();
    let svc = DeadlineLayer::new(Duration::from_millis(100)).layer(tower::service_fn(
        |_: Request<Body>| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok::<_, Infallible>(axum::http::Response::new(Body::empty()))
        },
    ));
    let request = Request::get("/")
        .header("x-deadline-ms", "soon")
        .body(Body::empty())
        .unwrap();
    let response = svc.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    for (kind, reason) in [
        ("deadline_header_ignored", "unparsable_header"),
        ("deadline_exceeded", "expired"),
    ] {
        let lines = captured.lines_with(&[
            "mechanism=\"deadline\"",
            "name=\"request\"",
            &format!("kind=\"{kind}\""),
            &format!("reason=\"{reason}\""),
        ]);
        assert_eq!(lines.len(), 1, "{kind}: {}", captured.text());
    }
}

/// Service A: a 300 ms budget; calls B through hyper's client with the propagation layer and
/// answers with what B answered.
fn service_a(b_url: String, budget: Duration) -> Router {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<axum::body::Bytes>>();
    let client = ServiceBuilder::new()
        .layer(PropagateDeadlineLayer::new())
        .service(client);
    Router::new()
        .route(
            "/",
            get(move || {
                let mut client = client.clone();
                let url = b_url.clone();
                async move {
                    let request = Request::get(url).body(Empty::new()).unwrap();
                    let response = client.ready().await.unwrap().call(request).await.unwrap();
                    let status = response.status();
                    let refusal = response
                        .headers()
                        .get("x-refusal")
                        .map(|v| v.to_str().unwrap().to_owned())
                        .unwrap_or_default();
                    let body = response.into_body().collect().await.unwrap().to_bytes();
                    format!(
                        "{} {refusal} {}",
                        status.as_u16(),
                        String::from_utf8_lossy(&body)
                    )
                }
            }),
        )
        .layer(DeadlineLayer::new(budget))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_b_with_300_ms_left_and_b_sees_at_most_that() {
    let ran = Ran::default();
    let b = Server::start(service_b(ran.clone())).await;
    let a = Server::start(service_a(b.url("/work"), Duration::from_millis(300))).await;

    let (status, body) = fetch(&client(), &a.url("/")).await;
    assert_eq!(status, 200);
    // "200 <no refusal> <B's budget> <grpc-timeout> <x-deadline-ms>"
    let fields: Vec<&str> = body.split(' ').collect();
    assert_eq!(fields[0], "200", "{body}");
    let b_budget: u64 = fields[2].parse().unwrap();
    assert!(
        (1..=300).contains(&b_budget),
        "B's budget {b_budget} ms: {body}"
    );
    let grpc = velocity_policy_runtime::deadline::parse_grpc_timeout(fields[3]).unwrap();
    assert!(grpc <= Duration::from_millis(300), "{body}");
    let ms: u64 = fields[4].parse().unwrap();
    assert!(ms <= 300, "{body}");
    assert_eq!(
        Duration::from_millis(b_budget),
        grpc.min(Duration::from_millis(ms))
    );
    assert_eq!(ran.0.load(Ordering::SeqCst), 1);
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_refuses_below_its_minimum_without_running_the_handler() {
    let ran = Ran::default();
    let b = Server::start(service_b(ran.clone())).await;
    // A has 50 ms; B's minimum is 100 ms.
    let a = Server::start(service_a(b.url("/work"), Duration::from_millis(50))).await;

    let (status, body) = fetch(&client(), &a.url("/")).await;
    assert_eq!(status, 200);
    assert_eq!(body.trim_end(), "504 insufficient_budget", "{body}");
    assert_eq!(ran.0.load(Ordering::SeqCst), 0, "B's handler never ran");

    // Straight from a caller too, and in gRPC's terms for a gRPC request.
    let (status, headers, _) = request(&b.url("/work"), &[("x-deadline-ms", "99")]).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(headers["x-refusal"], "insufficient_budget");
    let (status, headers, _) = request(
        &b.url("/work"),
        &[
            ("grpc-timeout", "10m"),
            ("content-type", "application/grpc"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["grpc-status"], "4", "DEADLINE_EXCEEDED");
    assert_eq!(
        headers["x-refusal"], "insufficient_budget",
        "why, in the metadata"
    );
    assert_eq!(ran.0.load(Ordering::SeqCst), 0);
    a.stop().await;
    b.stop().await;
}

/// An unannotated handler calling two operations: each takes a child of the request's
/// deadline (`Deadline::for_operation`, what `#[critical]` expands to), so they share one budget.
async fn siblings() -> String {
    let first =
        Deadline::for_operation("first", Duration::from_secs(10), Duration::from_millis(10))
            .unwrap();
    // The first uses most of the request's 300 ms.
    let _ = first
        .run(tokio::time::sleep(Duration::from_millis(250)))
        .await;
    let second = Deadline::for_operation(
        "second",
        Duration::from_secs(10),
        Duration::from_millis(100),
    );
    match second {
        Ok(d) => format!(
            "{} ran {}",
            first.budget().as_millis(),
            d.budget().as_millis()
        ),
        Err(refusal) => format!("{} refused {}", first.budget().as_millis(), refusal.kind()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibling_operations_share_one_request_budget() {
    let app = Router::new()
        .route("/", get(siblings))
        .layer(DeadlineLayer::new(Duration::from_millis(300)));
    let server = Server::start(app).await;
    let (status, body) = fetch(&client(), &server.url("/")).await;
    assert_eq!(status, 200);
    let fields: Vec<&str> = body.split(' ').collect();
    let first: u64 = fields[0].parse().unwrap();
    assert!(
        first <= 300,
        "the first got a child of the request, not 10 s: {body}"
    );
    assert_eq!(
        fields[1..],
        ["refused", RefusalKind::InsufficientBudget.as_str()],
        "{body}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_layer_stops_waiting_at_the_deadline_and_scopes_the_body() {
    let svc = DeadlineLayer::new(Duration::from_millis(100)).layer(tower::service_fn(
        |_: Request<Body>| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok::<_, Infallible>(axum::http::Response::new(Body::empty()))
        },
    ));
    let response = svc
        .oneshot(Request::get("/").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        response.headers()["x-deadline-exceeded"],
        "deadline_exceeded"
    );

    // The body is polled with the request's deadline in scope.
    let svc = DeadlineLayer::new(Duration::from_millis(100)).layer(tower::service_fn(
        |_: Request<Body>| async {
            let stream = futures_stream();
            Ok::<_, Infallible>(axum::http::Response::new(stream))
        },
    ));
    let response = svc
        .oneshot(Request::get("/").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"100");
}

/// A body whose one frame says the budget of the deadline in scope when it is polled.
fn futures_stream() -> ScopedProbe {
    ScopedProbe(false)
}

struct ScopedProbe(bool);

impl http_body::Body for ScopedProbe {
    type Data = axum::body::Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<axum::body::Bytes>, Infallible>>> {
        if self.0 {
            return std::task::Poll::Ready(None);
        }
        self.0 = true;
        let text =
            Deadline::current().map_or("none".to_owned(), |d| d.budget().as_millis().to_string());
        std::task::Poll::Ready(Some(Ok(http_body::Frame::data(axum::body::Bytes::from(
            text,
        )))))
    }
}
