//! The fake dependency as a real HTTP server on loopback, called by a real client.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests: an unexpected outcome fails the test"
)]

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{Method, Request, StatusCode};
use axum::response::IntoResponse;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use velocity_policy_testkit::fake::http::{CallerCounts, FakeHttp, FakeHttpDependency};
use velocity_policy_testkit::fake::{Behaviour, FakeDependency, Phase};

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Sends one request: the status, the `retry-after` header, and the body.
async fn send(
    http: &HttpClient,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: &'static str,
) -> (StatusCode, Option<String>, String) {
    let mut request = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = http
        .request(request.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        retry_after,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

async fn get(http: &HttpClient, url: &str) -> (StatusCode, Option<String>, String) {
    send(http, Method::GET, url, &[], "").await
}

#[tokio::test]
async fn a_rate_limited_server_answers_429_with_retry_after_in_whole_seconds() {
    let fake = FakeHttpDependency::start("search").await;
    fake.dependency()
        .set(Behaviour::rate_limited(Duration::from_millis(1500)));
    let (status, retry_after, _) = get(&client(), &fake.url("/q")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(retry_after.as_deref(), Some("2"), "1.5 s rounded up");
    assert_eq!(fake.dependency().counts().rate_limited, 1);
    fake.stop().await;
}

#[tokio::test]
async fn a_down_server_answers_503_and_a_healthy_one_200() {
    let fake = FakeHttpDependency::start("search").await;
    let http = client();
    assert_eq!(get(&http, &fake.url("/q")).await.0, StatusCode::OK);
    fake.dependency().set(Behaviour::down());
    assert_eq!(
        get(&http, &fake.url("/q")).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let counts = fake.dependency().counts();
    assert_eq!((counts.calls, counts.ok, counts.failed), (2, 1, 1));
    fake.stop().await;
}

#[tokio::test]
async fn a_slow_server_takes_its_delay() {
    let fake = FakeHttpDependency::start("search").await;
    let http = client();
    // A first request opens the connection, so the timed one measures the answer only.
    get(&http, &fake.url("/warm")).await;
    fake.dependency()
        .set(Behaviour::slow(Duration::from_millis(300)));
    let start = Instant::now();
    assert_eq!(get(&http, &fake.url("/q")).await.0, StatusCode::OK);
    let took = start.elapsed();
    assert!(
        (Duration::from_millis(300)..Duration::from_secs(2)).contains(&took),
        "{took:?}"
    );
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrency_counts_the_parallel_callers() {
    let fake = FakeHttpDependency::start("search").await;
    fake.dependency()
        .set(Behaviour::slow(Duration::from_millis(400)));
    let http = client();
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let (http, url) = (http.clone(), fake.url("/q"));
            tokio::spawn(async move { get(&http, &url).await.0 })
        })
        .collect();
    for caller in callers {
        assert_eq!(caller.await.unwrap(), StatusCode::OK);
    }
    let counts = fake.dependency().counts();
    assert_eq!(
        (counts.calls, counts.max_in_flight, counts.in_flight),
        (8, 8, 0)
    );
    fake.stop().await;
}

#[tokio::test]
async fn a_flaky_server_fails_its_share_and_the_same_calls_every_run() {
    let run = || async {
        let fake = FakeHttpDependency::start("search").await;
        fake.dependency().set(Behaviour::flaky(0.2, 42));
        let http = client();
        let mut failed = Vec::new();
        for n in 0..400 {
            if get(&http, &fake.url("/q")).await.0 == StatusCode::SERVICE_UNAVAILABLE {
                failed.push(n);
            }
        }
        fake.stop().await;
        failed
    };
    let first = run().await;
    let share = first.len() as f64 / 400.0;
    assert!((0.15..=0.25).contains(&share), "{share}");
    assert_eq!(run().await, first);
}

#[tokio::test]
async fn a_script_advances_through_its_phases_over_http() {
    let fake = FakeHttpDependency::start("search").await;
    fake.dependency().set(Behaviour::script([
        Phase::calls(2, Behaviour::healthy()),
        Phase::calls(1, Behaviour::down()),
        Phase::forever(Behaviour::rate_limited(Duration::from_secs(3))),
    ]));
    let http = client();
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(get(&http, &fake.url("/q")).await.0.as_u16());
    }
    assert_eq!(statuses, [200, 200, 503, 429, 429]);
    fake.stop().await;
}

#[tokio::test]
async fn it_counts_per_caller_and_records_propagated_deadlines() {
    let fake = FakeHttpDependency::start("search").await;
    let http = client();
    let url = fake.url("/q");
    send(
        &http,
        Method::GET,
        &url,
        &[("x-caller", "a"), ("x-deadline-ms", "300")],
        "",
    )
    .await;
    send(
        &http,
        Method::GET,
        &url,
        &[("x-caller", "a"), ("grpc-timeout", "120m")],
        "",
    )
    .await;
    fake.dependency().set(Behaviour::down());
    send(&http, Method::GET, &url, &[("x-caller", "b")], "").await;
    let callers = fake.callers();
    assert_eq!(
        callers["a"],
        CallerCounts {
            received: 2,
            ok: 2,
            ..CallerCounts::default()
        }
    );
    assert_eq!(callers["b"].failed, 1);
    let deadlines = fake.take_deadlines();
    assert_eq!((deadlines.with_budget, deadlines.without_budget), (2, 1));
    assert_eq!(deadlines.min, Duration::from_millis(120));
    assert_eq!(deadlines.max, Duration::from_millis(300));
    assert_eq!(fake.deadlines().with_budget, 0, "taken, and started over");
    fake.stop().await;
}

#[tokio::test]
async fn post_mode_switches_it_from_outside_and_refuses_nonsense() {
    let fake = FakeHttpDependency::start("search").await;
    let http = client();
    let switch = fake.url("/_mode");
    let (status, _, said) = send(&http, Method::POST, &switch, &[], "429 5s").await;
    assert_eq!(
        (status, said.as_str()),
        (StatusCode::OK, "search: 429, Retry-After: 5\n")
    );
    let (status, retry_after, _) = get(&http, &fake.url("/q")).await;
    assert_eq!(
        (status, retry_after.as_deref()),
        (StatusCode::TOO_MANY_REQUESTS, Some("5"))
    );
    let (status, _, said) = send(&http, Method::POST, &switch, &[], "sideways").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(said.contains("unknown behaviour `sideways`"), "{said}");
    assert_eq!(
        fake.dependency().counts().calls,
        1,
        "switching is not a call"
    );
    fake.stop().await;
}

#[tokio::test]
async fn a_mounted_app_answers_with_its_own_responder_and_mode_parser() {
    let fake = FakeHttp::new(FakeDependency::new("sessions"))
        .respond_with(|_, uri| {
            let status = if uri.path() == "/missing" { 404 } else { 200 };
            (StatusCode::from_u16(status).unwrap(), "answered").into_response()
        })
        .parse_mode_with(|text| match text {
            "off" => Ok(Behaviour::down()),
            _ => Err("say `off`".to_owned()),
        });
    let served = fake.clone().start().await;
    let http = client();
    assert_eq!(
        get(&http, &served.url("/missing")).await.0,
        StatusCode::NOT_FOUND
    );
    let (status, _, _) = send(&http, Method::POST, &served.url("/_mode"), &[], "off").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        get(&http, &served.url("/x")).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // The 404 is an answer: counted as ok, on the clone too.
    assert_eq!(fake.callers()["unknown"].ok, 1);
    assert_eq!(fake.dependency().counts().failed, 1);
    served.stop().await;
}
