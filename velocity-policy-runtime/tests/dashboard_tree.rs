//! The dashboard's observed tree and its history (features `dashboard` and `http`): the calls
//! an instance made, composed with the numbers in force into each entry point's tree with both
//! worst cases; each operation's p99 beside its bound; the last few minutes of every breaker,
//! bulkhead, shedder and operation as sparklines, checked in headless Chromium.
//!
//! The calls go through what the attribute expansion wraps every call in, on the process's
//! registry (the one the dashboard's `router()` serves and the calls are noted in), with names
//! of their own per test.
//!
//! Under `CI=true` a missing `chromium` fails the browser test; elsewhere it is skipped with a
//! message on stderr.
#![cfg(all(feature = "dashboard", feature = "http"))]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use http_body_util::BodyExt;
use tower::ServiceExt as _;
use velocity_policy_runtime::__macro_support::{Calls, carrier, traced};
use velocity_policy_runtime::layer::DeadlineLayer;
use velocity_policy_runtime::{Deadline, Registry, dashboard};
use velocity_policy_testkit::browser::{self, Chromium};
use velocity_policy_testkit::http::Server;

type Done = Result<(), std::io::Error>;

/// An error that carries refusals and expiries, as an annotated function's must.
#[derive(Debug)]
enum Refused {
    Refused,
    Expired,
}

impl From<velocity_policy_runtime::ResilienceError> for Refused {
    fn from(_: velocity_policy_runtime::ResilienceError) -> Self {
        Refused::Refused
    }
}

impl From<velocity_policy_runtime::DeadlineExceeded> for Refused {
    fn from(_: velocity_policy_runtime::DeadlineExceeded) -> Self {
        Refused::Expired
    }
}

fn call(calls: &'static Calls, body: impl Future<Output = Done>) -> impl Future<Output = Done> {
    traced(calls, tracing::Span::none(), body)
}

/// Registers the operations' deadlines as the expansion does, and the retry `push` declares.
fn declare(prefix: &str) {
    let registry = Registry::global();
    for (name, deadline, min) in [
        ("save", 2000, 100),
        ("authenticate", 100, 0),
        ("lookup", 150, 0),
        ("write", 1000, 20),
        ("index", 5000, 0),
        ("push", 4000, 0),
    ] {
        let full = format!("shop::{prefix}_{name}");
        registry.operation_deadline(
            &full,
            Duration::from_millis(deadline),
            Duration::from_millis(min),
        );
        registry
            .declare("operation", &full, &full, "numbers")
            .unwrap();
    }
    let push = format!("shop::{prefix}_push");
    let retry = format!("{prefix}_search");
    registry.retry(&retry, |r| {
        r.attempts(3)
            .backoff(Duration::from_millis(50), Duration::from_millis(400))
            .attempt_timeout(Duration::from_secs(1))
    });
    registry
        .declare("retry policy", &retry, &push, "3 x 1s")
        .unwrap();
}

async fn json(app: &Router) -> serde_json::Value {
    let request = Request::get("/policy").body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

fn tree<'a>(json: &'a serde_json::Value, entry: &str) -> &'a serde_json::Value {
    json["tree"]["trees"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["entry"] == entry)
        .unwrap_or_else(|| panic!("no tree `{entry}`: {:#}", json["tree"]))
}

