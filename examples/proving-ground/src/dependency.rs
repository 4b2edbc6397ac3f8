//! The dependency as an HTTP server on loopback, around [`Capacity`]: `GET /work` is one call,
//! `POST /_control` switches its mode and slots, `GET /_stats` returns its 100 ms buckets.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::fifo::{Admission, Bucket, Capacity, Outcome};
use crate::model::{ACCOUNTING_HEADER, CLIENT_TIMEOUT, Control, Mode};

/// What `GET /_stats` returns.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Every 100 ms bucket with something in it.
    pub buckets: Vec<StatsBucket>,
}

/// A bucket as the orchestrator reads it.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct StatsBucket {
    /// Its start, Unix milliseconds.
    pub unix_ms: u64,
    /// Requests that arrived.
    pub received: u64,
    /// Of those, requests that carried a deadline.
    pub propagated: u64,
    /// Served to the end.
    pub completed: u64,
    /// Served after the caller had stopped waiting.
    pub wasted: u64,
    /// Dropped at the head of the queue, past their propagated deadline.
    pub dropped_expired: u64,
    /// Answered 503 or 429 at once.
    pub refused: u64,
}

impl From<Bucket> for StatsBucket {
    fn from(b: Bucket) -> Self {
        Self {
            unix_ms: b.unix_ms,
            received: b.counts.received,
            propagated: b.counts.propagated,
            completed: b.counts.completed,
            wasted: b.counts.wasted,
            dropped_expired: b.counts.dropped_expired,
            refused: b.counts.refused,
        }
    }
}

/// The dependency's routes.
pub fn router(capacity: Capacity) -> Router {
    Router::new()
        .route("/work", get(work))
        .route("/_control", post(control))
        .route("/_stats", get(stats))
        .with_state(capacity)
}

/// The budget the caller propagated: `x-deadline-ms` (whole milliseconds), else
/// `grpc-timeout`, read by this engine's own parsers; a malformed value is ignored, as the
/// `DeadlineLayer` ignores it.
pub fn propagated(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    text(velocity_policy::layer::deadline::DEADLINE_MS_HEADER)
        .and_then(velocity_policy::layer::deadline::parse_ms_header)
        .or_else(|| {
            text(velocity_policy::layer::deadline::GRPC_TIMEOUT_HEADER)
                .and_then(|v| velocity_policy::deadline::parse_grpc_timeout(v).ok())
        })
}

/// How long the caller waits, for the wasted-work count only: the accounting header (at most
/// the client's timeout), else the client's timeout.
pub fn waits(headers: &HeaderMap) -> Duration {
    headers
        .get(ACCOUNTING_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(velocity_policy::layer::deadline::parse_ms_header)
        .map_or(CLIENT_TIMEOUT, |d| d.min(CLIENT_TIMEOUT))
}

async fn work(State(capacity): State<Capacity>, headers: HeaderMap) -> Response {
    match capacity.submit(propagated(&headers), waits(&headers)) {
        Admission::Queued(answer) => match answer.await {
            Ok(Outcome::Done) => (StatusCode::OK, "done").into_response(),
            Ok(Outcome::Expired) => {
                (StatusCode::GATEWAY_TIMEOUT, "expired in the queue").into_response()
            }
            Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "lost").into_response(),
        },
        Admission::Refused(Mode::TooManyRequests { retry_after_s }) => {
            let mut response = (StatusCode::TOO_MANY_REQUESTS, "slow down").into_response();
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from(retry_after_s));
            response
        }
        Admission::Refused(_) => (StatusCode::SERVICE_UNAVAILABLE, "down").into_response(),
        Admission::Blackhole => std::future::pending().await,
    }
}

async fn control(State(capacity): State<Capacity>, Json(control): Json<Control>) -> StatusCode {
    capacity.set(control);
    StatusCode::NO_CONTENT
}

async fn stats(State(capacity): State<Capacity>) -> Json<Stats> {
    Json(Stats {
        buckets: capacity.timeline().into_iter().map(Into::into).collect(),
    })
}
