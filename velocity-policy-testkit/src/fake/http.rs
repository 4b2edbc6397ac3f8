//! The fake dependency as a real HTTP server on loopback (feature `fake-http`).
//!
//! [`FakeHttpDependency::start`] serves a [`FakeDependency`] on a free loopback port: every
//! request but `POST /_mode` is one call, answered as its [`Behaviour`] says (a 200 after its
//! latency, a 503 while down, a 429 with a `Retry-After` header while rate limited). Besides the
//! dependency's own [`Counts`](super::Counts) it keeps the calls per caller (the `x-caller`
//! header: [`CallerCounts`]) and the budgets its callers propagated ([`Deadlines`]: the
//! `x-deadline-ms` and `grpc-timeout` headers, as the runtime's `DeadlineLayer` reads them).
//!
//! `POST /_mode` with a body such as `slow 800ms` switches the behaviour from outside (see
//! [`Behaviour::parse`]); a service with its own vocabulary passes its own parser
//! ([`FakeHttp::parse_mode_with`]).
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_testkit::fake::Behaviour;
//! use velocity_policy_testkit::fake::http::FakeHttpDependency;
//! use velocity_policy_testkit::http::{client, get};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let search = FakeHttpDependency::start("search").await;
//! let http = client();
//! assert_eq!(get(&http, &search.url("/query")).await.0, 200);
//! search.dependency().set(Behaviour::down());
//! assert_eq!(get(&http, &search.url("/query")).await.0, 503);
//! let counts = search.dependency().counts();
//! assert_eq!((counts.ok, counts.failed), (1, 1));
//! search.stop().await;
//! # }
//! ```
//!
//! A service that serves with its own server (its own connection limits and timeouts) builds a
//! [`FakeHttp`] and mounts [`FakeHttp::router`] instead.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use velocity_policy_runtime::layer::deadline::{
    DEADLINE_MS_HEADER, GRPC_TIMEOUT_HEADER, parse_ms_header,
};

use super::behaviour::whole_seconds;
use super::{Behaviour, FakeDependency, FakeError, lock};
use crate::http::Server;

/// The most callers kept apart; calls from any further caller are counted under
/// [`OTHER_CALLERS`]. The `x-caller` header is the client's to choose, so without a bound a
/// client sending a new name per request would grow the map without end.
pub const MAX_CALLERS: usize = 16;

/// The longest caller name kept, in bytes; a longer name is cut at a character boundary.
pub const MAX_CALLER_LEN: usize = 64;

/// The name under which calls past [`MAX_CALLERS`] distinct callers are counted.
pub const OTHER_CALLERS: &str = "(other callers)";

/// The name under which requests without an `x-caller` header are counted.
pub const UNNAMED_CALLER: &str = "unknown";

/// The header naming the calling instance.
pub const CALLER_HEADER: &str = "x-caller";

/// The answered requests of one caller (a request its client gave up on is not among them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallerCounts {
    /// Requests answered.
    pub received: u64,
    /// Answered by the responder (a 200 by default).
    pub ok: u64,
    /// Answered 503.
    pub failed: u64,
    /// Answered 429.
    pub rate_limited: u64,
}

/// The budgets callers propagated, over some span of requests: a count, the least, the most
/// and the sum, so the server keeps four numbers however long it runs. A request's budget is
/// the smaller of its `x-deadline-ms` and `grpc-timeout` headers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadlines {
    /// Requests that carried a budget.
    pub with_budget: u64,
    /// Requests that carried none (or none that parsed).
    pub without_budget: u64,
    /// The least budget received (zero when none was).
    pub min: Duration,
    /// The most budget received.
    pub max: Duration,
    /// The budgets' sum, for the mean.
    pub total: Duration,
}

impl Deadlines {
    /// The mean budget received, if any was.
    #[must_use]
    pub fn mean(&self) -> Option<Duration> {
        let n = u32::try_from(self.with_budget).ok().filter(|n| *n > 0)?;
        Some(self.total / n)
    }
}

/// [`Deadlines`] as the server keeps them: atomics, started over by
/// [`FakeHttp::take_deadlines`].
#[derive(Debug)]
struct DeadlineCounter {
    with_budget: AtomicU64,
    without_budget: AtomicU64,
    min_us: AtomicU64,
    max_us: AtomicU64,
    total_us: AtomicU64,
}

