//! The image-dimensions layer's cost per HTML response (feature `html-dimensions`): the same
//! 40 KiB page, 40 `<img>` elements of which 20 lack their size, served by an axum router
//! with the layer and without it, in process (`tower::ServiceExt::oneshot`, body collected),
//! so the difference is the layer's streaming rewrite and nothing of the network.
//!
//! `cargo bench -p velocity-policy-delivery --features html-dimensions --bench image_dimensions`
#![allow(
    clippy::expect_used,
    reason = "a benchmark that cannot build its page or runtime cannot measure"
)]

use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use axum::response::Html;
use axum::routing::get;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::BodyExt;
use tower::ServiceExt;
use velocity_policy_delivery::image_dimensions::{ImageDimensionsLayer, ImageManifest};

/// About 1 KiB of text per image; every second image has no `width`/`height`.
fn page() -> &'static str {
    let mut page = String::from("<!doctype html><html><body>\n");
    for i in 0..40 {
        for _ in 0..9 {
            page.push_str("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore.</p>\n");
        }
        if i % 2 == 0 {
            page.push_str("<img src=\"/static/img/photo.jpg\" alt=\"\">\n");
        } else {
            page.push_str(
                "<img src=\"/static/img/icon.png\" width=\"32\" height=\"16\" alt=\"\">\n",
            );
        }
    }
    page.push_str("</body></html>\n");
    Box::leak(page.into_boxed_str())
}

/// Real images: the asset audit's fixtures.
fn manifest() -> ImageManifest {
    let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/assets/site/img");
    ImageManifest::scan(&images, "/static/img").expect("the fixture images")
}

async fn serve(router: &Router) -> usize {
    let request = Request::get("/page.html")
        .body(Body::empty())
        .expect("a request");
    let response = router.clone().oneshot(request).await.expect("a response");
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    body.len()
}

fn layer_cost(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let page = page();
    let plain = Router::new().route("/page.html", get(move || async move { Html(page) }));
    let layered = plain.clone().layer(ImageDimensionsLayer::new(manifest()));
    // The layer did its work: 20 images gained a size, so the page grew.
    let (before, after) = rt.block_on(async { (serve(&plain).await, serve(&layered).await) });
    assert!(after > before, "the layer added no dimensions");

    let mut group = c.benchmark_group(format!("html-dimensions/{} KiB page", page.len() / 1024));
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    group.bench_function("without the layer", |b| {
        b.iter(|| rt.block_on(serve(&plain)));
    });
    group.bench_function("with the layer", |b| {
        b.iter(|| rt.block_on(serve(&layered)));
    });
    group.finish();
}

criterion_group!(benches, layer_cost);
criterion_main!(benches);
