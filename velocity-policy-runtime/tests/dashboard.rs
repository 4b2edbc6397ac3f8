//! The dashboard router (feature `dashboard`): its JSON as a client reads it, and its page in
//! headless Chromium, nested under a prefix as a user might mount it. The page renders every
//! table with each row named by its policy or operation name, and a breaker that opens after
//! the page's first read shows as open within two refreshes.
//!
//! Under `CI=true` a missing `chromium` fails the browser test (`.ci/run` installs it);
//! elsewhere it is skipped with a message on stderr.
#![cfg(feature = "dashboard")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tower::ServiceExt as _;
use velocity_policy_runtime::background::BackgroundPool;
use velocity_policy_runtime::limiter::LimiterSnapshot;
use velocity_policy_runtime::registry::LimiterSource;
use velocity_policy_runtime::shedding::Thresholds;
use velocity_policy_runtime::{Registry, dashboard};
use velocity_policy_testkit::browser::{self, Chromium};
use velocity_policy_testkit::http::Server;

#[derive(Debug)]
struct Uploads;

impl LimiterSource for Uploads {
    fn limiter_snapshot(&self) -> LimiterSnapshot {
        let mut snapshot = LimiterSnapshot::new("uploads");
        snapshot.admitted = 12;
        snapshot.refused = 3;
        snapshot
    }
}

/// A registry with one of everything the page has a table for, named as the attribute macros
/// name them (`module::path::operation` for what they make per function).
fn populated() -> &'static Registry {
    let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
    registry.breaker("search", |b| {
        b.open_after_failures(3, Duration::from_secs(30))
            .cooldown(Duration::from_secs(20))
    });
    registry.bulkhead("search", |b| b.max_concurrent(4).max_queued(2));
    registry.bulkhead("partners", |b| {
        b.adaptive(velocity_policy_runtime::bulkhead::AdaptiveLimit::new(4, 64))
    });
    registry.retry("transient", |r| r.attempts(3));
    let tail = registry.hedge("tail", |h| h.percentile(95.0).min_samples(1));
    tail.record(Duration::from_millis(40));
    registry.shedder(
        "my_service::handlers::publish_activity",
        Thresholds::DEFAULT,
    );
    registry.register_limiter("uploads", Arc::new(Uploads));
    registry.rate_limiter("webhooks", 10, Duration::from_secs(1), |l| l);
    registry.fallback("my_service::session::lookup_session", "anonymous");
    registry.isolated_pool("my_service::render::render_pdf", |p| p);
    registry.poll_monitor("my_service::render::embed", Duration::from_millis(5));
    registry.operation_deadline(
        "my_service::search::find",
        Duration::from_secs(2),
        Duration::from_millis(100),
    );
    #[cfg(feature = "chaos")]
    {
        use velocity_policy_runtime::chaos::{Fault, Latency};
        let drill = registry.chaos("search_drill");
        drill.set(
            Fault::Latency(Latency::Uniform {
                min: Duration::from_millis(200),
                max: Duration::from_millis(800),
            }),
            0.1,
        );
        drill.set(
            Fault::TooManyRequests {
                retry_after: Duration::from_secs(5),
            },
            0.02,
        );
        drill.enable();
        // Drills inject only in a process that armed them.
        velocity_policy_runtime::chaos::arm();
        // The first draw is hit by every fault at a rate: the 429 comes first and ends it.
        assert!(drill.draw(None).is_err());
    }
    registry
        .declare("breaker", "search", "my_service::a", "3 in 30s")
        .unwrap();
    registry
        .declare("breaker", "search", "my_service::b", "5 in 30s")
        .unwrap_err();
    registry
}

