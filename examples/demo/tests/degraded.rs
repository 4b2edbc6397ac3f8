//! Less privileged is not "not allowed": a save whose session lookup degraded to anonymous
//! (the store too slow, failing, or its breaker open) is answered 503 with the reason and a
//! `Retry-After`, so the client retries; a token whose session really ended is answered 401, so
//! the client signs in again.
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

async fn save(http: &HttpClient, instance: &Instance, token: Option<String>) -> Reply {
    let authorization = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(value) = &authorization {
        headers.push(("authorization", value));
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
async fn a_degraded_session_is_told_to_retry_and_an_ended_one_to_sign_in() {
    let db = stack::prepare_database(None, 1).await.expect("the store");
    let providers = Providers::start().await.expect("the providers");
    let instance = Instance::start("a", &providers.urls(), db, 0)
        .await
        .expect("the service");
    let http = http_client();
    let signed_in = || Some(token_for(1));

    // Healthy: saved.
    let reply = save(&http, &instance, signed_in()).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", text(&reply));

    // The session store is slower than the lookup's 150 ms deadline (what CPU overload looks
    // like): the lookup degrades to anonymous, and the save says "not now", with why.
    providers
        .sessions
        .set_mode(Mode::slow(Duration::from_millis(800)));
    let reply = save(&http, &instance, signed_in()).await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        text(&reply)
    );
    assert_eq!(reply.header("x-degraded"), Some("anonymous"));
    assert_eq!(reply.header("x-degraded-reason"), Some("deadline_exceeded"));
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert!(
        text(&reply).contains("retry in a moment; signing in again will not help"),
        "{}",
        text(&reply)
    );

    // Failing: degraded because the lookup failed, and once the `sessions` breaker opens
    // (three failures within 5 s, the expired lookup above being the first), because it is
    // open, retry after its remaining cooldown.
    providers.sessions.set_mode(Mode::Failing);
    let mut reasons = Vec::new();
    for _ in 0..4 {
        let reply = save(&http, &instance, signed_in()).await;
        assert_eq!(
            reply.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            text(&reply)
        );
        assert_eq!(reply.header("x-degraded"), Some("anonymous"));
        reasons.push(reply.header("x-degraded-reason").unwrap().to_owned());
        if reasons.last().is_some_and(|r| r == "breaker_open") {
            let after: u64 = reply.header("retry-after").unwrap().parse().unwrap();
            assert!((1..=2).contains(&after), "the 2 s cooldown: {after}");
        }
    }
    assert_eq!(
        reasons,
        ["failed", "failed", "breaker_open", "breaker_open"]
    );

    // The store answers, and says this user's session ended: really anonymous, so 401, with
    // nothing marking it degraded. No token at all is a 401 too.
    tokio::time::sleep(Duration::from_millis(2100)).await; // the breaker's cooldown
    providers.sessions.set_mode(Mode::Healthy);
    let reply = save(&http, &instance, Some(token_for(5_000))).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", text(&reply));
    assert_eq!(reply.header("x-degraded"), None);
    assert!(
        text(&reply).contains("the session ended"),
        "{}",
        text(&reply)
    );
    let reply = save(&http, &instance, None).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", text(&reply));
    assert_eq!(reply.header("x-degraded"), None);

    // And the signed-in user saves again.
    let reply = save(&http, &instance, signed_in()).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", text(&reply));

    instance.stop().await;
    providers.stop().await;
}
