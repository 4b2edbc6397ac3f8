//! The document service: an axum app whose functions carry the project's own attributes.
//!
//! Saving a document, class by class:
//!
//! | class | work | here |
//! |---|---|---|
//! | critical | authenticate, authorize, validate, the canonical write | [`save_document`] and the functions it awaits |
//! | deferred | analytics, search indexing, activity event, notification | [`record_analytics`], [`index_document`], [`publish_activity`], [`notify_followers`] |
//! | background | an embedding (CPU work) | [`embed_document`] |
//!
//! ```text
//! request → critical work → RESPONSE → deferred work → background work
//! ```
//!
//! Every function binds to the operation of the same name in `policies/demo.policy`, which says
//! its deadline and the breakers, bulkheads and retries around it. Reading a document
//! ([`read_document`]) is the unrelated route: it shares nothing with the search provider, and
//! its latency is the proof that a sick provider costs a bounded amount.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use axum::{Router, middleware};
use serde::{Deserialize, Serialize};
use tower::Layer as _;
use velocity_policy::fallback::{Privileges, degrade};
use velocity_policy::layer::{DeadlineLayer, PropagateDeadline, PropagateDeadlineLayer};
use velocity_policy::{AfterResponseLayer, CallError, DeadlineExceeded, Registry, ResilienceError};

use crate::client::{self, HttpClient};
use crate::dashboard;
use crate::db::{Database, DbError, Document};
use crate::timeline::{self, RequestKey, Timeline};

/// What a provider call keeps of its deadline for itself (reading the answer): the provider is
/// told the current deadline's remaining time minus this.
pub const PROPAGATION_RESERVE: Duration = Duration::from_millis(2);

/// A dependency on the network, as the service sees it: its name (also the name of its
/// breaker), its base URL, and who is calling (the `x-caller` header, one per instance).
///
/// Its client carries the current deadline to the provider (`PropagateDeadlineLayer`:
/// `grpc-timeout` and `x-deadline-ms`, what is left minus [`PROPAGATION_RESERVE`]), so the
/// provider never works longer than we would wait.
#[derive(Debug, Clone)]
pub struct Dependency {
    name: Arc<str>,
    base: Arc<str>,
    caller: Arc<str>,
    client: PropagateDeadline<HttpClient>,
}