async fn get(app: &Router, path: &str) -> (StatusCode, Vec<(String, String)>, String) {
    let request = Request::get(path).body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8(body.to_vec()).unwrap())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn the_json_is_versioned_in_milliseconds_and_named_by_operation() {
    let registry = populated();
    let app: Router = Router::new().nest("/ops", dashboard::router_for(registry));

    let (status, headers, body) = get(&app, "/ops/policy").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, "content-type"), Some("application/json"));
    assert_eq!(header(&headers, "cache-control"), Some("no-store"));
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["version"], 1);
    let search = &json["breakers"][0];
    assert_eq!(search["name"], "search");
    assert_eq!(search["config"]["cooldown_ms"], 20_000.0, "{search}");
    assert_eq!(
        search["config"]["open_after"]["window_ms"], 30_000.0,
        "{search}"
    );
    assert_eq!(json["shedders"][0]["display_name"], "publish_activity");
    assert_eq!(json["fallbacks"][0]["display_name"], "lookup_session");
    assert_eq!(json["polls"][0]["display_name"], "embed");
    assert_eq!(json["isolated"][0]["display_name"], "render_pdf");
    assert_eq!(json["polls"][0]["budget_ms"], 5.0);
    assert_eq!(json["limiters"][0]["refused"], 3);
    assert_eq!(json["hedges"][0]["name"], "tail");
    assert_eq!(json["hedges"][0]["after"], "p95");
    let delay = json["hedges"][0]["delay_ms"].as_f64().unwrap();
    assert!((40.0..=45.0).contains(&delay), "{}", json["hedges"][0]);
    assert_eq!(json["conflicts"][0]["second"]["origin"], "my_service::b");
    assert_eq!(json["operations"][0]["display_name"], "find");
    assert_eq!(json["operations"][0]["deadline_ms"], 2000.0);
    assert_eq!(json["overrides"]["settings"], serde_json::json!([]));
    #[cfg(feature = "chaos")]
    {
        let drill = &json["chaos"][0];
        assert_eq!(drill["name"], "search_drill");
        assert_eq!(drill["on"], true);
        assert_eq!(drill["faults"][0]["kind"], "status_429", "{drill}");
        assert_eq!(drill["faults"][0]["fault"]["retry_after_ms"], 5000.0);
        assert_eq!(drill["faults"][0]["injected"], 1);
        assert_eq!(drill["faults"][1]["kind"], "latency");
        assert_eq!(drill["faults"][1]["fault"]["distribution"], "uniform");
        assert_eq!(drill["faults"][1]["rate"], 0.1);
        assert_eq!(drill["faults"][1]["injected"], 0);
    }
    #[cfg(not(feature = "chaos"))]
    assert!(
        json.get("chaos").is_none(),
        "no fault injection without the feature"
    );

    let (status, headers, page) = get(&app, "/ops/dashboard").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        header(&headers, "content-type"),
        Some("text/html; charset=utf-8")
    );
    // Relative, so the page finds its JSON under whatever prefix it is mounted.
    assert!(
        page.contains("fetch(\"policy\""),
        "the page reads `policy` beside it"
    );

    // Merged at the root, the same routes are `/policy` and `/dashboard`.
    let root: Router = Router::new().merge(dashboard::router_for(registry));
    assert_eq!(get(&root, "/policy").await.0, StatusCode::OK);
    assert_eq!(get(&root, "/dashboard").await.0, StatusCode::OK);
}

