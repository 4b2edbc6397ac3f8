//! A caller may shorten its own wait, never make the service refuse others (issue 39, point 1).
//!
//! The session store answers in 130 ms, inside `lookup_session`'s own 150 ms. Three saves that
//! send `x-deadline-ms: 110` (above `save_document`'s 100 ms minimum) expire in the lookup: the
//! caller's expiry, which the `sessions` breaker (three failures open it) must not count. The
//! next ordinary save, with no header, is served.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::time::Duration;

use axum::body::Bytes;
use http::{Method, StatusCode};
use policy_demo::client::{self, HttpClient, Reply, http_client};
use policy_demo::providers::Mode;
use policy_demo::service::token_for;
use policy_demo::stack::{self, Instance, Providers};

async fn save(http: &HttpClient, instance: &Instance, deadline_ms: Option<&str>) -> Reply {
    let authorization = format!("Bearer {}", token_for(1));
    let mut headers = vec![
        ("content-type", "application/json"),
        ("authorization", authorization.as_str()),
    ];
    if let Some(ms) = deadline_ms {
        headers.push(("x-deadline-ms", ms));
    }
    client::send(
        http,
        Method::POST,
        &format!("{}/documents", instance.url()),
        &headers,
        Bytes::from(r#"{"title":"a title","body":"a body"}"#),
    )
    .await
    .expect("an answer")
}

fn text(reply: &Reply) -> String {
    String::from_utf8_lossy(&reply.body).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_short_deadline_requests_do_not_open_the_sessions_breaker_for_everyone() {
    let db = stack::prepare_database(None, 1).await.expect("the store");
    let providers = Providers::start().await.expect("the providers");
    let instance = Instance::start("a", &providers.urls(), db, 0)
        .await
        .expect("the service");
    let http = http_client();

    providers
        .sessions
        .set_mode(Mode::slow(Duration::from_millis(130)));
    // Healthy for an ordinary save: the lookup's 150 ms covers the store's 130 ms.
    let reply = save(&http, &instance, None).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", text(&reply));

    for _ in 0..3 {
        let reply = save(&http, &instance, Some("110")).await;
        assert_ne!(reply.status, StatusCode::CREATED, "{}", text(&reply));
        assert!(
            !text(&reply).contains("breaker_open"),
            "the caller's own expiry, not an open breaker: {}",
            text(&reply)
        );
    }
    // Served: the breaker did not count the callers' expiries against the store.
    for _ in 0..3 {
        let reply = save(&http, &instance, None).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", text(&reply));
    }
    instance.stop().await;
    providers.stop().await;
}
