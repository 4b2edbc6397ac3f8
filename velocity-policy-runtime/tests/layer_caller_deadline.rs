//! Whose deadline headers a `DeadlineLayer` believes, and what a breaker layer makes of an
//! expiry under the caller's budget, between real servers on loopback. Feature `http`.
#![cfg(feature = "http")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{HeaderName, HeaderValue, Request, StatusCode};
use axum::routing::get;
use http_body_util::{BodyExt, Empty};
use tower::ServiceBuilder;
use velocity_policy_runtime::breaker::BreakerState;
use velocity_policy_runtime::layer::deadline::HeaderTrust;
use velocity_policy_runtime::layer::{BoxError, BreakerLayer, DeadlineLayer};
use velocity_policy_runtime::{Breaker, Deadline};
use velocity_policy_testkit::http::{Server, client};

async fn request(url: &str, headers: &[(&str, &str)]) -> (StatusCode, String) {
    let mut builder = Request::get(url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = client()
        .request(builder.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A route answering the budget its deadline was granted, in ms, and whose it is.
fn budget_route(layer: DeadlineLayer) -> Router {
    Router::new()
        .route(
            "/budget",
            get(|deadline: Deadline| async move {
                format!(
                    "{} {}",
                    deadline.budget().as_millis(),
                    if deadline.is_callers() {
                        "callers"
                    } else {
                        "own"
                    }
                )
            }),
        )
        .layer(layer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_edge_ignores_deadline_headers_and_an_internal_one_believes_only_marked_callers() {
    let two_s = || DeadlineLayer::new(Duration::from_secs(2));
    let all = Server::start(budget_route(two_s())).await;
    let none = Server::start(budget_route(two_s().trust_headers(HeaderTrust::None))).await;
    let marked = Server::start(budget_route(two_s().trust_headers(
        HeaderTrust::InternalHeader {
            name: HeaderName::from_static("x-internal-caller"),
            value: HeaderValue::from_static("mesh-7f3a"),
        },
    )))
    .await;

    let short = [("x-deadline-ms", "110")];
    assert_eq!(request(&all.url("/budget"), &short).await.1, "110 callers");
    assert_eq!(request(&all.url("/budget"), &[]).await.1, "2000 own");
    assert_eq!(
        request(&all.url("/budget"), &[("grpc-timeout", "5S")])
            .await
            .1,
        "2000 own",
        "a caller's longer budget never widens ours, and leaves it ours"
    );
    assert_eq!(request(&none.url("/budget"), &short).await.1, "2000 own");
    assert_eq!(
        request(&none.url("/budget"), &[("grpc-timeout", "0n")])
            .await
            .0,
        StatusCode::OK,
        "a public caller cannot have the request refused by sending nothing left"
    );
    assert_eq!(request(&marked.url("/budget"), &short).await.1, "2000 own");
    assert_eq!(
        request(
            &marked.url("/budget"),
            &[("x-deadline-ms", "110"), ("x-internal-caller", "guess")]
        )
        .await
        .1,
        "2000 own"
    );
    assert_eq!(
        request(
            &marked.url("/budget"),
            &[("x-deadline-ms", "110"), ("x-internal-caller", "mesh-7f3a")]
        )
        .await
        .1,
        "110 callers"
    );
    for server in [all, none, marked] {
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predicate_on_the_connection_decides_who_is_internal() {
    // Loopback callers are "internal" here; in production, a mesh's address range.
    let layer = DeadlineLayer::new(Duration::from_secs(2)).trust_headers_when(|_, extensions| {
        extensions
            .get::<ConnectInfo<SocketAddr>>()
            .is_some_and(|ConnectInfo(peer)| peer.ip().is_loopback())
    });
    let app = budget_route(layer);
    // Without ConnectInfo the predicate finds nothing and believes nobody.
    let server = Server::start(app).await;
    assert_eq!(
        request(&server.url("/budget"), &[("x-deadline-ms", "110")])
            .await
            .1,
        "2000 own"
    );
    server.stop().await;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = budget_route(
        DeadlineLayer::new(Duration::from_secs(2)).trust_headers_when(|_, extensions| {
            extensions
                .get::<ConnectInfo<SocketAddr>>()
                .is_some_and(|ConnectInfo(peer)| peer.ip().is_loopback())
        }),
    );
    let serving = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    let url = format!("http://{addr}/budget");
    assert_eq!(
        request(&url, &[("x-deadline-ms", "110")]).await.1,
        "110 callers"
    );
    serving.abort();
}

/// A dependency that answers in 130 ms, called under the request's deadline.
async fn slow_dependency() -> Result<&'static str, BoxError> {
    let deadline = Deadline::child_of_current(Duration::from_millis(150));
    deadline
        .run(async {
            tokio::time::sleep(Duration::from_millis(130)).await;
            "answer"
        })
        .await
        .map_err(BoxError::from)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_caller_deadlines_through_the_layers_never_open_the_breaker() {
    let breaker = Breaker::builder("sessions_layer")
        .open_after_failures(3, Duration::from_secs(5))
        .cooldown(Duration::from_secs(2))
        .build();
    let svc = ServiceBuilder::new()
        .layer(BreakerLayer::new(breaker.clone()))
        .service_fn(|_: ()| slow_dependency());
    let route = {
        let svc = svc.clone();
        move || {
            let svc = svc.clone();
            async move {
                use tower::ServiceExt;
                match svc.oneshot(()).await {
                    Ok(answer) => (StatusCode::OK, answer.to_owned()),
                    Err(error) => (StatusCode::SERVICE_UNAVAILABLE, error.to_string()),
                }
            }
        }
    };
    let app = Router::new()
        .route("/lookup", get(route))
        .layer(DeadlineLayer::new(Duration::from_secs(5)));
    let server = Server::start(app).await;
    let url = server.url("/lookup");
    for _ in 0..3 {
        let (status, body) = request(&url, &[("x-deadline-ms", "110")]).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(body.contains("caller's"), "{body}");
    }
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(breaker.snapshot().caller_expiries, 3);
    let (status, body) = request(&url, &[]).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the next ordinary request is served: {body}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outgoing_budgets_reach_only_the_allowed_hosts() {
    use tower::{Layer, ServiceExt};
    use velocity_policy_runtime::layer::PropagateDeadlineLayer;

    let echo = Router::new().route(
        "/headers",
        get(|headers: axum::http::HeaderMap| async move {
            let header = |name: &str| {
                headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-")
                    .to_owned()
            };
            format!("{} {}", header("x-deadline-ms"), header("grpc-timeout"))
        }),
    );
    let server = Server::start(echo).await;
    let port = server
        .url("/")
        .split(':')
        .nth(2)
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    // `localhost` is an internal host here; the same server by its address stands for a third
    // party.
    let layer = PropagateDeadlineLayer::new().only_to_hosts(["localhost"]);
    let send = |url: String| {
        let client = layer.clone().layer(client());
        Deadline::after(Duration::from_secs(2)).scope(async move {
            let response = client
                .oneshot(Request::get(url).body(Empty::new()).unwrap())
                .await
                .unwrap();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            String::from_utf8_lossy(&body).into_owned()
        })
    };
    let internal = send(format!("http://localhost:{port}/headers")).await;
    assert_ne!(internal, "- -", "the allowed host hears the budget");
    let third_party = send(format!("http://127.0.0.1:{port}/headers")).await;
    assert_eq!(third_party, "- -", "another host does not");
    server.stop().await;
}