static J_SAVE: Calls = Calls::new("j_save");
static J_AUTH: Calls = Calls::new("j_authenticate");
static J_LOOKUP: Calls = Calls::new("j_lookup");
static J_WRITE: Calls = Calls::new("j_write");
static J_INDEX: Calls = Calls::new("j_index");
static J_PUSH: Calls = Calls::new("j_push");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_composes_the_observed_tree_with_the_numbers_in_force() {
    declare("j");
    let _layer = DeadlineLayer::new(Duration::from_secs(5)).min_budget(Duration::from_millis(20));
    let app: Router = dashboard::router();
    let save = || {
        call(&J_SAVE, async {
            call(&J_AUTH, async { Ok(()) }).await?;
            call(&J_LOOKUP, async { Ok(()) }).await?;
            call(&J_WRITE, async { Ok(()) }).await
        })
    };
    Deadline::after(Duration::from_secs(5))
        .scope(save())
        .await
        .unwrap();
    // Deferred work (not under the request): an entry of its own, its retried call below it.
    call(&J_INDEX, call(&J_PUSH, async { Ok(()) }))
        .await
        .unwrap();

    let json = json(&app).await;
    let save = tree(&json, "j_save");
    assert_eq!(save["request_ms"], 5000.0);
    assert_eq!(save["under_deadline"], true);
    assert_eq!(save["bound_ms"], 2000.0);
    assert_eq!(save["tightest"], "j_save");
    // 2s + 100ms + 150ms + 1s: each timeout alone.
    assert_eq!(save["alone_ms"], 3250.0);
    assert_eq!(save["difference_ms"], 1250.0);
    let children: Vec<&str> = save["root"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["operation"].as_str().unwrap())
        .collect();
    // Seen at run time, in no order the run can tell: by name.
    assert_eq!(children, ["j_authenticate", "j_lookup", "j_write"]);
    assert_eq!(save["root"]["children"][0]["seen"], "observed");

    // The retry its function declared, with its numbers in force: 3 × 1s + 50ms + 100ms.
    let index = tree(&json, "j_index");
    assert_eq!(index["under_deadline"], false);
    let push = &index["root"]["children"][0];
    assert_eq!(push["attempts"], 3);
    assert_eq!(push["bound_ms"], 3150.0);
    assert_eq!(index["alone_ms"], 8150.0);

    // What the tree shows: siblings with no minimum budget, an entry point with no deadline
    // in scope.
    let findings: Vec<(&str, &str)> = json["tree"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["operation"].as_str().unwrap().starts_with("j_"))
        .map(|f| {
            (
                f["code"].as_str().unwrap(),
                f["operation"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(
        findings.contains(&("policy::explain::no-min-budget", "j_lookup")),
        "{findings:?}"
    );
    assert!(
        findings.contains(&("policy::explain::no-request-deadline", "j_index")),
        "{findings:?}"
    );
    assert_eq!(json["calls"]["request_budget_ms"], 5000.0);
    assert_eq!(json["calls"]["dropped"], 0);
}

static H_OP: Calls = Calls::new("h_history");

// Paused time: each call takes exactly its 20 ms. The sampler `router()` starts may run on
// another test's runtime and take a point between this test's two, so the counts are summed
// over the points since the first, not read from the last alone.
#[tokio::test(start_paused = true)]
async fn the_history_keeps_each_operations_calls_refusals_and_p99_per_point() {
    declare("h");
    let registry = Registry::global();
    registry.operation_deadline(
        "shop::h_history",
        Duration::from_millis(300),
        Duration::ZERO,
    );
    let app: Router = dashboard::router();
    registry.record_history();
    for _ in 0..5 {
        call(&H_OP, async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(())
        })
        .await
        .unwrap();
    }
    // A refusal becomes the call's outcome, as the expansion makes it (through its carrier):
    // counted under its kind.
    let refused = traced(&H_OP, tracing::Span::none(), async {
        let carrier = carrier::<Result<(), Refused>>();
        Deadline::after(Duration::from_millis(1))
            .require(Duration::from_secs(1), "h_history")
            .map_err(|refusal| {
                carrier.flatten(velocity_policy_runtime::CallError::Refused(refusal))
            })
    })
    .await;
    assert!(refused.is_err());
    registry.record_history();
    let json = json(&app).await;
    let history = &json["history"];
    assert_eq!(history["interval_ms"], 2000);
    let series = history["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "h_history")
        .unwrap_or_else(|| panic!("no series: {history:#}"));
    let column = |column: &str| -> Vec<Option<f64>> {
        series[column]
            .as_array()
            .unwrap_or_else(|| panic!("no column {column}: {series:#}"))
            .iter()
            .map(serde_json::Value::as_f64)
            .collect()
    };
    let sum = |name: &str| -> f64 { column(name).into_iter().flatten().sum() };
    assert_eq!(sum("calls"), 6.0, "{series:#}");
    assert_eq!(sum("refused_insufficient_budget"), 1.0, "{series:#}");
    assert_eq!(sum("ok"), 5.0, "{series:#}");
    // The 20 ms calls' bucket, its upper bound within a third of a doubling.
    let p99 = column("p99_ms")
        .into_iter()
        .flatten()
        .fold(0.0_f64, f64::max);
    assert!((20.0..=26.0).contains(&p99), "p99 {p99}: {series:#}");
    assert_eq!(column("bound_ms").last().copied().flatten(), Some(300.0));
    // Every column is as long as the points' times.
    let points = history["at_unix_ms"].as_array().unwrap().len();
    assert!(points >= 2);
    assert_eq!(series["calls"].as_array().unwrap().len(), points);
}

static B_SAVE: Calls = Calls::new("b_save");
static B_AUTH: Calls = Calls::new("b_authenticate");
static B_LOOKUP: Calls = Calls::new("b_lookup");
static B_WRITE: Calls = Calls::new("b_write");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_tree_with_both_worst_cases_and_sparklines() {
    let Some(chromium) = Chromium::find() else {
        return;
    };
    declare("b");
    let _layer = DeadlineLayer::new(Duration::from_secs(5)).min_budget(Duration::from_millis(20));
    let registry = Registry::global();
    let breaker = registry.breaker("b_sessions", |b| b);
    let server = Server::start(Router::new().merge(dashboard::router())).await;
    registry.record_history();
    for round in 0..3 {
        for _ in 0..4 {
            Deadline::after(Duration::from_secs(5))
                .scope(call(&B_SAVE, async {
                    call(&B_AUTH, async { Ok(()) }).await?;
                    call(&B_LOOKUP, async {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        Ok(())
                    })
                    .await?;
                    call(&B_WRITE, async { Ok(()) }).await
                }))
                .await
                .unwrap();
        }
        if round == 1 {
            breaker.trip(Duration::from_secs(60), "429");
            let _ = breaker.check();
        }
        registry.record_history();
    }
    let url = server.url("/dashboard");
    let dom = tokio::task::spawn_blocking(move || chromium.dump_dom(&url, Duration::from_secs(2)))
        .await
        .unwrap();

    // The save's tree, with both worst cases, as `policy explain` words them.
    let at = dom
        .find("data-entry=\"b_save\"")
        .unwrap_or_else(|| panic!("no tree `b_save`:\n{dom}"));
    let tree = &dom[at..at + dom[at..].find("</table>").unwrap()];
    assert!(
        tree.contains("within the request's 5 s"),
        "the request's budget: {tree}"
    );
    assert!(
        tree.contains("worst case with deadline propagation: 2 s (b_save)"),
        "{tree}"
    );
    assert!(
        tree.contains("if each timeout stood alone: 3.25 s (2s + 100ms + 150ms + 1s)"),
        "{tree}"
    );
    assert!(tree.contains("propagation saves 1.25 s"), "{tree}");
    // Each node: its bound beside its p99, and the last minutes drawn.
    let row = browser::row(tree, "data-name", "b_lookup")
        .unwrap_or_else(|| panic!("no row `b_lookup`:\n{tree}"));
    assert!(row.contains(">150 ms<"), "its bound: {row}");
    assert!(
        row.contains("data-bound=\"150\""),
        "p99 drawn against it: {row}"
    );
    assert!(
        !row.contains(">no calls<"),
        "a p99 of its last minute: {row}"
    );
    // A point per round, the first included (the sampler `router()` started may add one
    // between two rounds).
    let count = row
        .split("data-series=\"calls\" data-count=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or_else(|| panic!("no calls drawn: {row}"));
    assert!((3..=5).contains(&count), "a point per round: {row}");
    // A breaker's row: its refusals and openings over the last minutes.
    let body = browser::table_body(&dom, "breakers").unwrap();
    let row = browser::row(body, "data-name", "b_sessions")
        .unwrap_or_else(|| panic!("no breaker row:\n{body}"));
    assert!(row.contains("<svg class=\"spark\""), "{row}");
    assert!(row.contains("data-series=\"refusals\""), "{row}");
    // What the tree shows, with its code.
    assert!(
        dom.contains("data-code=\"policy::explain::no-min-budget\""),
        "the findings are listed"
    );
    server.stop().await;
}
