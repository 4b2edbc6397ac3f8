//! The live dashboard, as an axum [`Router`] to mount in your own service (feature
//! `dashboard`).
//!
//! One line adds two routes:
//!
//! | route        | answers                                                                     |
//! |--------------|-----------------------------------------------------------------------------|
//! | `/policy`    | the registry's [`Snapshot`] as JSON (`Cache-Control: no-store`)              |
//! | `/dashboard` | a page that renders it (the call trees with both worst cases, tables with the last five minutes as sparklines) and reads it again every second |
//!
//! The page is embedded in the binary (no files to ship) and reads the JSON beside it by a
//! relative address, so the router works merged at the root (`/dashboard`, `/policy`) or nested
//! under a prefix (`.nest("/ops", dashboard::router())`: `/ops/dashboard`, `/ops/policy`).
//! Neither route needs any state of yours: the router is generic over the state, so it merges
//! into a `Router<AppState>` too.
//!
//! ```
//! use axum::Router;
//! use axum::routing::get;
//! # use tower::ServiceExt as _;
//!
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .merge(velocity_policy_runtime::dashboard::router());
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! # let request = axum::http::Request::get("/policy").body(axum::body::Body::empty()).unwrap();
//! # let response = app.oneshot(request).await.unwrap();
//! # assert_eq!(response.status(), 200);
//! # let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
//! # let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
//! # assert_eq!(json["version"], 1);
//! # });
//! ```
//!
//! # The JSON
//!
//! `/policy` is [`Registry::snapshot`] serialised, followed by the dashboard's own `history`
//! ([`Registry::history`]) and, with `chaos`, the drills ([`Registry::chaos_snapshots`]): an object whose first field is
//! `"version": 1` ([`Snapshot::VERSION`], raised by any change that could break a reader; new
//! fields may be added within a version). Every duration is a number of milliseconds
//! (fractional below one) under a name ending in `_ms`. Every row is named by its policy's name
//! (breakers, bulkheads, retry policies, hedges, rate limiters, background pools) or, for what the
//! attributes make per function (shedders, fallbacks, isolated pools, poll monitors), by the
//! operation's own name in
//! `display_name`, with the registry's unique `module::path::operation` in `name`. Its fields:
//!
//! | field        | one entry per                            | holds |
//! |--------------|------------------------------------------|-------|
//! | `breakers`   | breaker ([`BreakerSnapshot`](crate::breaker::BreakerSnapshot)) | `name`, `state` (`closed`, `open`, `probation`), `open_for_ms`, `last_cause` (`cause`: `failures`, `failure_ratio`, `probe_failed`, `tripped`, `shared`, with its numbers), `config` (`open_after`, `cooldown_ms`...), `openings`, `refusals`, `failures`, `caller_expiries` (calls that expired under a budget their caller shortened: never failures) |
//! | `bulkheads`  | bulkhead ([`BulkheadSnapshot`](crate::bulkhead::BulkheadSnapshot)) | `name`, `max_concurrent`, `max_queued`, `running`, `queued`, `load`, `refused_full`, `refused_queue_timeout`, `adaptive` (an adaptive bulkhead's `min`, `max`, `estimate`, `latency_noload_ms`, `latency_recent_ms`, `queue_estimate`, `windows`; `null` for a fixed one) |
//! | `retries`    | retry policy ([`RetrySnapshot`](crate::retry::RetrySnapshot)) | `name`, `attempts`, `retries`, `stopped_by_allowance`, `stopped_by_deadline`, `stopped_by_pushback`, `exhausted`, `allowance` |
//! | `hedges`     | hedging policy ([`HedgeSnapshot`](crate::hedge::HedgeSnapshot)) | `name`, `after` (`50ms` or `p95`), `delay_ms` (what a call waits now; `null` while a percentile has too few calls), `max`, `calls`, `started`, `won`, `lost`, `refused`, `stopped_by_budget`, `stopped_by_deadline` |
//! | `shedders`   | shedder ([`ShedderSnapshot`](crate::shedding::ShedderSnapshot)) | `name`, `display_name`, `thresholds`, `shed_load` and `shed_budget` per class |
//! | `limiters`   | rate limiter ([`LimiterSnapshot`](crate::limiter::LimiterSnapshot)) | `name`, `config` (its rate and fail modes), `admitted`, `refused`, what it decided while its store failed, `degraded` |
//! | `fallbacks`  | operation with a fallback ([`FallbackSnapshot`](crate::fallback::FallbackSnapshot)) | `operation`, `display_name`, `answered_by`, `refused`, `expired`, `failed`, `stale` |
//! | `isolated`   | pool for CPU work ([`IsolatedPoolSnapshot`](crate::isolate::IsolatedPoolSnapshot)) | `name`, `display_name`, `kind`, `slots` (a bulkhead's fields), `finished`, `panicked`, `unwaited` |
//! | `polls`      | poll monitor ([`PollMonitorSnapshot`](crate::isolate::PollMonitorSnapshot)) | `name`, `display_name`, `budget_ms`, `polls`, `over_budget`, `longest_ms` |
//! | `deferred`   | (one object: the process's deferred work) | `queued`, `running`, `finished`, `failed`, `panicked`, `abandoned`... |
//! | `background` | live background pool                     | `name`, its slots, `load`, `shed_load`, `shed_pressure` and its tasks' outcomes |
//! | `queues`     | live durable queue ([`QueueSnapshot`](crate::queue::QueueSnapshot), feature `redis`) | `name`, `max_len`, the stream's `length`, `pending`, `consumers` (each `consumer` and its `pending`), `oldest_age_ms`, `dead_letters` as last read (`read`), and this instance's `enqueued`, `refused_full`, `refused_unavailable`, `refused_shed`, `completed`, `failed`, `redelivered`, `dead_lettered`, `abandoned`, `running` |
//! | `store`      | (one object: the breaker store)          | `kind`, `healthy`, `instance`, `sent`, `failed`, `received` |
//! | `chaos`      | fault-injection drill ([`ChaosSnapshot`](crate::chaos::ChaosSnapshot), feature `chaos`; the field is absent without it) | `name`, `on`, `active` (on, inside its window and on this instance), `faults` (each `kind`: `latency`, `error`, `refuse` or `status_429`; `fault` with its settings; `rate`; `injected`), `during` (`from_ms`, `until_ms`), `instances`, `skipped` |
//! | `conflicts`  | second configuration refused             | `kind`, `name`, `first` and `second` (`origin`, `settings`) |
//! | `operations` | operation's deadline ([`OperationSnapshot`](crate::deadline::OperationSnapshot)) | `name`, `display_name`, `deadline_ms` and `min_budget_ms` in force, `compiled_deadline_ms`, `compiled_min_budget_ms` |
//! | `calls`      | (one object: the calls seen between annotated operations, [`CallsSnapshot`](crate::registry::CallsSnapshot)) | `edges` (each `parent`, `null` for an entry point, `child`, and `under_deadline` for an entry point), `dropped` (edges past the table's bound), `request_budget_ms`, `request_min_budget_ms` |
//! | `tree`       | (one object, this route only: the calls composed, by `velocity-policy-lang`'s [`bound`](velocity_policy_lang::bound), with the numbers in force) | `trees` (each `entry`, `request_ms`, `under_deadline`, `bound_ms` with propagation and what sets it in `tightest`, `alone_ms` if each timeout stood alone and how in `sum`, `difference_ms`, `root` with its `children` (each `operation`, `seen`, `deadline_ms`, `attempts`, `bound_ms`, `alone_ms`, `cycle`), `paths`), and `findings` (each `code`, `operation`, `message`, `help`) |
//! | `history`    | (one object: the last five minutes, [`HistorySnapshot`](crate::history::HistorySnapshot)) | `interval_ms`, `at_unix_ms`, and one series per breaker, bulkhead, shedder and operation: a column per figure (calls, refusals by kind, the p99 and its bound, states, levels), aligned with `at_unix_ms` |
//! | `overrides`  | (one object: the overrides in force, feature `overrides`; [`OverridesSnapshot`](crate::registry::OverridesSnapshot)) | `environment`, `dir`, `applied`, `refusals`, `applied_at_unix_ms`, `settings` (each `kind`, `name`, `setting`, `value`, `compiled`, `file`, `line`, `column`), `refused` (`at_unix_ms`, `codes`, `rendered`: `policy check`'s message, `fleet`), `fleet` (when the set came from the fleet through Redis instead of the files: `version`, `publisher`, `published_at_unix_ms`) |
//!
//! # The trees
//!
//! Every call of an annotated operation notes, at its first poll, the operation being polled
//! around it: its caller. The registry keeps each (caller, operation) edge once, at most
//! [`MAX_EDGES`](crate::registry::MAX_EDGES) of them (past that, counted in `calls.dropped`
//! and logged, never stored). The page composes them into one tree per entry point (an
//! operation called with no annotated operation above it) with the numbers in force in the
//! registry: each node's bound (its deadline clamped by its parents') beside the worst p99 of
//! its last minute (red when over), and the tree's two worst cases, with deadline propagation
//! and if each timeout stood alone, as `policy explain` gives them from the code. What it
//! cannot see: deferred and background work (it runs on its own, after the response; its calls
//! are trees of their own), and calls that did not happen yet.
//!
//! # The last five minutes
//!
//! Serving the routes starts a sampler on the runtime that serves them: every two seconds it
//! takes a point of every breaker (its state, refusals, failures, openings), bulkhead (calls in
//! flight and queued, refusals), shedder (shed for load and for budget) and annotated operation
//! (calls, outcomes, refusals by kind, its p99 in the interval, its deadline in force) into a
//! ring of 150 points per series, kept in the registry: no other service, nothing sent. From
//! then on each annotated call reads the clock twice and adds to three counters (see
//! [`history`](crate::history)).
//!
//! # Which registry
//!
//! [`router`] serves [`Registry::global`], the one the attribute macros and `.policy`
//! operations use; [`router_for`] serves another (say, a test's). Deferred work and background
//! pools are the process's whichever registry is asked.
//!
//! # What it reveals, and who may see it
//!
//! The dashboard has no authentication of its own: it is a `Router`, and whoever can reach its
//! routes reads every breaker, bulkhead and queue of the service. Mount it where only operators
//! reach it: on an admin listener bound to a private address, or behind the same authentication
//! layer as your other internal routes. With axum, nest it under a prefix and put the check on
//! that nested router only, so nothing else changes:
//!
//! ```
//! use axum::Router;
//! use axum::extract::Request;
//! use axum::http::{StatusCode, header};
//! use axum::middleware::{self, Next};
//! use axum::response::Response;
//!
//! // Your own check: a bearer token from the environment, an mTLS identity, an SSO session.
//! async fn operators_only(request: Request, next: Next) -> Result<Response, StatusCode> {
//!     let expected = std::env::var("OPS_TOKEN").map_err(|_| StatusCode::FORBIDDEN)?;
//!     let sent = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
//!     match sent.and_then(|v| v.strip_prefix("Bearer ")) {
//!         Some(token) if token == expected => Ok(next.run(request).await),
//!         _ => Err(StatusCode::UNAUTHORIZED),
//!     }
//! }
//!
//! let ops = velocity_policy_runtime::dashboard::router().layer(middleware::from_fn(operators_only));
//! let app: Router = Router::new().nest("/ops", ops);
//! # let _ = app;
//! ```
//!
//! Even so, `/policy` leaves out where the policies live and what they say: the overrides'
//! directory, each overridden setting's file, line and column, and `policy check`'s rendering of
//! a refused set (which quotes the file). The numbers in force, their compiled values, and the
//! refusal's codes stay. [`Dashboard::reveal_sources`] puts them back, for a dashboard only
//! trusted people reach.

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use crate::registry::Registry;
use crate::registry::Snapshot;