impl Default for DeadlineCounter {
    fn default() -> Self {
        Self {
            with_budget: AtomicU64::new(0),
            without_budget: AtomicU64::new(0),
            min_us: AtomicU64::new(u64::MAX),
            max_us: AtomicU64::new(0),
            total_us: AtomicU64::new(0),
        }
    }
}

impl DeadlineCounter {
    fn record(&self, budget: Option<Duration>) {
        let Some(budget) = budget else {
            self.without_budget.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let us = u64::try_from(budget.as_micros()).unwrap_or(u64::MAX);
        self.with_budget.fetch_add(1, Ordering::Relaxed);
        self.min_us.fetch_min(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
        self.total_us.fetch_add(us, Ordering::Relaxed);
    }

    fn read(&self) -> Deadlines {
        let with_budget = self.with_budget.load(Ordering::Relaxed);
        let min = self.min_us.load(Ordering::Relaxed);
        Deadlines {
            with_budget,
            without_budget: self.without_budget.load(Ordering::Relaxed),
            min: Duration::from_micros(if with_budget == 0 { 0 } else { min }),
            max: Duration::from_micros(self.max_us.load(Ordering::Relaxed)),
            total: Duration::from_micros(self.total_us.load(Ordering::Relaxed)),
        }
    }

    fn take(&self) -> Deadlines {
        let with_budget = self.with_budget.swap(0, Ordering::Relaxed);
        let min = self.min_us.swap(u64::MAX, Ordering::Relaxed);
        Deadlines {
            with_budget,
            without_budget: self.without_budget.swap(0, Ordering::Relaxed),
            min: Duration::from_micros(if with_budget == 0 { 0 } else { min }),
            max: Duration::from_micros(self.max_us.swap(0, Ordering::Relaxed)),
            total: Duration::from_micros(self.total_us.swap(0, Ordering::Relaxed)),
        }
    }
}

/// The budget a request carried: the smaller of `x-deadline-ms` and `grpc-timeout`, parsed as
/// the runtime's `DeadlineLayer` parses them.
fn budget_of(headers: &HeaderMap) -> Option<Duration> {
    let ms = headers
        .get(DEADLINE_MS_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_ms_header);
    let grpc = headers
        .get(GRPC_TIMEOUT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| velocity_policy_runtime::deadline::parse_grpc_timeout(v).ok());
    match (ms, grpc) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The answer to a successful call, from the request's method and URI.
type Responder = dyn Fn(&Method, &Uri) -> Response + Send + Sync;

/// Reads the body of `POST /_mode`.
type ModeParser = dyn Fn(&str) -> Result<Behaviour, String> + Send + Sync;

#[derive(Clone)]
struct App {
    dependency: FakeDependency,
    respond: Arc<Responder>,
    parse_mode: Arc<ModeParser>,
    callers: Arc<Mutex<BTreeMap<String, CallerCounts>>>,
    deadlines: Arc<DeadlineCounter>,
}

/// A fake dependency's HTTP app, to serve with [`FakeHttp::start`] or to mount
/// ([`FakeHttp::router`]); cloning shares it.
#[derive(Clone)]
pub struct FakeHttp {
    app: Arc<App>,
}

impl fmt::Debug for FakeHttp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeHttp")
            .field("dependency", &self.app.dependency)
            .finish_non_exhaustive()
    }
}

/// A 200 with `{"ok":true}`.
fn ok_json(_: &Method, _: &Uri) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        "{\"ok\":true}",
    )
        .into_response()
}

impl FakeHttp {
    /// The app of `dependency`: a successful call answers 200 with `{"ok":true}`, and
    /// `POST /_mode` reads [`Behaviour::parse`].
    #[must_use]
    pub fn new(dependency: FakeDependency) -> Self {
        Self {
            app: Arc::new(App {
                dependency,
                respond: Arc::new(ok_json),
                parse_mode: Arc::new(Behaviour::parse),
                callers: Arc::default(),
                deadlines: Arc::default(),
            }),
        }
    }

