//! The load: a generator that sends saves and reads at the phases' rates without waiting for
//! their answers (at most 1024 in flight), and records every response as the client saw it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http::Method;
use tokio::sync::Semaphore;
use velocity_policy::Registry;

use super::lock;
use crate::client::{self, HttpClient, Reply};
use crate::service::token_for;
use crate::stack;

/// Documents stored before the first phase, for the read route.
pub const SEED_DOCUMENTS: u32 = 200;
const USERS: u64 = 50;
const MAX_IN_FLIGHT: u32 = 1024;
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which route a request took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Route {
    /// `POST /documents` on the first instance.
    Save,
    /// `GET /documents/{id}` on the first instance: the unrelated route.
    Read,
    /// `POST /documents` on the second instance (Redis mode).
    SaveOnB,
}

impl Route {
    /// Its label in tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::Save => "save",
            Self::Read => "read",
            Self::SaveOnB => "save (b)",
        }
    }
}

/// How a request ended, seen by the client.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// 200 or 201.
    Ok,
    /// 503 marked `x-degraded`: the session store could not answer, the request ran as
    /// anonymous, and a save, which needs more, was told to retry.
    Degraded,
    /// 503 with `x-refusal`: the work never ran.
    Refused(String),
    /// 504: the service stopped waiting.
    TimedOut,
    /// Another 4xx.
    Rejected(u16),
    /// Another 5xx.
    Failed(u16),
    /// No response (or none within 10 s).
    NoResponse,
}

impl Outcome {
    /// Its label in tables.
    pub fn label(&self) -> String {
        match self {
            Self::Ok => "ok".to_owned(),
            Self::Degraded => "503 degraded to anonymous".to_owned(),
            Self::Refused(kind) => format!("503 {kind}"),
            Self::TimedOut => "504 timed out".to_owned(),
            Self::Rejected(status) => format!("{status}"),
            Self::Failed(status) => format!("{status}"),
            Self::NoResponse => "no response".to_owned(),
        }
    }

    /// How the client saw `reply`.
    pub fn of(reply: &Reply) -> Self {
        match reply.status.as_u16() {
            200..=299 => Self::Ok,
            503 if reply.header("x-degraded").is_some() => Self::Degraded,
            503 => Self::Refused(
                reply
                    .header("x-refusal")
                    .unwrap_or("unavailable")
                    .to_owned(),
            ),
            504 => Self::TimedOut,
            status @ 400..=499 => Self::Rejected(status),
            status => Self::Failed(status),
        }
    }
}

/// One response, as the client saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The phase it was sent in.
    pub phase: usize,
    /// Its route.
    pub route: Route,
    /// When it was sent, from the start of the first phase.
    pub at: Duration,
    /// How long until the whole response was read.
    pub latency: Duration,
    /// How it ended.
    pub outcome: Outcome,
}

/// The load generator's shared state.
pub(super) struct Load {
    pub(super) client: HttpClient,
    /// The start of the first phase: samples are timed from it.
    pub(super) t0: Instant,
    pub(super) samples: Mutex<Vec<Sample>>,
    next: AtomicU64,
    in_flight: Arc<Semaphore>,
    /// Requests not sent because [`MAX_IN_FLIGHT`] were already in flight.
    pub(super) skipped: AtomicU64,
}

impl Load {
    /// A generator whose clock starts now.
    pub(super) fn new(client: HttpClient) -> Arc<Self> {
        Arc::new(Self {
            client,
            t0: Instant::now(),
            samples: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)),
            skipped: AtomicU64::new(0),
        })
    }

    fn record(&self, sample: Sample) {
        lock(&self.samples).push(sample);
    }

    /// Sends one save to `base` as part of `phase`, recorded as `route`.
    pub(super) fn save(
        self: &Arc<Self>,
        base: &str,
        instance: &'static str,
        phase: usize,
        route: Route,
    ) {
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let load = self.clone();
        let url = format!("{base}/documents");
        tokio::spawn(async move {
            let _permit = permit;
            let n = load.next.fetch_add(1, Ordering::Relaxed);
            let user = 1 + n % USERS;
            let bearer = format!("Bearer {}", token_for(user));
            let request_id = format!("{instance}{phase}-s{n}");
            let body = serde_json::json!({
                "title": format!("Notes {n}"),
                "body": stack::sample_text(n),
            });
            let sent = Instant::now();
            let reply = tokio::time::timeout(
                CLIENT_TIMEOUT,
                client::send(
                    &load.client,
                    Method::POST,
                    &url,
                    &[
                        ("authorization", &bearer),
                        ("x-request-id", &request_id),
                        ("content-type", "application/json"),
                    ],
                    Bytes::from(body.to_string()),
                ),
            )
            .await;
            load.finish(phase, route, sent, reply);
        });
    }

    /// Reads one of the seeded documents from `base`.
    pub(super) fn read(self: &Arc<Self>, base: &str, phase: usize) {
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let load = self.clone();
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let url = format!("{base}/documents/{}", 1 + n % u64::from(SEED_DOCUMENTS));
        tokio::spawn(async move {
            let _permit = permit;
            let sent = Instant::now();
            let reply = tokio::time::timeout(CLIENT_TIMEOUT, client::get(&load.client, &url)).await;
            load.finish(phase, Route::Read, sent, reply);
        });
    }

    fn finish(
        &self,
        phase: usize,
        route: Route,
        sent: Instant,
        reply: Result<Result<Reply, client::ClientError>, tokio::time::error::Elapsed>,
    ) {
        let latency = sent.elapsed();
        let outcome = match reply {
            Ok(Ok(reply)) => Outcome::of(&reply),
            _ => Outcome::NoResponse,
        };
        self.record(Sample {
            phase,
            route,
            at: sent.saturating_duration_since(self.t0),
            latency,
            outcome,
        });
    }

    /// Waits until every request sent has its response.
    pub(super) async fn settle(&self) {
        let _ = self.in_flight.acquire_many(MAX_IN_FLIGHT).await;
    }
}

/// A few requests before the first phase, not measured: connections opened, every annotated
/// function's mechanisms built.
pub(super) async fn warm_up(load: &Arc<Load>, base: &str, second: Option<&str>) {
    for _ in 0..10 {
        load.save(base, "w", 0, Route::Save);
        load.read(base, 0);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if let Some(second) = second {
        // The second instance takes no saves until its phase: it never calls the search
        // provider before then. One read opens its connection.
        let _ = client::get(&load.client, &format!("{second}/documents/1")).await;
    }
    load.settle().await;
    lock(&load.samples).clear();
    wait_for_deferred_work(Duration::from_secs(5)).await;
}

/// Whether the durable queue `embeddings` (when installed) still holds unfinished tasks,
/// fleet-wide: its figures read now.
async fn queue_busy() -> bool {
    #[cfg(feature = "redis")]
    if let Some(queue) = velocity_policy::queue::installed("embeddings") {
        return queue.refresh().await.is_err() || queue.snapshot().length > 0;
    }
    false
}

/// Waits until no deferred or background work is queued or running (at most `limit`), on the
/// durable queue too when the embeddings go through Redis.
pub(super) async fn wait_for_deferred_work(limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let snapshot = Registry::global().snapshot();
        let background_busy = snapshot
            .background
            .iter()
            .any(|b| b.running > 0 || b.queued > 0);
        if snapshot.deferred.queued == 0
            && snapshot.deferred.running == 0
            && !background_busy
            && !queue_busy().await
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
