//! The image-dimensions layer behind a real axum server on loopback, with a real HTTP client:
//! HTML responses gain the `width`/`height` their `<img>` elements lack, as they stream; every
//! other response, and every other byte, passes through untouched.
#![cfg(feature = "html-dimensions")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::path::{Path, PathBuf};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use http_body_util::{BodyExt, Empty};
use velocity_policy_delivery::image_dimensions::{ImageDimensionsLayer, ImageManifest};
use velocity_policy_testkit::http::{ChannelBody, Server, client, get as fetch};

/// Real PNG, JPEG, WebP and AVIF files: the asset audit's fixtures.
fn images() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/assets/site/img")
}

fn manifest() -> ImageManifest {
    ImageManifest::scan(images(), "/static/img").unwrap()
}

const PAGE: &str = r#"<!doctype html>
<html><head><title>Sizes</title></head>
<body>
<!-- <img src="/static/img/photo.jpg"> stays a comment -->
<script>document.write('<img src="/static/img/photo.jpg">');</script>
<img src="/static/img/photo.jpg" alt="none">
<img src="/static/img/photo.webp" width="400" alt="width only">
<img src="/static/img/photo.avif" height="150" alt="height only">
<img src="/static/img/icon.png" width="64" height="64" alt="both: left alone">
<img src="/static/img/icon.png" width="50%" alt="a percentage: left alone">
<img src="img/icon.png?v=2#x" alt="relative to /static/">
<img src="/static/img/unknown.png" alt="not in the manifest">
<img src="https://cdn.example/static/img/photo.jpg" alt="another host">
<img src="data:image/png;base64,iVBORw0KGgo=" alt="inline">
<IMG SRC='/static/img/icon.png'>
</body></html>
"#;

const EXPECTED: &str = r#"<!doctype html>
<html><head><title>Sizes</title></head>
<body>
<!-- <img src="/static/img/photo.jpg"> stays a comment -->
<script>document.write('<img src="/static/img/photo.jpg">');</script>
<img src="/static/img/photo.jpg" alt="none" width="800" height="600">
<img src="/static/img/photo.webp" width="400" alt="width only" height="300">
<img src="/static/img/photo.avif" height="150" alt="height only" width="200">
<img src="/static/img/icon.png" width="64" height="64" alt="both: left alone">
<img src="/static/img/icon.png" width="50%" alt="a percentage: left alone">
<img src="img/icon.png?v=2#x" alt="relative to /static/" width="32" height="16">
<img src="/static/img/unknown.png" alt="not in the manifest">
<img src="https://cdn.example/static/img/photo.jpg" alt="another host">
<img src="data:image/png;base64,iVBORw0KGgo=" alt="inline">
<IMG SRC='/static/img/icon.png' width="32" height="16">
</body></html>
"#;

fn html_response(body: impl Into<Body>, headers: &[(header::HeaderName, &str)]) -> Response {
    let mut response = Response::new(body.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        "text/html; charset=utf-8".parse().unwrap(),
    );
    for (name, value) in headers {
        response
            .headers_mut()
            .insert(name.clone(), value.parse().unwrap());
    }
    response
}