    /// Answers a successful call with `respond(method, uri)` (after the call's latency)
    /// instead of the 200. Whatever it answers, the call counts as `ok`: the dependency
    /// answered (a 404 for a missing record is an answer). Apps cloned before keep their
    /// responder; the counts stay shared.
    #[must_use]
    pub fn respond_with(
        self,
        respond: impl Fn(&Method, &Uri) -> Response + Send + Sync + 'static,
    ) -> Self {
        let mut app = App::clone(&self.app);
        app.respond = Arc::new(respond);
        Self { app: Arc::new(app) }
    }

    /// Reads `POST /_mode` with `parse` instead of [`Behaviour::parse`]: a service's own
    /// vocabulary, or its own bounds on a delay. An `Err` is answered 400 with its message.
    #[must_use]
    pub fn parse_mode_with(
        self,
        parse: impl Fn(&str) -> Result<Behaviour, String> + Send + Sync + 'static,
    ) -> Self {
        let mut app = App::clone(&self.app);
        app.parse_mode = Arc::new(parse);
        Self { app: Arc::new(app) }
    }

    /// The dependency it serves: [`set`](FakeDependency::set) its behaviour and read its
    /// [`counts`](FakeDependency::counts) there.
    #[must_use]
    pub fn dependency(&self) -> &FakeDependency {
        &self.app.dependency
    }

    /// The axum app: `POST /_mode`, and every other request a call.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/_mode", post(switch))
            .fallback(answer)
            .with_state(self.app.clone())
    }

    /// Serves it on a free loopback port.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound.
    pub async fn start(self) -> FakeHttpDependency {
        let server = Server::start(self.router()).await;
        FakeHttpDependency { http: self, server }
    }

    /// The answered requests so far, per caller (the `x-caller` header, [`UNNAMED_CALLER`]
    /// without one): at most [`MAX_CALLERS`] names, the rest under [`OTHER_CALLERS`].
    #[must_use]
    pub fn callers(&self) -> BTreeMap<String, CallerCounts> {
        lock(&self.app.callers).clone()
    }

    /// The budgets callers propagated so far.
    #[must_use]
    pub fn deadlines(&self) -> Deadlines {
        self.app.deadlines.read()
    }

    /// The budgets callers propagated since the last take, then starts over.
    pub fn take_deadlines(&self) -> Deadlines {
        self.app.deadlines.take()
    }

    /// Starts the per-caller counts, the budgets and the dependency's counts over.
    pub fn reset(&self) {
        lock(&self.app.callers).clear();
        self.app.deadlines.take();
        self.app.dependency.reset();
    }
}

/// A [`FakeHttp`] served on a loopback port; dereferences to it.
#[derive(Debug)]
pub struct FakeHttpDependency {
    http: FakeHttp,
    server: Server,
}

impl FakeHttpDependency {
    /// A healthy dependency named `name` on a free loopback port, answering 200 at once.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound.
    pub async fn start(name: impl Into<std::sync::Arc<str>>) -> Self {
        FakeHttp::new(FakeDependency::new(name)).start().await
    }

    /// The URL of `path` on it: `http://127.0.0.1:PORT{path}`.
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    /// Where it listens.
    #[must_use]
    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.addr
    }

    /// Stops accepting and waits for the open connections to finish.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}

impl std::ops::Deref for FakeHttpDependency {
    type Target = FakeHttp;

    fn deref(&self) -> &FakeHttp {
        &self.http
    }
}

