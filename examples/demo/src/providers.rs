//! The service's dependencies, faked as real HTTP servers on loopback: the search provider, the
//! notifier and the session store. Each one's behaviour can be switched while it runs
//! ([`Mode`]), and each counts the requests it received, per calling instance (the `x-caller`
//! header), the most it ever had in flight at once, and the budgets its callers gave it (the
//! `x-deadline-ms` header the service's `PropagateDeadlineLayer` sets: [`Budgets`]).
//!
//! A running provider can also be switched from outside with `POST /_mode` and a body such as
//! `healthy`, `slow 800ms`, `failing` or `429 5s` (see [`Mode::parse`]).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Serialize;
use tokio::net::TcpListener;

use crate::server::{ServeLimits, Server};

/// The shortest delay of [`Mode::Slow`].
pub const SLOWEST_FLOOR: Duration = Duration::from_millis(50);
/// The longest delay of [`Mode::Slow`].
pub const SLOWEST_CEILING: Duration = Duration::from_secs(5);

/// How a fake provider behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Mode {
    /// Answers 200 after its usual latency.
    Healthy,
    /// Answers 200 after `delay` (between 50 ms and 5 s).
    Slow {
        /// How long each answer takes.
        delay: Duration,
    },
    /// Answers 503 at once, to everything.
    Failing,
    /// Answers 429 with `Retry-After` at once.
    RateLimited {
        /// The `Retry-After` it sends (whole seconds).
        retry_after: Duration,
    },
}

impl Mode {
    /// A slow provider, its delay kept between 50 ms and 5 s.
    pub fn slow(delay: Duration) -> Self {
        Self::Slow {
            delay: delay.clamp(SLOWEST_FLOOR, SLOWEST_CEILING),
        }
    }

    /// A provider answering 429 with `Retry-After: retry_after` (rounded up to whole seconds,
    /// as the header carries).
    pub fn rate_limited(retry_after: Duration) -> Self {
        let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
        Self::RateLimited {
            retry_after: Duration::from_secs(secs.max(1)),
        }
    }

    /// Parses `healthy`, `slow 800ms`, `failing` or `429 5s`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut words = text.split_whitespace();
        let mode = words.next().unwrap_or_default();
        let arg = words.next();
        let duration = |arg: Option<&str>| -> Result<Duration, String> {
            let arg = arg.ok_or_else(|| format!("`{mode}` needs a duration, such as `800ms`"))?;
            let (digits, unit) = arg
                .find(|c: char| !c.is_ascii_digit())
                .map_or((arg, "ms"), |at| arg.split_at(at));
            let n: u64 = digits
                .parse()
                .map_err(|_| format!("`{arg}` is not a duration such as `800ms` or `5s`"))?;
            match unit {
                "ms" => Ok(Duration::from_millis(n)),
                "s" => Ok(Duration::from_secs(n)),
                other => Err(format!("unknown unit `{other}`: use `ms` or `s`")),
            }
        };
        match mode {
            "healthy" => Ok(Self::Healthy),
            "slow" => Ok(Self::slow(duration(arg)?)),
            "failing" | "down" => Ok(Self::Failing),
            "429" | "rate_limited" => Ok(Self::rate_limited(duration(arg)?)),
            other => Err(format!(
                "unknown mode `{other}`: use `healthy`, `slow 800ms`, `failing` or `429 5s`"
            )),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Healthy => f.write_str("healthy"),
            Self::Slow { delay } => write!(f, "slow ({} ms)", delay.as_millis()),
            Self::Failing => f.write_str("failing (503)"),
            Self::RateLimited { retry_after } => {
                write!(f, "429, Retry-After: {}", retry_after.as_secs())
            }
        }
    }
}

/// What one caller sent a provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Calls {
    /// Requests received.
    pub received: u64,
    /// Answered 2xx (or the session store's 404: that user has no session).
    pub ok: u64,
    /// Answered 503.
    pub failed: u64,
    /// Answered 429.
    pub rate_limited: u64,
}