/// A durable queue holding two tasks, its figures read, for the page's `queues` table (feature
/// `redis`; `None` when `redis-server` is missing outside CI).
#[cfg(feature = "redis")]
async fn queue_with_two_tasks() -> Option<(
    velocity_policy_testkit::RedisServer,
    velocity_policy_runtime::queue::TaskQueue,
)> {
    let server = velocity_policy_testkit::RedisServer::start()?;
    let store = velocity_policy_runtime::redis_store::RedisStore::builder()
        .prefix(server.key_prefix("dashboard"))
        .timeout(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let queue = velocity_policy_runtime::queue::TaskQueue::builder("embeddings").build(&store);
    for n in 0..2u32 {
        queue.enqueue("embed", &(n,)).await.unwrap();
    }
    queue.refresh().await.unwrap();
    Some((server, queue))
}

/// The registry the browser test serves, and how many times the page asked for its JSON.
static SERVED: OnceLock<&'static Registry> = OnceLock::new();
static READS: AtomicU32 = AtomicU32::new(0);

/// Serves the page's first three reads of the JSON, opening the `search` breaker right after
/// the first; later reads answer 503 (which the page shows, keeping its last tables), so the
/// DOM Chromium dumps is what the page rendered from the third read.
async fn three_reads(request: Request, next: Next) -> Response {
    if request.uri().path() != "/ops/policy" {
        return next.run(request).await;
    }
    let read = READS.fetch_add(1, Ordering::SeqCst) + 1;
    if read > 3 {
        return (StatusCode::SERVICE_UNAVAILABLE, "enough").into_response();
    }
    let response = next.run(request).await;
    if read == 1 {
        let registry = SERVED.get().unwrap();
        registry
            .find_breaker("search")
            .unwrap()
            .trip(Duration::from_secs(60), "429 from the provider");
    }
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_renders_every_table_and_shows_an_opening_within_two_refreshes() {
    let Some(chromium) = Chromium::find() else {
        return;
    };
    let registry = *SERVED.get_or_init(populated);
    let _embeddings = BackgroundPool::builder("embeddings").build();
    #[cfg(feature = "redis")]
    let queued = queue_with_two_tasks().await;
    assert_eq!(
        registry.find_breaker("search").unwrap().snapshot().state,
        velocity_policy_runtime::breaker::BreakerState::Closed,
        "closed when the page first reads it"
    );
    let app = Router::new()
        .nest("/ops", dashboard::router_for(registry))
        .layer(middleware::from_fn(three_reads));
    let server = Server::start(app).await;
    let url = server.url("/ops/dashboard");

    // Five seconds of the page's time: five reads at one a second, the last two refused.
    let dom = tokio::task::spawn_blocking(move || chromium.dump_dom(&url, Duration::from_secs(5)))
        .await
        .unwrap();
    let reads = READS.load(Ordering::SeqCst);
    assert!(reads >= 4, "the page read its JSON {reads} times in 5 s");
    assert!(
        dom.contains("data-refreshes=\"3\""),
        "three reads rendered: {dom}"
    );
    assert!(dom.contains("policy answered 503"), "the refusal is shown");

    // The breaker opened after the first read; by the third it shows as open.
    let breaker = browser::row(&dom, "data-breaker", "search")
        .unwrap_or_else(|| panic!("no `search` breaker row:\n{dom}"));
    assert!(breaker.contains("data-state=\"open\""), "{breaker}");
    assert!(
        breaker.contains(">open<"),
        "the badge reads open: {breaker}"
    );
    assert!(
        breaker.contains("the dependency asked for 1 min")
            || breaker.contains("the dependency asked for 60 s"),
        "the cause is shown: {breaker}"
    );

    // Every table rendered its row, named by the policy or the operation, never a module path.
    for (table, name) in [
        ("breakers", "search"),
        ("bulkheads", "search"),
        ("shedders", "publish_activity"),
        ("retries", "transient"),
        ("hedges", "tail"),
        ("limiters", "uploads"),
        ("fallbacks", "lookup_session"),
        ("isolated", "render_pdf"),
        ("polls", "embed"),
        ("work", "background: embeddings"),
        ("store", "in_process"),
        ("conflicts", "search"),
        ("operations", "find"),
    ] {
        let body = browser::table_body(&dom, table)
            .unwrap_or_else(|| panic!("no table `{table}`:\n{dom}"));
        let row = browser::row(body, "data-name", name)
            .unwrap_or_else(|| panic!("table `{table}` has no row `{name}`:\n{body}"));
        let first_cell = row.split("<td").nth(1).unwrap_or_default();
        assert!(
            first_cell.contains(&format!(">{name}</td>")),
            "table `{table}`: the row is called `{name}`: {row}"
        );
    }
    // A drill's row says it is injecting, each fault at its rate and what it injected.
    #[cfg(feature = "chaos")]
    {
        let body = browser::table_body(&dom, "chaos").unwrap();
        let row = browser::row(body, "data-name", "search_drill")
            .unwrap_or_else(|| panic!("no chaos row `search_drill`:\n{body}"));
        assert!(row.contains(">search_drill</td>"), "{row}");
        assert!(row.contains(">injecting<"), "{row}");
        assert!(
            row.contains("at 10%") && row.contains("429, retry after"),
            "{row}"
        );
        assert!(row.contains("status_429 1"), "{row}");
    }
    // A hedge says when it fires: the percentile it follows and what that is now.
    let body = browser::table_body(&dom, "hedges").unwrap();
    let row = browser::row(body, "data-name", "tail").unwrap();
    assert!(row.contains(">p95<") && row.contains(" ms<"), "{row}");

    // A bulkhead says whether its limit is fixed or adaptive, and between which bounds.
    let body = browser::table_body(&dom, "bulkheads").unwrap();
    let row = browser::row(body, "data-name", "partners")
        .unwrap_or_else(|| panic!("no row `partners`:\n{body}"));
    assert!(row.contains("data-limit=\"adaptive\""), "{row}");
    assert!(
        row.contains(">adaptive, 4 to 64 (not measured yet)<"),
        "its bounds: {row}"
    );
    assert!(row.contains(">0 / 4<"), "it starts at min: {row}");
    let row = browser::row(body, "data-name", "search").unwrap();
    assert!(row.contains(">fixed<"), "{row}");
    // A durable queue's row: the stream's length against its bound, from the last read.
    #[cfg(feature = "redis")]
    if queued.is_some() {
        let body = browser::table_body(&dom, "queues").unwrap();
        let row = browser::row(body, "data-name", "embeddings")
            .unwrap_or_else(|| panic!("no queue row `embeddings`:\n{body}"));
        assert!(row.contains(">embeddings</td>"), "{row}");
        assert!(row.contains(">2 / 10000<"), "its length and bound: {row}");
        assert!(row.contains(">2<"), "enqueued: {row}");
    }
    // A rate limiter of the registry says its rate and where it decides.
    {
        let body = browser::table_body(&dom, "limiters").unwrap();
        let row = browser::row(body, "data-name", "webhooks")
            .unwrap_or_else(|| panic!("no row `webhooks`:\n{body}"));
        assert!(row.contains(">10 per 1 s<"), "its rate: {row}");
        assert!(row.contains(">in process<"), "where it decides: {row}");
    }
    server.stop().await;
}

/// With an override in force, the page says which value came from where: the deadline row
/// names the override's file, line and column, the overrides table lists it beside the
/// compiled value, and a refused set is shown with `policy check`'s rendering.
#[cfg(feature = "overrides")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_where_an_overridden_value_came_from() {
    use velocity_policy_runtime::overrides::Overrides;

    let Some(chromium) = Chromium::find() else {
        return;
    };
    let root = std::env::temp_dir().join(format!("policy-dashboard-{}", std::process::id()));
    std::fs::create_dir_all(root.join("production")).unwrap();
    std::fs::write(
        root.join("search.policy"),
        "operation find: critical { deadline = 2s; min_budget = 100ms }\n",
    )
    .unwrap();
    std::fs::write(
        root.join("production/search.policy"),
        "operation find { deadline = 800ms }\n",
    )
    .unwrap();
    let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
    let overrides = Overrides::builder(&root)
        .environment("production")
        .registry(registry)
        .strict(true)
        .load()
        .unwrap();
    registry.operation_deadline(
        "my_service::search::find",
        Duration::from_secs(2),
        Duration::from_millis(100),
    );
    std::fs::write(
        root.join("production/search.policy"),
        "operation find { deadline = 50ms }\n",
    )
    .unwrap();
    assert!(overrides.reload().is_err());

    // Sources revealed: this dashboard is for the people who edit the files.
    let server = Server::start(
        Router::new().merge(
            dashboard::Dashboard::new()
                .registry(registry)
                .reveal_sources()
                .router(),
        ),
    )
    .await;
    let url = server.url("/dashboard");
    let dom = tokio::task::spawn_blocking(move || chromium.dump_dom(&url, Duration::from_secs(2)))
        .await
        .unwrap();
    let body = browser::table_body(&dom, "operations").unwrap();
    let row = browser::row(body, "data-name", "find").unwrap_or_else(|| panic!("{body}"));
    assert!(row.contains(">800 ms (compiled 2 s)<"), "{row}");
    assert!(row.contains("production/search.policy:1:18"), "{row}");
    let body = browser::table_body(&dom, "overrides").unwrap();
    let row = browser::row(body, "data-name", "operation find deadline")
        .unwrap_or_else(|| panic!("{body}"));
    assert!(row.contains(">800ms<") && row.contains(">2s<"), "{row}");
    assert!(dom.contains("environment production"), "{dom}");
    assert!(
        dom.contains("policy::min-budget-exceeds-deadline"),
        "the refusal is shown"
    );
    server.stop().await;
    std::fs::remove_dir_all(&root).unwrap();
}

/// By default `/policy` leaves out where the policies live and what they say: no directory,
/// no file, line or column, no rendering of a refused set (which quotes the file); the numbers
/// in force and the refusal's codes stay. Issue 39, point 15.
#[cfg(feature = "overrides")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_leaves_out_file_paths_and_policy_text_unless_asked() {
    use velocity_policy_runtime::overrides::Overrides;

    let root = std::env::temp_dir().join(format!("policy-dashboard-hidden-{}", std::process::id()));
    std::fs::create_dir_all(root.join("production")).unwrap();
    std::fs::write(
        root.join("search.policy"),
        "operation find: critical { deadline = 2s; min_budget = 100ms }\n",
    )
    .unwrap();
    std::fs::write(
        root.join("production/search.policy"),
        "operation find { deadline = 800ms }\n",
    )
    .unwrap();
    let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
    let overrides = Overrides::builder(&root)
        .environment("production")
        .registry(registry)
        .strict(true)
        .load()
        .unwrap();
    registry.operation_deadline(
        "my_service::search::find",
        Duration::from_secs(2),
        Duration::from_millis(100),
    );
    std::fs::write(
        root.join("production/search.policy"),
        "operation find { deadline = 50ms } // secret-looking comment\n",
    )
    .unwrap();
    assert!(overrides.reload().is_err());

    let hidden: Router = Router::new().merge(dashboard::router_for(registry));
    let (status, _, body) = get(&hidden, "/policy").await;
    assert_eq!(status, StatusCode::OK);
    let root_text = root.to_string_lossy().into_owned();
    assert!(!body.contains(&root_text), "no directory: {body}");
    assert!(!body.contains("search.policy"), "no file: {body}");
    assert!(!body.contains("secret-looking"), "no policy text: {body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let setting = &json["overrides"]["settings"][0];
    assert_eq!(setting["setting"], "deadline", "{setting}");
    assert_eq!(
        setting["value"], "800ms",
        "the number in force stays: {setting}"
    );
    assert!(setting.get("file").is_none() && setting.get("line").is_none());
    assert!(
        json["overrides"]["refused"]["codes"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );

    let revealed: Router = Router::new().merge(
        dashboard::Dashboard::new()
            .registry(registry)
            .reveal_sources()
            .router(),
    );
    let (_, _, body) = get(&revealed, "/policy").await;
    assert!(
        body.contains("search.policy"),
        "revealed when asked: {body}"
    );
    assert!(body.contains(&root_text), "{body}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A set the fleet published (through a real `redis-server`) is shown as the fleet's: the
/// overrides' heading names its version and publisher instead of a directory, and each row
/// says it came from the fleet's set.
#[cfg(all(feature = "overrides", feature = "redis"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_says_a_set_came_from_the_fleet() {
    use velocity_policy_runtime::overrides::{Overrides, publish};
    use velocity_policy_runtime::redis_store::RedisStore;

    let Some(chromium) = Chromium::find() else {
        return;
    };
    let Some(redis) = velocity_policy_testkit::RedisServer::start() else {
        return;
    };
    let root = std::env::temp_dir().join(format!("policy-dashboard-fleet-{}", std::process::id()));
    std::fs::create_dir_all(root.join("publish")).unwrap();
    std::fs::write(
        root.join("search.policy"),
        "operation find: critical { deadline = 2s; min_budget = 100ms }\n",
    )
    .unwrap();
    std::fs::write(
        root.join("publish/search.policy"),
        "operation find { deadline = 700ms }\n",
    )
    .unwrap();
    let store = RedisStore::builder()
        .prefix(redis.key_prefix("dashboard"))
        .instance("publisher-1")
        .timeout(Duration::from_secs(2))
        .connect(&redis.url())
        .await
        .unwrap();
    let version = publish(&store, root.join("publish")).await.unwrap();
    let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
    let overrides = Arc::new(
        Overrides::builder(&root)
            .registry(registry)
            .strict(true)
            .load()
            .unwrap(),
    );
    let _following = overrides.follow(&store).await;
    registry.operation_deadline(
        "my_service::search::find",
        Duration::from_secs(2),
        Duration::from_millis(100),
    );

    let server = Server::start(Router::new().merge(dashboard::router_for(registry))).await;
    let url = server.url("/dashboard");
    let dom = tokio::task::spawn_blocking(move || chromium.dump_dom(&url, Duration::from_secs(2)))
        .await
        .unwrap();
    let body = browser::table_body(&dom, "operations").unwrap();
    let row = browser::row(body, "data-name", "find").unwrap_or_else(|| panic!("{body}"));
    assert!(row.contains(">700 ms (compiled 2 s)<"), "{row}");
    assert!(
        row.contains(&format!(
            "(fleet set {version} from publisher-1, published "
        )),
        "{row}"
    );
    assert!(
        dom.contains(&format!(
            "from the fleet: set {version} published by publisher-1 at "
        )),
        "{dom}"
    );
    server.stop().await;
    std::fs::remove_dir_all(&root).unwrap();
}