fn count(app: &App, caller: &str, status: StatusCode) {
    let mut callers = lock(&app.callers);
    let caller = cut(caller, MAX_CALLER_LEN);
    let key = if callers.contains_key(caller) || callers.len() < MAX_CALLERS {
        caller
    } else {
        OTHER_CALLERS
    };
    let entry = callers.entry(key.to_owned()).or_default();
    entry.received += 1;
    match status {
        StatusCode::SERVICE_UNAVAILABLE => entry.failed += 1,
        StatusCode::TOO_MANY_REQUESTS => entry.rate_limited += 1,
        _ => entry.ok += 1,
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

async fn answer(
    State(app): State<Arc<App>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    app.deadlines.record(budget_of(&headers));
    let caller = headers
        .get(CALLER_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or(UNNAMED_CALLER);
    let (response, status) = match app
        .dependency
        .call_with(|| (app.respond)(&method, &uri))
        .await
    {
        // Counted as answered by the responder, whatever its status.
        Ok(response) => (response, StatusCode::OK),
        Err(FakeError::RateLimited { retry_after, .. }) => (
            (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", whole_seconds(retry_after).to_string())],
                "too many requests",
            )
                .into_response(),
            StatusCode::TOO_MANY_REQUESTS,
        ),
        Err(_) => (
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable").into_response(),
            StatusCode::SERVICE_UNAVAILABLE,
        ),
    };
    count(&app, caller, status);
    response
}

async fn switch(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body);
    match (app.parse_mode)(text.trim()) {
        Ok(behaviour) => {
            let said = format!("{}: {behaviour}\n", app.dependency.name());
            app.dependency.set(behaviour);
            (StatusCode::OK, said).into_response()
        }
        Err(message) => (StatusCode::BAD_REQUEST, message + "\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> FakeHttp {
        FakeHttp::new(FakeDependency::new("test"))
    }

    #[test]
    fn a_client_naming_a_new_caller_per_request_does_not_grow_the_map() {
        let fake = app();
        for n in 0..10_000 {
            count(&fake.app, &format!("caller-{n}"), StatusCode::OK);
        }
        let calls = fake.callers();
        assert_eq!(calls.len(), MAX_CALLERS + 1);
        assert_eq!(calls[OTHER_CALLERS].received, 10_000 - MAX_CALLERS as u64);
        // The first callers keep their own counts, and nothing is lost.
        assert_eq!(calls["caller-0"].received, 1);
        assert_eq!(calls.values().map(|c| c.received).sum::<u64>(), 10_000);
    }

    #[test]
    fn a_known_caller_keeps_its_own_count_after_the_bound_is_reached() {
        let fake = app();
        for n in 0..MAX_CALLERS + 5 {
            count(&fake.app, &format!("caller-{n}"), StatusCode::OK);
        }
        count(&fake.app, "caller-3", StatusCode::SERVICE_UNAVAILABLE);
        let calls = fake.callers();
        assert_eq!(calls["caller-3"].received, 2);
        assert_eq!(calls["caller-3"].failed, 1);
    }

    #[test]
    fn budgets_keep_four_numbers_and_start_over_when_taken() {
        let fake = app();
        let deadlines = &fake.app.deadlines;
        let mut headers = HeaderMap::new();
        for ms in [120u64, 80, 150] {
            headers.insert("x-deadline-ms", ms.into());
            deadlines.record(budget_of(&headers));
        }
        deadlines.record(budget_of(&HeaderMap::new()));
        headers.insert("x-deadline-ms", "soon".parse().unwrap());
        deadlines.record(budget_of(&headers));
        assert_eq!(fake.deadlines(), deadlines.read());
        let taken = fake.take_deadlines();
        assert_eq!(taken.with_budget, 3);
        assert_eq!(taken.without_budget, 2);
        assert_eq!(taken.min, Duration::from_millis(80));
        assert_eq!(taken.max, Duration::from_millis(150));
        assert_eq!(taken.mean(), Some(Duration::from_millis(350) / 3));
        assert_eq!(fake.take_deadlines(), Deadlines::default());
    }

    #[test]
    fn the_smaller_of_both_deadline_headers_is_the_budget() {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-timeout", "250m".parse().unwrap());
        assert_eq!(budget_of(&headers), Some(Duration::from_millis(250)));
        headers.insert("x-deadline-ms", "300".parse().unwrap());
        assert_eq!(budget_of(&headers), Some(Duration::from_millis(250)));
        headers.insert("x-deadline-ms", "100".parse().unwrap());
        assert_eq!(budget_of(&headers), Some(Duration::from_millis(100)));
    }

    #[test]
    fn a_long_caller_name_is_cut_at_a_character_boundary() {
        let fake = app();
        let long = "é".repeat(100);
        count(&fake.app, &long, StatusCode::OK);
        let calls = fake.callers();
        let name = calls.keys().next().unwrap();
        assert!(name.len() <= MAX_CALLER_LEN);
        assert!(name.chars().all(|c| c == 'é'));
    }
}