mod tree;

pub use tree::observed;

/// The page: tables rendered from the JSON beside it, read again every second.
const PAGE: &str = include_str!("dashboard.html");

/// The dashboard's two routes (`/policy`, `/dashboard`) over [`Registry::global`], without
/// file paths or policy text: merge them into your router, or nest them under a prefix. See
/// the [module docs](self).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Dashboard::new().router()
}

/// The same routes over `registry`.
pub fn router_for<S: Clone + Send + Sync + 'static>(registry: &'static Registry) -> Router<S> {
    Dashboard::new().registry(registry).router()
}

/// The dashboard's routes, configured: which registry, and whether `/policy` reveals where the
/// policies live and what they say.
///
/// ```
/// use axum::Router;
/// use velocity_policy_runtime::dashboard::Dashboard;
///
/// // Only operators reach this listener: show them the files too.
/// let admin: Router = Dashboard::new().reveal_sources().router();
/// # let _ = admin;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Dashboard {
    registry: &'static Registry,
    reveal_sources: bool,
}

impl Default for Dashboard {
    fn default() -> Self {
        Self::new()
    }
}

impl Dashboard {
    /// Over [`Registry::global`], without file paths or policy text.
    pub fn new() -> Self {
        Self {
            registry: Registry::global(),
            reveal_sources: false,
        }
    }