impl Dependency {
    /// `name` at `base` (`http://host:port`), called as `caller`.
    pub fn new(name: &str, base: &str, caller: &str, client: HttpClient) -> Self {
        Self {
            name: Arc::from(name),
            base: Arc::from(base.trim_end_matches('/')),
            caller: Arc::from(caller),
            client: PropagateDeadlineLayer::new()
                .reserve(PROPAGATION_RESERVE)
                .layer(client),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One call. A 429 (or a 503 with `Retry-After`) is an instruction, not a failure to
    /// count: it trips the dependency's breaker for exactly that long.
    async fn call(&self, method: Method, path: &str, body: Bytes) -> Result<Bytes, ProviderError> {
        let url = format!("{}{path}", self.base);
        let reply = client::send_through(
            self.client.clone(),
            method,
            &url,
            &[
                ("x-caller", self.caller.as_ref()),
                ("content-type", "application/json"),
            ],
            body,
        )
        .await
        .map_err(|e| ProviderError::Transport(e.to_string()))?;
        if reply.status.is_success() {
            return Ok(reply.body);
        }
        let retry_after = reply
            .header("retry-after")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        match (reply.status, retry_after) {
            (StatusCode::TOO_MANY_REQUESTS, _) | (StatusCode::SERVICE_UNAVAILABLE, Some(_)) => {
                let pause = retry_after.unwrap_or(Duration::from_secs(1));
                // Should we call this at all right now? The dependency just said: not for
                // `pause`. Every instance sharing the breaker hears it too.
                if let Some(breaker) = Registry::global().find_breaker(&self.name) {
                    breaker.trip(
                        pause,
                        format!("{} Retry-After: {}", reply.status, pause.as_secs()),
                    );
                }
                Err(ProviderError::RateLimited(pause))
            }
            (status, _) => Err(ProviderError::Status(status.as_u16())),
        }
    }
}

/// A provider call's failure: the three outcomes stay apart.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// It answered an error status.
    #[error("the provider answered {0}")]
    Status(u16),
    /// It asked us to back off (429, `Retry-After`); the breaker is tripped.
    #[error("the provider asked for a pause of {}s", .0.as_secs())]
    RateLimited(Duration),
    /// The request did not get an answer.
    #[error("{0}")]
    Transport(String),
    /// The work never ran: a breaker, a bulkhead or the budget refused it.
    #[error("{0}")]
    Refused(ResilienceError),
    /// We stopped waiting; the call may have reached the provider.
    #[error("{0}")]
    TimedOut(DeadlineExceeded),
}

impl From<ResilienceError> for ProviderError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for ProviderError {
    fn from(e: DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

impl velocity_policy::Transient for ProviderError {
    /// Worth repeating: a 5xx, a lost connection, an attempt that timed out. Not a 429: the
    /// breaker is tripped, so asking again inside this request would only be refused.
    fn is_transient(&self) -> bool {
        match self {
            Self::Status(status) => *status >= 500,
            Self::Transport(_) | Self::TimedOut(_) => true,
            Self::RateLimited(_) | Self::Refused(_) => false,
        }
    }
}

/// What deferred and background work did, counted.
#[derive(Debug, Default)]
pub struct WorkDone {
    /// Analytics events recorded.
    pub analytics: AtomicU64,
    /// Documents pushed to the search index.
    pub indexed: AtomicU64,
    /// Activity rows written.
    pub activity: AtomicU64,
    /// Notifications delivered.
    pub notified: AtomicU64,
    /// Embeddings computed.
    pub embedded: AtomicU64,
}

/// Everything the service's functions use. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct Services {
    /// The canonical store.
    pub db: Arc<Database>,
    /// The search provider.
    pub search: Dependency,
    /// The notifier.
    pub notifier: Dependency,
    /// The session store.
    pub sessions: Dependency,
    /// Responses finished and deferred work started, in order.
    pub timeline: Timeline,
    /// Deferred and background work done.
    pub work: Arc<WorkDone>,
}

/// A document to save.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewDocument {
    /// Its title (1 to 200 characters).
    pub title: String,
    /// Its text (at most 20,000 characters).
    pub body: String,
}

/// A saved document's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    /// The id.
    pub id: i64,
}

/// Who is asking, as far as the session store knows.
///
/// Two sessions grant the privileges of nobody in particular, and they must not be confused:
/// [`Anonymous`](Session::Anonymous) is the store's answer (this token has no session: signing
/// in again is the fix), [`Degraded`](Session::Degraded) is the fallback's (the store could not
/// answer: retrying is the fix). Work that needs a privilege answers the first 401 and the
/// second 503 with the reason ([`authorize`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Session {
    /// Nobody in particular, as the session store says (the session ended: signed out or
    /// expired): may read public documents, may not write.
    Anonymous,
    /// The privileges of [`Anonymous`](Session::Anonymous) because the session store could not
    /// answer (it failed, was too slow, or its breaker is open): the request may well be
    /// signed in, but for now it is not known to be.
    Degraded {
        /// Why the lookup did not answer, as a short code: `deadline_exceeded`,
        /// `breaker_open` (or another refusal kind), or `failed`.
        because: &'static str,
        /// When asking again may succeed: the breaker's remaining open time, else 1 s.
        retry_after: Duration,
    },
    /// A signed-in user.
    User {
        /// The user.
        id: u64,
        /// Whether they may save documents.
        can_write: bool,
    },
}

impl Privileges for Session {
    fn is_within(&self, ceiling: &Self) -> bool {
        match (self, ceiling) {
            (Session::Anonymous | Session::Degraded { .. }, _) => true,
            (
                Session::User { id, can_write },
                Session::User {
                    id: c,
                    can_write: c_write,
                },
            ) => id == c && (!can_write || *c_write),
            (Session::User { .. }, Session::Anonymous | Session::Degraded { .. }) => false,
        }
    }

