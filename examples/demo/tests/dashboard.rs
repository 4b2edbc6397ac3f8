//! The live dashboard in a real browser: headless Chromium opens `/dashboard` (the runtime's
//! dashboard router, merged into the demo's) while the service runs a fault phase, and the
//! page shows the `search` breaker as open, and the demo's shedder and isolated pool by their
//! operation's name. The screenshot is kept at `target/demo-dashboard.png`.
//!
//! Under `CI=true` a missing `chromium` fails the test (`.ci/run` installs it); elsewhere the
//! test is skipped with a message on stderr.
#![allow(
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers: failing to set up or to run the browser is a failed test"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http::Method;
use policy_demo::client::{self, http_client};
use policy_demo::providers::Mode;
use policy_demo::service::token_for;
use policy_demo::stack::{self, Instance, Providers};
use velocity_policy_testkit::browser::{self, Chromium};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_search_breaker_open_in_a_real_browser() {
    let Some(chromium) = Chromium::find() else {
        return;
    };
    let db = stack::prepare_database(None, 20).await.expect("the store");
    let providers = Providers::start().await.expect("the providers");
    let instance = Instance::start("a", &providers.urls(), db, 0)
        .await
        .expect("the service");
    let base = instance.url();

    // The fault phase: the search provider is down and says for how long (429, Retry-After:
    // 60). The first index call trips the breaker for that minute, so its state cannot flip back
    // while the browser loads the page.
    providers
        .search
        .set_mode(Mode::rate_limited(Duration::from_secs(60)));
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = {
        let (stop, base) = (stop.clone(), base.clone());
        tokio::spawn(async move {
            let client = http_client();
            let bearer = format!("Bearer {}", token_for(7));
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let body = serde_json::json!({ "title": format!("doc {n}"), "body": "text" });
                let _ = client::send(
                    &client,
                    Method::POST,
                    &format!("{base}/documents"),
                    &[
                        ("authorization", &bearer),
                        ("content-type", "application/json"),
                    ],
                    Bytes::from(body.to_string()),
                )
                .await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    // The service's own JSON says the breaker is open before the browser looks.
    let client = http_client();
    let started = Instant::now();
    loop {
        let reply = client::get(&client, &format!("{base}/policy"))
            .await
            .expect("/policy answers");
        let snapshot: serde_json::Value = serde_json::from_slice(&reply.body).expect("JSON");
        let open = snapshot["breakers"].as_array().is_some_and(|b| {
            b.iter()
                .any(|b| b["name"] == "search" && b["state"] == "open")
        });
        if open {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the search breaker did not open: {snapshot}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let url = format!("{base}/dashboard");
    let dom = {
        let (chromium, url) = (chromium.clone(), url.clone());
        tokio::task::spawn_blocking(move || chromium.dump_dom(&url, Duration::from_secs(5)))
            .await
            .expect("the browser ran")
    };
    let row = browser::row(&dom, "data-breaker", "search")
        .unwrap_or_else(|| panic!("the page shows no `search` breaker:\n{dom}"));
    assert!(row.contains("data-state=\"open\""), "{row}");
    assert!(
        row.contains(">open<"),
        "the state badge reads `open`: {row}"
    );
    assert!(
        row.contains("the dependency asked for"),
        "the cause is shown: {row}"
    );
    // The save's tree as this instance ran it, with both worst cases (issue 44): the request's
    // 5 s above it, `save_document`'s 2 s the bound, and every timeout alone 3.45 s (its calls
    // seen at run time, so by name).
    let at = dom
        .find("data-entry=\"save_document\"")
        .unwrap_or_else(|| panic!("the page shows no tree for the save:\n{dom}"));
    let tree = &dom[at..at + dom[at..].find("</table>").unwrap_or(0)];
    assert!(tree.contains("within the request's 5 s"), "{tree}");
    assert!(
        tree.contains("worst case with deadline propagation: 2 s (save_document)"),
        "{tree}"
    );
    assert!(
        tree.contains(
            "if each timeout stood alone: 3.45 s (2s + 100ms + 100ms + 150ms + 100ms + 1s)"
        ),
        "{tree}"
    );
    for operation in [
        "authenticate",
        "lookup_session",
        "authorize",
        "validate",
        "write_document",
    ] {
        let row = browser::row(tree, "data-name", operation)
            .unwrap_or_else(|| panic!("no `{operation}` in the save's tree:\n{tree}"));
        assert!(row.contains("<svg class=\"spark\""), "{row}");
    }
    // The demo's per-function shedder, by its operation's name, not `policy_demo::service::...`.
    let shedders = browser::table_body(&dom, "shedders").expect("the shedders table");
    let publish = browser::row(shedders, "data-name", "publish_activity")
        .unwrap_or_else(|| panic!("no `publish_activity` shedder:\n{shedders}"));
    assert!(publish.contains(">publish_activity</td>"), "{publish}");
    let isolated = browser::table_body(&dom, "isolated").expect("the isolated table");
    let embedding = browser::row(isolated, "data-name", "compute_embedding")
        .unwrap_or_else(|| panic!("no `compute_embedding` pool:\n{isolated}"));
    assert!(embedding.contains(">compute_embedding</td>"), "{embedding}");

    // The artifact: a screenshot of the page, kept under target/.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf);
    let screenshot = target.join("demo-dashboard.png");
    {
        let screenshot = screenshot.clone();
        tokio::task::spawn_blocking(move || {
            chromium.screenshot(&url, Duration::from_secs(5), &screenshot, (1280, 1400));
        })
        .await
        .expect("the browser ran");
    }
    let size = std::fs::metadata(&screenshot).map_or(0, |m| m.len());
    assert!(size > 10_000, "a screenshot of {size} bytes");
    eprintln!("the dashboard's screenshot: {}", screenshot.display());

    stop.store(true, Ordering::Relaxed);
    let _ = traffic.await;
    instance.stop().await;
    providers.stop().await;
}