impl Calls {
    /// The calls made since `before`.
    pub fn since(&self, before: &Calls) -> Calls {
        Calls {
            received: self.received.saturating_sub(before.received),
            ok: self.ok.saturating_sub(before.ok),
            failed: self.failed.saturating_sub(before.failed),
            rate_limited: self.rate_limited.saturating_sub(before.rate_limited),
        }
    }
}

/// The budgets a provider was given (the `x-deadline-ms` header), over some span of calls: a
/// count, the least, the most and the sum, so a provider keeps four numbers however long it
/// runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Budgets {
    /// Requests that carried a budget.
    pub with_budget: u64,
    /// Requests that carried none (or one that did not parse).
    pub without_budget: u64,
    /// The least budget received.
    pub min: Duration,
    /// The most budget received.
    pub max: Duration,
    /// The budgets' sum, for the mean.
    pub total: Duration,
}

impl Budgets {
    /// The mean budget received, if any was.
    pub fn mean(&self) -> Option<Duration> {
        let n = u32::try_from(self.with_budget).ok().filter(|n| *n > 0)?;
        Some(self.total / n)
    }
}

/// [`Budgets`] as a provider keeps them: atomics, reset by [`FakeProvider::take_budgets`].
#[derive(Debug)]
struct BudgetCounter {
    with_budget: AtomicU64,
    without_budget: AtomicU64,
    min_us: AtomicU64,
    max_us: AtomicU64,
    total_us: AtomicU64,
}

impl Default for BudgetCounter {
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

impl BudgetCounter {
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

    /// What was recorded since the last take, then starts over.
    fn take(&self) -> Budgets {
        let with_budget = self.with_budget.swap(0, Ordering::Relaxed);
        let min = self.min_us.swap(u64::MAX, Ordering::Relaxed);
        Budgets {
            with_budget,
            without_budget: self.without_budget.swap(0, Ordering::Relaxed),
            min: Duration::from_micros(if with_budget == 0 { 0 } else { min }),
            max: Duration::from_micros(self.max_us.swap(0, Ordering::Relaxed)),
            total: Duration::from_micros(self.total_us.swap(0, Ordering::Relaxed)),
        }
    }
}

/// The budget a request carried: `x-deadline-ms`, as the service's `DeadlineLayer` reads it.
fn budget_of(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(policy::layer::deadline::DEADLINE_MS_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(policy::layer::deadline::parse_ms_header)
}

struct Shared {
    name: &'static str,
    usual_latency: Duration,
    mode: Mutex<Mode>,
    calls: Mutex<BTreeMap<String, Calls>>,
    in_flight: AtomicU32,
    max_in_flight: AtomicU32,
    budgets: BudgetCounter,
}

// A poisoned lock means a panic elsewhere while it was held; the value is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A fake provider: a real HTTP server on a loopback port.
pub struct FakeProvider {
    shared: Arc<Shared>,
    server: Server,
}

impl fmt::Debug for FakeProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeProvider")
            .field("name", &self.shared.name)
            .field("addr", &self.server.addr())
            .field("mode", &self.mode())
            .finish()
    }
}

struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: &Arc<Shared>) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::AcqRel);
        Self(shared.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl FakeProvider {
    /// Starts a provider named `name` on a free loopback port, answering after
    /// `usual_latency` while healthy.
    pub async fn start(name: &'static str, usual_latency: Duration) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            name,
            usual_latency,
            mode: Mutex::new(Mode::Healthy),
            calls: Mutex::default(),
            in_flight: AtomicU32::new(0),
            max_in_flight: AtomicU32::new(0),
            budgets: BudgetCounter::default(),
        });
        let app = Router::new()
            .route("/_mode", post(switch))
            .fallback(answer)
            .with_state(shared.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        // The service's client keeps idle connections for 30 s: a provider keeps them longer,
        // so it never closes one the client is about to reuse.
        let limits = ServeLimits {
            header_read_timeout: Duration::from_secs(60),
            ..ServeLimits::default()
        };
        let server = Server::spawn(listener, app, format!("the fake {name} provider"), limits)?;
        Ok(Self { shared, server })
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        self.shared.name
    }

    /// Its base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// How it behaves now.
    pub fn mode(&self) -> Mode {
        *lock(&self.shared.mode)
    }

    /// Switches its behaviour; requests already waiting keep the behaviour they started with.
    pub fn set_mode(&self, mode: Mode) {
        *lock(&self.shared.mode) = mode;
    }

    /// The calls received so far, per caller: at most [`MAX_CALLERS`] names, the rest counted
    /// under [`OTHER_CALLERS`].
    pub fn calls(&self) -> BTreeMap<String, Calls> {
        lock(&self.shared.calls).clone()
    }

    /// The most requests it had in flight at once since the last call (then starts over).
    pub fn take_max_in_flight(&self) -> u32 {
        let now = self.shared.in_flight.load(Ordering::Acquire);
        self.shared.max_in_flight.swap(now, Ordering::AcqRel)
    }

    /// The budgets its callers gave it since the last call (then starts over).
    pub fn take_budgets(&self) -> Budgets {
        self.shared.budgets.take()
    }

    /// Stops accepting and waits for the open connections to finish.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}

/// The most callers a provider keeps apart; calls from any further caller are counted under
/// [`OTHER_CALLERS`]. The `x-caller` header is the client's to choose, so without a bound a client
/// sending a new name per request would grow the map without end.
pub const MAX_CALLERS: usize = 16;

/// The longest caller name kept, in bytes; a longer name is cut at a character boundary.
pub const MAX_CALLER_LEN: usize = 64;

/// The name under which calls past [`MAX_CALLERS`] distinct callers are counted.
pub const OTHER_CALLERS: &str = "(other callers)";

fn count(shared: &Shared, caller: &str, status: StatusCode) {
    let mut calls = lock(&shared.calls);
    let caller = cut(caller, MAX_CALLER_LEN);
    let key = if calls.contains_key(caller) || calls.len() < MAX_CALLERS {
        caller
    } else {
        OTHER_CALLERS
    };
    if !calls.contains_key(key) {
        calls.insert(key.to_owned(), Calls::default());
    }
    let Some(entry) = calls.get_mut(key) else {
        return;
    };
    entry.received += 1;
    match status.as_u16() {
        // 404 from the session store is an answer too: that user has no session.
        200..=299 | 404 => entry.ok += 1,
        429 => entry.rate_limited += 1,
        _ => entry.failed += 1,
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
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let _in_flight = InFlight::enter(&shared);
    shared.budgets.record(budget_of(&headers));
    let caller = headers
        .get("x-caller")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown")
        .to_owned();
    let mode = *lock(&shared.mode);
    let response = match mode {
        Mode::Healthy => {
            tokio::time::sleep(shared.usual_latency).await;
            ok(&method, &uri)
        }
        Mode::Slow { delay } => {
            tokio::time::sleep(delay).await;
            ok(&method, &uri)
        }
        Mode::Failing => (StatusCode::SERVICE_UNAVAILABLE, "unavailable").into_response(),
        Mode::RateLimited { retry_after } => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", retry_after.as_secs().to_string())],
            "too many requests",
        )
            .into_response(),
    };
    count(&shared, &caller, response.status());
    response
}

/// The users the fake session store has a session for: 1 to 1,000. Any other user's session
/// has ended (signed out or expired): the store answers 404.
pub const USERS_WITH_A_SESSION: std::ops::RangeInclusive<u64> = 1..=1000;

/// A 200 with a small JSON body; `GET /sessions/{user}` answers a session for that user, or a
/// 404 when that user has none ([`USERS_WITH_A_SESSION`]).
fn ok(method: &Method, uri: &Uri) -> Response {
    if method == Method::GET
        && let Some(user) = uri.path().strip_prefix("/sessions/")
        && let Ok(user) = user.parse::<u64>()
    {
        if !USERS_WITH_A_SESSION.contains(&user) {
            return (
                StatusCode::NOT_FOUND,
                [("content-type", "application/json")],
                "{\"error\":\"no session\"}",
            )
                .into_response();
        }
        let body = serde_json::json!({ "user": user, "can_write": true });
        return (
            StatusCode::OK,
            [("content-type", "application/json")],
            body.to_string(),
        )
            .into_response();
    }
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        "{\"ok\":true}",
    )
        .into_response()
}