    fn least() -> Self {
        Session::Anonymous
    }
}

/// A failure on the critical path, and the response it becomes.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// No valid token: 401.
    #[error("sign in first: {0}")]
    Unauthenticated(&'static str),
    /// The token is valid but its session could only be answered as anonymous because the
    /// session store could not answer ([`Session::Degraded`]): 503, marked `x-degraded:
    /// anonymous` with the reason in `x-degraded-reason` and a `Retry-After`. Not a 401: the
    /// client should retry, not sign in again.
    #[error(
        "the session store could not confirm the session ({because}): retry in a moment; signing in again will not help"
    )]
    Degraded {
        /// Why the lookup did not answer.
        because: &'static str,
        /// When to retry.
        retry_after: Duration,
    },
    /// Signed in, not allowed: 403.
    #[error("not allowed to write")]
    Forbidden,
    /// The document is not acceptable: 422.
    #[error("invalid document: {0}")]
    Invalid(&'static str),
    /// The work never ran (a full bulkhead, an open breaker, too little budget): 503, with
    /// the refusal's kind in `x-refusal`.
    #[error("{0}")]
    Refused(ResilienceError),
    /// We stopped waiting: 504.
    #[error("{0}")]
    TimedOut(DeadlineExceeded),
    /// The store failed: 500.
    #[error("{0}")]
    Store(String),
}

impl From<ResilienceError> for ServiceError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for ServiceError {
    fn from(e: DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

impl From<SessionError> for ServiceError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::Refused(refusal) => Self::Refused(refusal),
            SessionError::TimedOut(expired) => Self::TimedOut(expired),
            SessionError::Store(detail) => Self::Store(detail),
        }
    }
}

impl From<DbError> for ServiceError {
    fn from(e: DbError) -> Self {
        Self::Store(e.to_string())
    }
}

impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let status = match &self {
            Self::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            Self::Degraded { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Refused(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::TimedOut(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let mut response = (
            status,
            Json(serde_json::json!({ "error": self.to_string() })),
        )
            .into_response();
        let headers = response.headers_mut();
        match &self {
            Self::Degraded {
                because,
                retry_after,
            } => {
                headers.insert("x-degraded", HeaderValue::from_static("anonymous"));
                headers.insert("x-degraded-reason", HeaderValue::from_static(because));
                headers.insert(
                    "retry-after",
                    HeaderValue::from(retry_after_secs(*retry_after)),
                );
            }
            Self::Refused(refusal) => {
                headers.insert(
                    "x-refusal",
                    HeaderValue::from_static(refusal.kind().as_str()),
                );
                if let Some(after) = refusal.retry_after() {
                    headers.insert("retry-after", HeaderValue::from(retry_after_secs(after)));
                }
            }
            _ => {}
        }
        response
    }
}

/// `Retry-After` carries whole seconds: rounded up, at least 1.
fn retry_after_secs(after: Duration) -> u64 {
    (after.as_secs() + u64::from(after.subsec_nanos() > 0)).max(1)
}

/// The session lookup's failure.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The store failed or answered nonsense.
    #[error("session store: {0}")]
    Store(String),
    /// The lookup never ran (the `sessions` breaker is open).
    #[error("{0}")]
    Refused(ResilienceError),
    /// The store did not answer in time.
    #[error("{0}")]
    TimedOut(DeadlineExceeded),
}

impl From<ResilienceError> for SessionError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for SessionError {
    fn from(e: DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

/// A deferred or background task's failure, logged by the runtime with the task's name.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WorkError(String);

// ---- tokens ------------------------------------------------------------------------------------

const TOKEN_KEY: u64 = 0x5eed_1e55_c0ff_ee00;

fn signature(user: u64) -> u64 {
    // FNV-1a over the key and the user: enough to tell a made-up token from ours in a demo.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in TOKEN_KEY
        .to_le_bytes()
        .iter()
        .chain(user.to_le_bytes().iter())
    {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The bearer token of `user`.
pub fn token_for(user: u64) -> String {
    format!("u{user}.{:016x}", signature(user))
}

// ---- critical ----------------------------------------------------------------------------------

/// Authentication: the token names a user and carries that user's signature.
#[velocity_policy::critical]
pub async fn authenticate(token: Option<String>) -> Result<u64, ServiceError> {
    let token = token.ok_or(ServiceError::Unauthenticated("no bearer token"))?;
    let (user, sig) = token
        .strip_prefix('u')
        .and_then(|t| t.split_once('.'))
        .ok_or(ServiceError::Unauthenticated("malformed token"))?;
    let user: u64 = user
        .parse()
        .map_err(|_| ServiceError::Unauthenticated("malformed token"))?;
    if u64::from_str_radix(sig, 16).ok() != Some(signature(user)) {
        return Err(ServiceError::Unauthenticated("bad signature"));
    }
    Ok(user)
}

#[derive(Deserialize)]
struct SessionRecord {
    user: u64,
    can_write: bool,
}

/// The session of an authenticated user, from the session store (a network hop): the user's,
/// or [`Session::Anonymous`] when the store says the session ended (a 404). When the store
/// fails, is too slow, or its breaker is open, the request degrades to
/// [`Session::Degraded`]: never wider than what the token claims ([`anonymous`]).
#[velocity_policy::critical(fallback_on_failure)]
pub async fn lookup_session(sessions: Dependency, user: u64) -> Result<Session, SessionError> {
    let body = match sessions
        .call(Method::GET, &format!("/sessions/{user}"), Bytes::new())
        .await
    {
        Ok(body) => body,
        // The store answered: this token has no session. An answer, not a failure.
        Err(ProviderError::Status(404)) => return Ok(Session::Anonymous),
        Err(e) => return Err(SessionError::Store(e.to_string())),
    };
    let record: SessionRecord =
        serde_json::from_slice(&body).map_err(|e| SessionError::Store(e.to_string()))?;
    if record.user != user {
        return Err(SessionError::Store(
            "the store answered for another user".into(),
        ));
    }
    Ok(Session::User {
        id: user,
        can_write: record.can_write,
    })
}

/// `lookup_session`'s fallback: the privileges of anonymous, marked as degraded with why (so
/// that a save answers "retry", not "sign in"), checked to be within what the token claims.
pub fn anonymous(
    _sessions: &Dependency,
    user: &u64,
    why: CallError<SessionError>,
) -> Result<Session, SessionError> {
    let (because, retry_after) = match &why {
        CallError::Refused(refusal) => (
            refusal.kind().as_str(),
            refusal.retry_after().unwrap_or(Duration::from_secs(1)),
        ),
        CallError::DeadlineExceeded(_) => ("deadline_exceeded", Duration::from_secs(1)),
        CallError::Failed(_) => ("failed", Duration::from_secs(1)),
    };
    let most_it_could_be = Session::User {
        id: *user,
        can_write: true,
    };
    Ok(degrade(
        Session::Degraded {
            because,
            retry_after,
        },
        &most_it_could_be,
    ))
}

/// Authorization: only a signed-in user who may write saves documents. Less privileged is not
/// always "not allowed": a session that ended is (401, sign in again), a signed-in user
/// without the right is (403), but a session the store could not confirm is "not now" (503,
/// retry).
#[velocity_policy::critical]
pub async fn authorize(session: Session) -> Result<u64, ServiceError> {
    match session {
        Session::User {
            id,
            can_write: true,
        } => Ok(id),
        Session::User { .. } => Err(ServiceError::Forbidden),
        Session::Anonymous => Err(ServiceError::Unauthenticated("the session ended")),
        Session::Degraded {
            because,
            retry_after,
        } => Err(ServiceError::Degraded {
            because,
            retry_after,
        }),
    }
}

/// Validation.
#[velocity_policy::critical]
pub async fn validate(doc: NewDocument) -> Result<NewDocument, ServiceError> {
    let title = doc.title.trim().chars().count();
    if title == 0 || title > 200 {
        return Err(ServiceError::Invalid("the title needs 1 to 200 characters"));
    }
    if doc.body.chars().count() > 20_000 {
        return Err(ServiceError::Invalid("the text is over 20,000 characters"));
    }
    Ok(doc)
}

/// Runs blocking store work on tokio's blocking pool, off the async workers.
async fn blocking<T, F>(work: F) -> Result<T, ServiceError>
where
    F: FnOnce() -> Result<T, DbError> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => Ok(result?),
        Err(joined) => Err(ServiceError::Store(format!(
            "the store's thread failed: {joined}"
        ))),
    }
}

/// Creates the tables. Run once at startup, through the `database` bulkhead like every write.
#[velocity_policy::critical(bulkhead = "database", deadline = "10s")]
pub async fn create_schema(db: Arc<Database>) -> Result<(), ServiceError> {
    blocking(move || db.create_schema()).await
}

/// The canonical write: durable, so critical. The `database` bulkhead lets a few writes in
/// and refuses the rest at once (a 503), rather than queueing latency nobody can see.
#[velocity_policy::critical]
pub async fn write_document(
    db: Arc<Database>,
    author: u64,
    doc: NewDocument,
) -> Result<i64, ServiceError> {
    blocking(move || db.insert_document(author, &doc.title, &doc.body)).await
}

/// Saving a document: the user waits for the critical steps, and only for them.
#[velocity_policy::critical]
pub async fn save_document(
    app: Services,
    token: Option<String>,
    doc: NewDocument,
    request: Arc<str>,
) -> Result<Saved, ServiceError> {
    let user = authenticate(token).await?;
    let session = lookup_session(app.sessions.clone(), user).await?;
    let author = authorize(session).await?;
    let doc = validate(doc).await?;
    let id = write_document(app.db.clone(), author, doc.clone()).await?;
    // The response needs none of what follows. Each call schedules its work to run after the
    // response is finished and returns at once.
    record_analytics(app.clone(), request.to_string(), author);
    index_document(app.clone(), request.to_string(), id, doc);
    publish_activity(app.clone(), request.to_string(), id);
    notify_followers(app, request.to_string(), id, author);
    Ok(Saved { id })
}

/// Reading a document: the unrelated route. Its own compartment (`reads`), no provider.
#[velocity_policy::critical]
pub async fn read_document(db: Arc<Database>, id: i64) -> Result<Option<Document>, ServiceError> {
    blocking(move || db.document(id)).await
}

// ---- deferred ----------------------------------------------------------------------------------

/// Analytics: counted after the response.
#[velocity_policy::deferred]
#[velocity_policy::idempotent]
pub async fn record_analytics(app: Services, request: String, author: u64) {
    app.timeline.deferred_started(&request, "record_analytics");
    let _ = author;
    app.work.analytics.fetch_add(1, Ordering::Relaxed);
}

/// Search indexing: after the response, through the resilient call to the provider. Hands the
/// embedding (CPU work) to the background pool first.
#[velocity_policy::deferred]
#[velocity_policy::idempotent]
pub async fn index_document(
    app: Services,
    request: String,
    id: i64,
    doc: NewDocument,
) -> Result<(), ProviderError> {
    app.timeline.deferred_started(&request, "index_document");
    // Through the Redis stream when the demo shares a store, else on the in-process pool.
    #[cfg(feature = "redis")]
    if velocity_policy::queue::installed("embeddings").is_some() {
        embed_on_queue(id, doc.body.clone());
    } else {
        embed_document(app.clone(), id, doc.body.clone());
    }
    #[cfg(not(feature = "redis"))]
    embed_document(app.clone(), id, doc.body.clone());
    // Counting what a chaos drill injected into this request's indexing, for the timeline.
    let (pushed, injected) =
        timeline::noting_injected(push_to_index(app.search.clone(), id, doc)).await;
    app.timeline
        .met_injected(&request, "index_document", injected);
    pushed?;
    app.work.indexed.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The call to the search provider: behind the `search` breaker (it stops calling a provider
/// that is down, and a 429 trips it), the `search` bulkhead (a slow provider holds at most
/// four calls) and the `search` retry (transient failures, full jitter, inside one deadline).
/// The `search_drill` chaos (off unless switched on) injects its faults inside each attempt.
#[velocity_policy::resilient(
    breaker = "search",
    bulkhead = "search",
    retry = "search",
    chaos = "search_drill",
    deadline = "4s"
)]
#[velocity_policy::idempotent]
pub async fn push_to_index(
    search: Dependency,
    id: i64,
    doc: NewDocument,
) -> Result<(), ProviderError> {
    let body = serde_json::json!({ "id": id, "title": doc.title, "body": doc.body });
    search
        .call(
            Method::PUT,
            &format!("/index/{id}"),
            Bytes::from(body.to_string()),
        )
        .await
        .map(drop)
}

/// The activity event: a row in the store, after the response. It uses the `database`
/// compartment, so it is shed (not queued) when critical writes need the room.
#[velocity_policy::deferred]
#[velocity_policy::idempotent]
pub async fn publish_activity(app: Services, request: String, id: i64) -> Result<(), WorkError> {
    app.timeline.deferred_started(&request, "publish_activity");
    let db = app.db.clone();
    blocking(move || db.record_activity(id, &request))
        .await
        .map_err(|e| WorkError(e.to_string()))?;
    app.work.activity.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The notification: after the response, through the resilient call to the notifier.
#[velocity_policy::deferred]
#[velocity_policy::idempotent]
pub async fn notify_followers(
    app: Services,
    request: String,
    id: i64,
    author: u64,
) -> Result<(), ProviderError> {
    app.timeline.deferred_started(&request, "notify_followers");
    send_notification(app.notifier.clone(), id, author).await?;
    app.work.notified.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The call to the notifier, with its own breaker, bulkhead and retry.
#[velocity_policy::resilient(
    breaker = "notifier",
    bulkhead = "notifier",
    retry = "notifier",
    deadline = "4s"
)]
#[velocity_policy::idempotent]
pub async fn send_notification(
    notifier: Dependency,
    id: i64,
    author: u64,
) -> Result<(), ProviderError> {
    let body = serde_json::json!({ "document": id, "author": author });
    notifier
        .call(Method::POST, "/notify", Bytes::from(body.to_string()))
        .await
        .map(drop)
}

// ---- background --------------------------------------------------------------------------------

/// The embedding: background work, shed first when the `database` compartment is busy; its CPU
/// part runs on a bounded pool of its own ([`compute_embedding`]), never on an async worker.
#[velocity_policy::background]
#[velocity_policy::idempotent]
pub async fn embed_document(app: Services, id: i64, text: String) -> Result<(), WorkError> {
    let _ = id;
    let vector = compute_embedding(text)
        .await
        .map_err(|e| WorkError(format!("the embedding did not run: {e}")))?;
    if vector.iter().all(|x| x.is_finite()) {
        app.work.embedded.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// The same embedding on the durable queue `embeddings` (feature `redis`, with `REDIS_URL`):
/// the call enqueues the document on the Redis stream, and whichever instance's worker takes
/// it computes it (`embed_on_queue::task()`, started in [`crate::stack::share_breakers`]).
#[cfg(feature = "redis")]
#[velocity_policy::background(queue = "embeddings", deadline = "5s")]
#[velocity_policy::idempotent]
pub async fn embed_on_queue(id: i64, text: String) -> Result<(), WorkError> {
    let _ = id;
    let vector = compute_embedding(text)
        .await
        .map_err(|e| WorkError(format!("the embedding did not run: {e}")))?;
    if vector.iter().all(|x| x.is_finite()) {
        Ok(())
    } else {
        Err(WorkError("the embedding is not finite".to_owned()))
    }
}

/// [`embedding`] moved off the async workers: a bulkhead for CPU with two slots and a short
/// queue, waited for at most until the current deadline.
#[velocity_policy::isolate(max_concurrent = 2, max_queued = 4)]
pub fn compute_embedding(text: String) -> Vec<f32> {
    embedding(&text)
}

/// The size of an embedding.
pub const EMBEDDING_DIMS: usize = 128;
const EMBEDDING_LAYERS: usize = 4;

/// A small, deterministic "model": character trigrams hashed into a vector, then a few dense
/// layers with fixed pseudo-random weights. A few milliseconds of honest CPU work in a debug
/// build.
pub fn embedding(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; EMBEDDING_DIMS];
    let bytes = text.as_bytes();
    for window in bytes.windows(3) {
        let h = window.iter().fold(0x811c_9dc5u32, |h, b| {
            (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
        });
        v[h as usize % EMBEDDING_DIMS] += 1.0;
    }
    let mut seed: u32 = 0x9e37_79b9;
    for _ in 0..EMBEDDING_LAYERS {
        let mut next = vec![0.0f32; EMBEDDING_DIMS];
        for out in next.iter_mut() {
            let mut sum = 0.0f32;
            for x in &v {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                let w = (seed as f32 / u32::MAX as f32) - 0.5;
                sum += w * x;
            }
            *out = sum.tanh();
        }
        v = next;
    }
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::EPSILON);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

// ---- HTTP --------------------------------------------------------------------------------------

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned)
}

/// A body that could not be read: 408 when it did not arrive within the server's body read
/// deadline (and the connection is closed), else the extractor's own answer.
fn unreadable(rejection: BytesRejection) -> Response {
    let timed_out = std::iter::successors(
        Some(&rejection as &(dyn std::error::Error + 'static)),
        |e| e.source(),
    )
    .any(|e| e.is::<tower_http::timeout::TimeoutError>());
    if timed_out {
        return (
            StatusCode::REQUEST_TIMEOUT,
            [("connection", "close")],
            Json(serde_json::json!({ "error": "the request body did not arrive in time" })),
        )
            .into_response();
    }
    rejection.into_response()
}

async fn save(
    State(app): State<Services>,
    Extension(RequestKey(request)): Extension<RequestKey>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return unreadable(rejection),
    };
    let doc: NewDocument = match serde_json::from_slice(&body) {
        Ok(doc) => doc,
        Err(_) => {
            return ServiceError::Invalid("the body must be JSON: {\"title\": .., \"body\": ..}")
                .into_response();
        }
    };
    match save_document(app, bearer(&headers), doc, request).await {
        Ok(saved) => (StatusCode::CREATED, Json(saved)).into_response(),
        Err(error) => error.into_response(),
    }
}

async fn read(State(app): State<Services>, Path(id): Path<i64>) -> Response {
    match read_document(app.db.clone(), id).await {
        Ok(Some(doc)) => Json(doc).into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "no such document").into_response(),
        Err(error) => error.into_response(),
    }
}

/// The service's routes: the documents, the dashboard (`/policy`, `/dashboard`, `/locality`)
/// and the static page. Every request gets one deadline from `deadline` (the policy's `request`
/// stanza, [`model::deadline_layer`](crate::model::deadline_layer)), which every critical
/// function called inside takes a child of; every response body is tracked by the
/// [`Timeline`], and `AfterResponseLayer` holds each request's deferred work until its body is
/// finished (deferred work runs outside the request's budget).
pub fn router(app: Services, deadline: DeadlineLayer) -> Router {
    let timeline = app.timeline.clone();
    Router::new()
        .route("/documents", post(save))
        .route("/documents/{id}", get(read))
        .merge(dashboard::routes())
        .merge(crate::metrics::routes())
        .with_state(app)
        // Innermost: the handler and its response body run with the request's deadline in
        // scope; a request arriving with too little left is answered before the handler runs.
        .layer(deadline)
        // Inside the after-response layer: it sees each body's end before the layer does.
        .layer(middleware::from_fn_with_state(timeline, timeline::track))
        .layer(AfterResponseLayer::new())
}