fn app(layer: ImageDimensionsLayer) -> Router {
    Router::new()
        .route("/static/index.html", get(|| async { Html(PAGE) }))
        .route(
            "/static/tagged.html",
            get(|| async {
                html_response(
                    PAGE,
                    &[
                        (header::ETAG, "\"v1\""),
                        (header::ACCEPT_RANGES, "bytes"),
                        (header::CONTENT_LENGTH, &PAGE.len().to_string()),
                    ],
                )
            }),
        )
        .route(
            "/compressed.html",
            get(|| async { html_response(PAGE, &[(header::CONTENT_ENCODING, "br")]) }),
        )
        .route(
            "/data.json",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    format!("{{\"html\": {:?}}}", r#"<img src="/static/img/photo.jpg">"#),
                )
                    .into_response()
            }),
        )
        .route(
            "/missing.html",
            get(|| async {
                (
                    StatusCode::NOT_FOUND,
                    Html(r#"<img src="/static/img/icon.png">"#),
                )
            }),
        )
        .layer(layer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_dimensions_are_filled_from_the_manifest() {
    let manifest = manifest();
    assert_eq!(manifest.get("/static/img/photo.jpg"), Some((800, 600)));
    assert_eq!(manifest.get("/static/img/photo.webp"), Some((800, 600)));
    assert_eq!(manifest.get("/static/img/photo.avif"), Some((800, 600)));
    assert_eq!(manifest.get("/static/img/icon.png"), Some((32, 16)));
    // Truncated before its header is complete? `truncated.png` keeps its header: its size is
    // known. Files that are not images are left out.
    assert_eq!(manifest.get("/static/img/truncated.png"), Some((54, 54)));

    let server = Server::start(app(ImageDimensionsLayer::new(manifest))).await;
    let client = client();
    let (status, body) = fetch(&client, &server.url("/static/index.html")).await;
    assert_eq!(status, 200);
    assert_eq!(body, EXPECTED);

    // Error pages are HTML too.
    let (status, body) = fetch(&client, &server.url("/missing.html")).await;
    assert_eq!(status, 404);
    assert_eq!(
        body,
        r#"<img src="/static/img/icon.png" width="32" height="16">"#
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_response_drops_its_length_and_weakens_its_etag() {
    let server = Server::start(app(ImageDimensionsLayer::new(manifest()))).await;
    let client = client();
    let response = client
        .get(server.url("/static/tagged.html").parse().unwrap())
        .await
        .unwrap();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(String::from_utf8_lossy(&body), EXPECTED);
    assert_eq!(headers[header::ETAG], "W/\"v1\"");
    assert!(headers.get(header::ACCEPT_RANGES).is_none());
    // Sent chunked: a `content-length` of the original page would cut the rewritten one short.
    assert_ne!(
        headers
            .get(header::CONTENT_LENGTH)
            .map(|v| v.to_str().unwrap().to_owned()),
        Some(PAGE.len().to_string())
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_responses_pass_through_untouched() {
    let server = Server::start(app(ImageDimensionsLayer::new(manifest()))).await;
    let client = client();

    let response = client
        .get(server.url("/compressed.html").parse().unwrap())
        .await
        .unwrap();
    assert_eq!(response.headers()[header::CONTENT_ENCODING], "br");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, PAGE.as_bytes());

    let response = client
        .get(server.url("/data.json").parse().unwrap())
        .await
        .unwrap();
    let length = response.headers()[header::CONTENT_LENGTH].clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(length.to_str().unwrap(), body.len().to_string());
    assert!(!String::from_utf8_lossy(&body).contains("width"));

    // HEAD keeps the headers a GET of the original would have.
    let head = Request::head(server.url("/static/tagged.html"))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = client.request(head).await.unwrap();
    assert_eq!(response.headers()[header::ETAG], "\"v1\"");
    assert_eq!(
        response.headers()[header::CONTENT_LENGTH],
        PAGE.len().to_string()
    );
    server.stop().await;
}

/// Serves `chunks` as one streamed HTML body, and collects what the client receives.
async fn stream_through(layer: ImageDimensionsLayer, chunks: Vec<String>) -> String {
    let (tx, rx) = tokio::sync::oneshot::channel::<tokio::sync::mpsc::Sender<Bytes>>();
    let tx = std::sync::Arc::new(std::sync::Mutex::new(Some(tx)));
    let app = Router::new()
        .route(
            "/streamed.html",
            get(move || {
                let (sender, body) = ChannelBody::new(|| {});
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(sender);
                }
                async move { html_response(Body::new(body), &[]) }
            }),
        )
        .layer(layer);
    let server = Server::start(app).await;
    let client = client();
    let url = server.url("/streamed.html");
    let reader = tokio::spawn(async move { fetch(&client, &url).await });
    let sender = rx.await.unwrap();
    for chunk in chunks {
        sender.send(Bytes::from(chunk)).await.unwrap();
    }
    drop(sender);
    let (status, body) = reader.await.unwrap();
    assert_eq!(status, 200);
    server.stop().await;
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_split_across_chunks_are_rewritten() {
    // Every split point of the page, in two chunks, gives the same answer.
    let layer = ImageDimensionsLayer::new(manifest());
    let page = r#"<p><img src="/static/img/icon.png" alt="x"></p>"#;
    for split in [1, 5, 10, 20, 33, 40, page.len() - 1] {
        let chunks = vec![page[..split].to_owned(), page[split..].to_owned()];
        let body = stream_through(layer.clone(), chunks).await;
        assert_eq!(
            body, r#"<p><img src="/static/img/icon.png" alt="x" width="32" height="16"></p>"#,
            "split at {split}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_over_the_buffer_bound_stops_rewriting_but_never_breaks_the_page() {
    let layer = ImageDimensionsLayer::new(manifest()).max_buffered(8 * 1024);
    let huge = format!(
        r#"<img src="data:image/png;base64,{}" alt="huge">"#,
        "A".repeat(64 * 1024)
    );
    let before = r#"<img src="/static/img/icon.png">"#;
    let after = r#"<img src="/static/img/icon.png">"#;
    let page = format!("{before}\n{huge}\n{after}\n");
    // 4 KiB chunks: the huge tag spans many, and the rewriter may hold at most 8 KiB.
    let chunks: Vec<String> = page
        .as_bytes()
        .chunks(4096)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    let body = stream_through(layer, chunks).await;
    let rewritten_before = r#"<img src="/static/img/icon.png" width="32" height="16">"#;
    assert_eq!(body, format!("{rewritten_before}\n{huge}\n{after}\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manifest_leaves_out_what_is_not_an_image() {
    let dir = std::env::temp_dir().join(format!("image-manifest-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("nested/deeper")).unwrap();
    std::fs::copy(images().join("icon.png"), dir.join("nested/deeper/a b.png")).unwrap();
    std::fs::write(dir.join("notes.txt"), "not an image").unwrap();
    std::fs::write(dir.join("empty.png"), "").unwrap();
    std::fs::write(
        dir.join("cut.png"),
        &std::fs::read(images().join("icon.png")).unwrap()[..12],
    )
    .unwrap();
    let manifest = ImageManifest::scan(&dir, "assets/").unwrap();
    assert_eq!(manifest.len(), 1);
    assert_eq!(
        manifest.get("/assets/nested/deeper/a b.png"),
        Some((32, 16))
    );
    assert!(ImageManifest::scan(dir.join("nowhere"), "/").is_err());

    // A percent-encoded `src` finds the file by its name.
    let app = Router::new()
        .route(
            "/page.html",
            get(|| async { Html(r#"<img src="/assets/nested/deeper/a%20b.png">"#) }),
        )
        .layer(ImageDimensionsLayer::new(manifest));
    let server = Server::start(app).await;
    let (_, body) = fetch(&client(), &server.url("/page.html")).await;
    assert_eq!(
        body,
        r#"<img src="/assets/nested/deeper/a%20b.png" width="32" height="16">"#
    );
    server.stop().await;
}
