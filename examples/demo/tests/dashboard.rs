//! The live dashboard in a real browser: headless Chromium opens `/dashboard` while the
//! service runs a fault phase, and the page shows the `search` breaker as open. The screenshot
//! is kept at `target/demo-dashboard.png`.
//!
//! Under `CI=true` a missing `chromium` fails the test (`.ci/run` installs it); elsewhere the
//! test is skipped with a message on stderr.
#![allow(
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers: failing to set up or to run the browser is a failed test"
)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http::Method;
use policy_demo::client::{self, http_client};
use policy_demo::providers::Mode;
use policy_demo::service::token_for;
use policy_demo::stack::{self, Instance, Providers};
use tokio::process::Command;

fn chromium() -> Option<&'static str> {
    let found = std::process::Command::new("chromium")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Some("chromium");
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "chromium is not installed, and CI=true: install it (apt-get install -y chromium); .ci/run does"
    );
    eprintln!("SKIPPED: chromium is not installed (install it to run the dashboard test)");
    None
}

/// Runs headless Chromium on `url` with `extra` flags; returns its stdout.
async fn browse(chromium: &str, profile: &Path, url: &str, extra: &[String]) -> String {
    let output = tokio::time::timeout(
        Duration::from_secs(90),
        Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--virtual-time-budget=5000",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(url)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("chromium finishes within 90 s")
    .expect("chromium runs");
    assert!(
        output.status.success(),
        "chromium failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The opening tag of the table row the dashboard renders for the breaker `name`.
fn breaker_row<'a>(dom: &'a str, name: &str) -> Option<&'a str> {
    let at = dom.find(&format!("data-breaker=\"{name}\""))?;
    let start = dom[..at].rfind("<tr")?;
    let end = at + dom[at..].find("</tr>")?;
    Some(&dom[start..end])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_search_breaker_open_in_a_real_browser() {
    let Some(chromium) = chromium() else {
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

    let profile = tempfile::tempdir().expect("a browser profile directory");
    let url = format!("{base}/dashboard");
    let dom = browse(chromium, profile.path(), &url, &["--dump-dom".to_owned()]).await;
    let row = breaker_row(&dom, "search")
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

    // The artifact: a screenshot of the page, kept under target/.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf);
    let screenshot = target.join("demo-dashboard.png");
    let _ = std::fs::remove_file(&screenshot);
    browse(
        chromium,
        profile.path(),
        &url,
        &[
            format!("--screenshot={}", screenshot.display()),
            "--window-size=1280,1100".to_owned(),
            "--hide-scrollbars".to_owned(),
        ],
    )
    .await;
    let size = std::fs::metadata(&screenshot).map_or(0, |m| m.len());
    assert!(size > 10_000, "a screenshot of {size} bytes");
    eprintln!("the dashboard's screenshot: {}", screenshot.display());

    stop.store(true, Ordering::Relaxed);
    let _ = traffic.await;
    instance.stop().await;
    providers.stop().await;
}
