//! The live dashboard and the pages: the library's dashboard router (`GET /policy`, the
//! registry's snapshot as JSON: every breaker, bulkhead, shedder, retry, rate limiter, fallback
//! and deferred queue; `GET /dashboard`, a page that renders it and refreshes itself every
//! second), mounted as any service would, in one line; `GET /locality` (where this instance
//! and its services run, derived from the environment: regions only, never a host or a
//! credential); and the small static page at `/`.

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Json, Response};
use axum::routing::get;
use velocity_policy::locality::LocalityMap;

const INDEX: &str = include_str!("../static/index.html");
const LATENCY_PNG: &[u8] = include_bytes!("../static/latency.png");
const LATENCY_WEBP: &[u8] = include_bytes!("../static/latency.webp");

/// The dashboard's routes, for any router state.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { Html(INDEX) }))
        // The page's images, at the paths the page names: the `static/` folder is the site's
        // root, so `policy assets examples/demo/static` audits exactly what is served.
        .route("/{file}", get(asset))
        .route("/locality", get(locality))
        // `/policy` and `/dashboard`, from the runtime (feature `dashboard`).
        .merge(velocity_policy::dashboard::router())
}

async fn locality() -> Json<LocalityMap> {
    Json(LocalityMap::from_env())
}

async fn asset(Path(file): Path<String>) -> Response {
    let (bytes, kind) = match file.as_str() {
        "latency.png" => (LATENCY_PNG, "image/png"),
        "latency.webp" => (LATENCY_WEBP, "image/webp"),
        _ => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        bytes,
    )
        .into_response()
}
