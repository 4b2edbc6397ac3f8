//! Outgoing calls against a real axum server on loopback (issue 43, point 2): hyper-util's
//! client through the tower layers and reqwest through `reqwest-middleware` carry the deadline
//! (what is left minus the reserve), and a 429 or 503 with `Retry-After` trips the named
//! breaker for exactly that long, after which calls are refused without a request. Feature
//! `http` (hyper-util), `reqwest` (reqwest).
//!
//! Real sockets, so the real clock: the budgets asserted are bounds the code guarantees (never
//! more than was left), with generous slack on the other side; no test waits for time to pass.
#![cfg(feature = "http")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header::RETRY_AFTER};
use axum::routing::get;
use tokio::time::Instant;
use velocity_policy_runtime::breaker::BreakerState;
use velocity_policy_runtime::{Breaker, Deadline, OpenCause, RefusalKind, ResilienceError};
use velocity_policy_testkit::http::Server;

/// What the test keeps of its budget for itself.
const RESERVE: Duration = Duration::from_millis(50);
/// The budget the calls run under.
const BUDGET: Duration = Duration::from_secs(2);

/// Requests that reached the dependency, per route.
#[derive(Clone, Default)]
struct Hits(Arc<[AtomicU32; 2]>);

/// The dependency: `/budget` says what it was told; `/limited` answers 429 with
/// `Retry-After: 2`; `/maintenance` 503 with `Retry-After` an HTTP date 3 s from now.
fn dependency(hits: Hits) -> Router {
    let (limited, maintenance) = (hits.clone(), hits);
    Router::new()
        .route(
            "/budget",
            get(|headers: HeaderMap| async move {
                let header = |name: &str| {
                    headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-")
                        .to_owned()
                };
                format!("{} {}", header("x-deadline-ms"), header("grpc-timeout"))
            }),
        )
        .route(
            "/limited",
            get(move || async move {
                limited.0[0].fetch_add(1, Ordering::SeqCst);
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [(RETRY_AFTER, "2")],
                    "slow down",
                )
            }),
        )
        .route(
            "/maintenance",
            get(move || async move {
                maintenance.0[1].fetch_add(1, Ordering::SeqCst);
                let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3));
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [(RETRY_AFTER, date)],
                    "maintenance",
                )
            }),
        )
}

/// The budget a `/budget` body says the dependency was told, in ms, with the `grpc-timeout`.
fn told(body: &str) -> (u64, String) {
    let (ms, grpc) = body.split_once(' ').unwrap();
    (
        ms.parse().unwrap_or_else(|_| panic!("no budget: {body}")),
        grpc.to_owned(),
    )
}

/// The budget was carried: what was left minus the reserve, never more, and not much less.
fn assert_carried(body: &str) {
    let (ms, grpc) = told(body);
    let most = (BUDGET - RESERVE).as_millis() as u64;
    assert!(ms <= most && ms + 500 >= most, "{body}");
    assert_eq!(
        grpc,
        format!("{ms}m"),
        "the same budget in grpc-timeout: {body}"
    );
}

/// The breaker is open for `retry_after` from about now (never longer), tripped by the answer.
/// A `Retry-After` in seconds is exact; an HTTP date has whole seconds, so up to one less.
fn assert_tripped(breaker: &Breaker, retry_after: Duration, status: &str) {
    let resolution = if status == "429" {
        Duration::ZERO
    } else {
        Duration::from_secs(1)
    };
    assert_eq!(breaker.state(), BreakerState::Open);
    let left = breaker.open_until().unwrap() - Instant::now();
    assert!(left <= retry_after, "{left:?}");
    assert!(
        left + resolution + Duration::from_millis(500) >= retry_after,
        "{left:?}"
    );
    match breaker.snapshot().last_cause {
        Some(OpenCause::Tripped {
            retry_after: asked,
            reason,
        }) => {
            assert!(
                asked <= retry_after && asked + resolution >= retry_after,
                "{asked:?}"
            );
            assert!(reason.starts_with(status), "{reason}");
        }
        other => panic!("expected a trip, got {other:?}"),
    }
}

