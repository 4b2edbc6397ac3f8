//! The request's deadline end to end in the demo: every route gets one budget from
//! `demo.policy`'s `request` stanza (a caller may send less, never more), and the calls to the
//! providers carry what is left of it, so a provider is never given more than the request had.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::time::Duration;

use axum::body::Bytes;
use http::{Method, StatusCode};
use policy_demo::client::{self, HttpClient, Reply, http_client};
use policy_demo::model;
use policy_demo::service::token_for;
use policy_demo::stack::{self, Instance, Providers};

async fn save(http: &HttpClient, instance: &Instance, budget_ms: Option<&str>) -> Reply {
    let authorization = format!("Bearer {}", token_for(1));
    let mut headers = vec![
        ("content-type", "application/json"),
        ("authorization", authorization.as_str()),
    ];
    if let Some(ms) = budget_ms {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_is_never_given_more_budget_than_the_request_had() {
    let db = stack::prepare_database(None, 1).await.expect("the store");
    let providers = Providers::start().await.expect("the providers");
    let instance = Instance::start("a", &providers.urls(), db, 0)
        .await
        .expect("the service");
    let http = http_client();
    let request_budget = model::request_deadline().expect("demo.policy's request deadline");

    // No header from the caller: the policy's budget governs, and the session lookup (a
    // critical call inside the save) passes on what is left of its child of it.
    let reply = save(&http, &instance, None).await;
    assert_eq!(reply.status, StatusCode::CREATED);
    let seen = providers.sessions.take_budgets();
    assert_eq!(seen.with_budget, 1, "{seen:?}");
    assert_eq!(seen.without_budget, 0, "{seen:?}");
    assert!(seen.max <= request_budget, "{seen:?} vs {request_budget:?}");
    assert!(!seen.min.is_zero(), "{seen:?}");

    // The caller sends 300 ms: the request's budget is 300 ms, and the provider is told less.
    let reply = save(&http, &instance, Some("300")).await;
    assert_eq!(reply.status, StatusCode::CREATED);
    let seen = providers.sessions.take_budgets();
    assert_eq!(seen.with_budget, 1, "{seen:?}");
    assert!(seen.max <= Duration::from_millis(300), "{seen:?}");
    assert!(!seen.min.is_zero(), "{seen:?}");

    // 60 ms: below `save_document`'s `min_budget = 100ms`, so the save (a child of the
    // request's 60 ms, not a fresh 2 s) is refused before any of its work, the lookup included.
    let reply = save(&http, &instance, Some("60")).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.header("x-refusal"), Some("insufficient_budget"));
    assert_eq!(providers.sessions.take_budgets().with_budget, 0);

    // A caller asking for more than the policy allows gets the policy's budget, no more.
    let wide = (request_budget.as_millis() * 10).to_string();
    let reply = save(&http, &instance, Some(&wide)).await;
    assert_eq!(reply.status, StatusCode::CREATED);
    let seen = providers.sessions.take_budgets();
    assert!(seen.max <= request_budget, "{seen:?} vs {request_budget:?}");

    // Nothing left, or less than the request stanza's `min_budget` (20 ms): answered by the
    // DeadlineLayer (504, not the save's own 503) before the handler runs; no provider called.
    let min_budget = model::request_min_budget().expect("demo.policy's request min_budget");
    let below = (min_budget.as_millis() / 2).to_string();
    for sent in ["0", below.as_str()] {
        let reply = save(&http, &instance, Some(sent)).await;
        assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT, "{sent} ms");
        assert_eq!(reply.header("x-refusal"), Some("insufficient_budget"));
        assert_eq!(providers.sessions.take_budgets().with_budget, 0);
    }

    instance.stop().await;
    providers.stop().await;
}