    /// Over `registry` instead.
    #[must_use]
    pub fn registry(mut self, registry: &'static Registry) -> Self {
        self.registry = registry;
        self
    }

    /// `/policy` includes the overrides' directory, each overridden setting's file, line and
    /// column, and `policy check`'s rendering of a refused set.
    #[must_use]
    pub fn reveal_sources(mut self) -> Self {
        self.reveal_sources = true;
        self
    }

    /// The two routes. Inside a tokio runtime, this also starts the history's sampler for the
    /// registry (otherwise the first read of `/policy` does).
    pub fn router<S: Clone + Send + Sync + 'static>(self) -> Router<S> {
        self.registry.sample_history_from();
        Router::new()
            .route("/policy", get(move || async move { self.snapshot() }))
            .route("/dashboard", get(|| async { page() }))
    }

    /// The snapshot's JSON, with the observed trees composed, never cached: each refresh is
    /// the state now.
    fn snapshot(self) -> Response {
        self.registry.sample_history_from();
        let snapshot = self.registry.snapshot();
        let served = Served {
            registry: &snapshot,
            history: self.registry.history(),
            #[cfg(feature = "chaos")]
            chaos: self.registry.chaos_snapshots(),
        };
        match serde_json::to_value(&served) {
            Ok(mut value) => {
                if let Some(object) = value.as_object_mut() {
                    object.insert("tree".to_owned(), tree::json(&snapshot, self.registry));
                }
                if !self.reveal_sources {
                    hide_sources(&mut value);
                }
                json(&value)
            }
            Err(error) => unserialisable(&error),
        }
    }
}