fn is_breaker_open(error: &(dyn std::error::Error + 'static)) -> bool {
    error
        .downcast_ref::<ResilienceError>()
        .is_some_and(|refusal| refusal.kind() == RefusalKind::BreakerOpen)
}

/// The answers that trip: the path, the status, the wait it asks for, its hit counter.
const TRIPS: [(&str, &str, Duration, usize); 2] = [
    ("/limited", "429", Duration::from_secs(2), 0),
    ("/maintenance", "503", Duration::from_secs(3), 1),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyper_util_carries_the_deadline_and_a_retry_after_trips_the_breaker() {
    use http_body_util::{BodyExt, Empty};
    use tower::{Service, ServiceBuilder, ServiceExt};
    use velocity_policy_runtime::client::TripLayer;
    use velocity_policy_runtime::layer::{BreakerLayer, PropagateDeadlineLayer};

    let hits = Hits::default();
    let server = Server::start(dependency(hits.clone())).await;
    let through = |breaker: &Breaker| {
        ServiceBuilder::new()
            .layer(TripLayer::new(breaker.clone()))
            .layer(BreakerLayer::new(breaker.clone()))
            .layer(PropagateDeadlineLayer::new().reserve(RESERVE))
            .service(velocity_policy_testkit::http::client())
    };
    let get = |path: &str| {
        http::Request::get(server.url(path))
            .body(Empty::new())
            .unwrap()
    };

    let mut client = through(&Breaker::builder("hyper_budget").build());
    Deadline::after(BUDGET)
        .scope(async {
            let response = client
                .ready()
                .await
                .unwrap()
                .call(get("/budget"))
                .await
                .unwrap();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_carried(&String::from_utf8_lossy(&body));
        })
        .await;

    for (path, status, wait, route) in TRIPS {
        let breaker = Breaker::builder(format!("hyper{path}")).build();
        let mut client = through(&breaker);
        let response = client.ready().await.unwrap().call(get(path)).await.unwrap();
        assert_eq!(response.status().as_str(), status);
        assert_tripped(&breaker, wait, status);
        // Refused at once: the dependency hears nothing more.
        let error = client
            .ready()
            .await
            .unwrap()
            .call(get(path))
            .await
            .unwrap_err();
        assert!(is_breaker_open(&*error), "{error}");
        assert_eq!(hits.0[route].load(Ordering::SeqCst), 1, "{path}");
    }
    server.stop().await;
}

#[cfg(feature = "reqwest")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reqwest_carries_the_deadline_and_a_retry_after_trips_the_breaker() {
    use velocity_policy_runtime::client::reqwest::{BreakerMiddleware, DeadlineMiddleware};

    let hits = Hits::default();
    let server = Server::start(dependency(hits.clone())).await;
    let through = |breaker: &Breaker| {
        reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
            .with(DeadlineMiddleware::new().reserve(RESERVE))
            .with(BreakerMiddleware::new(breaker.clone()))
            .build()
    };

    let client = through(&Breaker::builder("reqwest_budget").build());
    Deadline::after(BUDGET)
        .scope(async {
            let response = client.get(server.url("/budget")).send().await.unwrap();
            assert_carried(&response.text().await.unwrap());
        })
        .await;
    // Outside any deadline nothing is stamped.
    let body = client.get(server.url("/budget")).send().await.unwrap();
    assert_eq!(body.text().await.unwrap(), "- -");

    for (path, status, wait, route) in TRIPS {
        let breaker = Breaker::builder(format!("reqwest{path}")).build();
        let client = through(&breaker);
        let response = client.get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status().as_str(), status);
        assert_tripped(&breaker, wait, status);
        let error = client.get(server.url(path)).send().await.unwrap_err();
        match &error {
            reqwest_middleware::Error::Middleware(error) => {
                assert!(is_breaker_open(error.as_ref()), "{error}");
            }
            other => panic!("expected the breaker's refusal, got {other}"),
        }
        assert_eq!(hits.0[route].load(Ordering::SeqCst), 1, "{path}");
    }
    server.stop().await;
}

#[cfg(feature = "reqwest")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reqwest_never_waits_past_the_deadline() {
    use velocity_policy_runtime::client::reqwest::DeadlineMiddleware;

    // A dependency that never answers.
    let server =
        Server::start(Router::new().route("/stuck", get(std::future::pending::<&'static str>)))
            .await;
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(DeadlineMiddleware::new())
        .build();
    let started = Instant::now();
    let error = Deadline::after(Duration::from_millis(200))
        .scope(client.get(server.url("/stuck")).send())
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Not stopped: the graceful stop would wait for the handler that never answers; the
    // test's runtime ends it.
    drop(server);
}