async fn switch(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body);
    match Mode::parse(text.trim()) {
        Ok(mode) => {
            *lock(&shared.mode) = mode;
            (StatusCode::OK, format!("{}: {mode}\n", shared.name)).into_response()
        }
        Err(message) => (StatusCode::BAD_REQUEST, message + "\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared {
            name: "test",
            mode: Mutex::new(Mode::Healthy),
            usual_latency: Duration::ZERO,
            calls: Mutex::new(BTreeMap::new()),
            in_flight: AtomicU32::new(0),
            max_in_flight: AtomicU32::new(0),
            budgets: BudgetCounter::default(),
        }
    }

    #[test]
    fn a_client_naming_a_new_caller_per_request_does_not_grow_the_map() {
        let shared = shared();
        for n in 0..10_000 {
            count(&shared, &format!("caller-{n}"), StatusCode::OK);
        }
        let calls = lock(&shared.calls);
        assert_eq!(calls.len(), MAX_CALLERS + 1);
        assert_eq!(calls[OTHER_CALLERS].received, 10_000 - MAX_CALLERS as u64);
        // The first callers keep their own counts, and nothing is lost.
        assert_eq!(calls["caller-0"].received, 1);
        assert_eq!(calls.values().map(|c| c.received).sum::<u64>(), 10_000);
    }

    #[test]
    fn a_known_caller_keeps_its_own_count_after_the_bound_is_reached() {
        let shared = shared();
        for n in 0..MAX_CALLERS + 5 {
            count(&shared, &format!("caller-{n}"), StatusCode::OK);
        }
        count(&shared, "caller-3", StatusCode::SERVICE_UNAVAILABLE);
        let calls = lock(&shared.calls);
        assert_eq!(calls["caller-3"].received, 2);
        assert_eq!(calls["caller-3"].failed, 1);
    }

    #[test]
    fn budgets_keep_four_numbers_and_start_over_when_taken() {
        let shared = shared();
        let mut headers = HeaderMap::new();
        for ms in [120u64, 80, 150] {
            headers.insert("x-deadline-ms", ms.into());
            shared.budgets.record(budget_of(&headers));
        }
        shared.budgets.record(budget_of(&HeaderMap::new()));
        headers.insert("x-deadline-ms", "soon".parse().unwrap());
        shared.budgets.record(budget_of(&headers));
        let taken = shared.budgets.take();
        assert_eq!(taken.with_budget, 3);
        assert_eq!(taken.without_budget, 2);
        assert_eq!(taken.min, Duration::from_millis(80));
        assert_eq!(taken.max, Duration::from_millis(150));
        assert_eq!(taken.mean(), Some(Duration::from_millis(350) / 3));
        assert_eq!(shared.budgets.take(), Budgets::default());
    }

    #[test]
    fn a_long_caller_name_is_cut_at_a_character_boundary() {
        let shared = shared();
        let long = "é".repeat(100);
        count(&shared, &long, StatusCode::OK);
        let calls = lock(&shared.calls);
        let name = calls.keys().next().unwrap();
        assert!(name.len() <= MAX_CALLER_LEN);
        assert!(name.chars().all(|c| c == 'é'));
    }
}