/// What `/policy` serves: the registry's [`Snapshot`], and after its fields what the
/// dashboard adds: the `history` and (feature `chaos`) the drills.
#[derive(serde::Serialize)]
struct Served<'a> {
    #[serde(flatten)]
    registry: &'a Snapshot,
    history: crate::history::HistorySnapshot,
    #[cfg(feature = "chaos")]
    chaos: Vec<crate::chaos::ChaosSnapshot>,
}

/// Removes from a serialised [`Snapshot`] where the policies live and what they say.
fn hide_sources(snapshot: &mut serde_json::Value) {
    let Some(overrides) = snapshot
        .get_mut("overrides")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return;
    };
    overrides.remove("dir");
    if let Some(settings) = overrides
        .get_mut("settings")
        .and_then(serde_json::Value::as_array_mut)
    {
        for setting in settings
            .iter_mut()
            .filter_map(serde_json::Value::as_object_mut)
        {
            for key in ["file", "line", "column"] {
                setting.remove(key);
            }
        }
    }
    if let Some(refused) = overrides
        .get_mut("refused")
        .and_then(serde_json::Value::as_object_mut)
    {
        refused.remove("rendered");
    }
}

fn json(snapshot: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(snapshot) {
        Ok(body) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
            .into_response(),
        // Nothing in a snapshot fails to serialise (maps have string keys, floats become
        // `null` at worst); should that change, say so instead of an empty page.
        Err(error) => unserialisable(&error),
    }
}

fn unserialisable(error: &serde_json::Error) -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("the policy snapshot could not be serialised: {error}"),
    )
        .into_response()
}

fn page() -> Response {
    ([(header::CACHE_CONTROL, "no-cache")], Html(PAGE)).into_response()
}
