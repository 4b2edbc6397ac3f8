//! `GET /metrics` after a scripted fault: the search provider fails until the `search` breaker
//! opens and refuses; the scrape (Prometheus' text format) has the breaker's openings, its
//! state and its refusals, and they equal what `/policy` says at the same quiet moment.
#![cfg(feature = "prometheus")]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::time::{Duration, Instant};

use axum::body::Bytes;
use http::Method;
use policy_demo::client::{self, HttpClient, http_client};
use policy_demo::providers::Mode;
use policy_demo::service::token_for;
use policy_demo::stack::{self, Instance, Providers};

/// The value of every sample of `metric` whose labels include all of `labels`, summed; `None`
/// when no sample matches.
fn sample(scrape: &str, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in scrape.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (name, rest) = series.split_once('{').unwrap_or((series, "}"));
        if name != metric {
            continue;
        }
        let all = labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        if all {
            *found.get_or_insert(0.0) += value.parse::<f64>().expect("a sample's value");
        }
    }
    found
}

async fn save(http: &HttpClient, base: &str, n: u64) {
    let bearer = format!("Bearer {}", token_for(7));
    let body = serde_json::json!({ "title": format!("doc {n}"), "body": "text" });
    let _ = client::send(
        http,
        Method::POST,
        &format!("{base}/documents"),
        &[
            ("authorization", &bearer),
            ("content-type", "application/json"),
        ],
        Bytes::from(body.to_string()),
    )
    .await;
}

async fn policy(http: &HttpClient, base: &str) -> serde_json::Value {
    let reply = client::get(http, &format!("{base}/policy"))
        .await
        .expect("/policy answers");
    serde_json::from_slice(&reply.body).expect("JSON")
}

fn search_breaker(snapshot: &serde_json::Value) -> serde_json::Value {
    snapshot["breakers"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == "search"))
        .cloned()
        .unwrap_or_else(|| panic!("no `search` breaker in {snapshot}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_a_fault_show_the_opening_and_the_refusals_the_snapshot_counts() {
    let db = stack::prepare_database(None, 5).await.expect("the store");
    let providers = Providers::start().await.expect("the providers");
    let instance = Instance::start("a", &providers.urls(), db, 0)
        .await
        .expect("the service");
    let base = instance.url();
    let http = http_client();

    // Saves index the document after the response; with the provider failing, the indexing
    // fails until the breaker opens, and is refused after.
    providers.search.set_mode(Mode::Failing);
    let started = Instant::now();
    let mut n = 0;
    loop {
        n += 1;
        save(&http, &base, n).await;
        // The indexing runs after the response: the breaker appears once the first one calls.
        let snapshot = policy(&http, &base).await;
        let breaker = snapshot["breakers"]
            .as_array()
            .and_then(|b| b.iter().find(|b| b["name"] == "search"))
            .cloned()
            .unwrap_or_default();
        if breaker["openings"].as_u64() >= Some(1) && breaker["refusals"].as_u64() >= Some(3) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the search breaker did not open and refuse: {breaker}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Quiet: no request in flight and no deferred work left, so nothing moves between the
    // scrape and the snapshot.
    let quiet = Instant::now();
    let snapshot = loop {
        let snapshot = policy(&http, &base).await;
        let deferred = &snapshot["deferred"];
        if deferred["queued"] == 0 && deferred["running"] == 0 && deferred["waiting"] == 0 {
            break snapshot;
        }
        assert!(
            quiet.elapsed() < Duration::from_secs(20),
            "deferred work did not settle: {deferred}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let reply = client::get(&http, &format!("{base}/metrics"))
        .await
        .expect("/metrics answers");
    assert_eq!(reply.status, http::StatusCode::OK);
    assert!(
        reply
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/plain")),
        "{:?}",
        reply.header("content-type")
    );
    let scrape = String::from_utf8(reply.body.to_vec()).expect("text");
    let after = policy(&http, &base).await;
    assert_eq!(
        search_breaker(&after)["refusals"],
        search_breaker(&snapshot)["refusals"],
        "nothing moved while scraping"
    );

    let breaker = search_breaker(&snapshot);
    let name = [("name", "search")];
    let openings = sample(&scrape, "policy_breaker_openings_total", &name)
        .unwrap_or_else(|| panic!("no openings of `search` in\n{scrape}"));
    assert!(openings >= 1.0, "{scrape}");
    assert_eq!(Some(openings), breaker["openings"].as_f64(), "{scrape}");
    let refusals = sample(
        &scrape,
        "policy_refusals_total",
        &[
            ("mechanism", "breaker"),
            ("name", "search"),
            ("kind", "breaker_open"),
        ],
    )
    .unwrap_or_else(|| panic!("no refusals of `search` in\n{scrape}"));
    assert!(refusals >= 3.0, "{scrape}");
    assert_eq!(Some(refusals), breaker["refusals"].as_f64(), "{scrape}");
    // The refusals by the opening's cause: the failures counted.
    assert_eq!(
        sample(
            &scrape,
            "policy_refusals_total",
            &[("name", "search"), ("reason", "failures")]
        ),
        Some(refusals),
        "{scrape}"
    );
    // The state gauge: open (2) while the snapshot says open. (Once the cooldown has passed
    // the snapshot reads probation at once; the gauge moves at the next call, as documented.)
    let state = sample(&scrape, "policy_breaker_state", &name).expect("a state");
    if breaker["state"] == "open" {
        assert_eq!(state, 2.0, "{breaker}\n{scrape}");
    } else {
        assert!(state >= 1.0, "{breaker}\n{scrape}");
    }
    // Documented with its type, and the calls' durations are a histogram with buckets.
    assert!(
        scrape.contains("# TYPE policy_breaker_openings_total counter"),
        "{scrape}"
    );
    assert!(
        scrape.contains("# TYPE policy_call_duration_seconds histogram"),
        "{scrape}"
    );
    assert!(
        scrape.contains("policy_call_duration_seconds_bucket{"),
        "{scrape}"
    );

    instance.stop().await;
    providers.stop().await;
}
