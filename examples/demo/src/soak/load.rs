//! The soak's load: closed-loop workers on every route of the service (each sends its next
//! request when the last one is answered, as `wrk` does), recorded per fault and route in
//! fixed-size histograms, so the driver's own memory does not grow with the run either.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use hdrhistogram::Histogram;
use http::Method;

use crate::DemoError;
use crate::client::{self, HttpClient};
use crate::scenario::{self, Outcome};
use crate::service::token_for;
use crate::stack;
use crate::timeline::MAX_REQUEST_ID;

/// A route of the service, as the soak groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Route {
    /// `POST /documents`: critical work, then four deferred tasks and a background one.
    Save,
    /// `GET /documents/{id}`: the unrelated route.
    Read,
    /// The static page, the dashboard and the page's two images.
    Page,
    /// `GET /policy` (the registry's snapshot) and `GET /locality`.
    Api,
    /// Requests that must be rejected: a missing document (404), a body that is not JSON
    /// (422), a save without a token (401), a file that does not exist (404).
    Rejected,
}

impl Route {
    /// Every route, in table order.
    pub const ALL: [Route; 5] = [
        Route::Save,
        Route::Read,
        Route::Page,
        Route::Api,
        Route::Rejected,
    ];

    /// Its label in tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::Save => "save",
            Self::Read => "read",
            Self::Page => "pages",
            Self::Api => "policy",
            Self::Rejected => "rejected",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Latency and outcomes of one route during one fault, over the whole run.
#[derive(Debug, Clone)]
pub struct RouteTally {
    /// Latency in microseconds, 3 significant digits, up to a minute.
    pub latency: Histogram<u64>,
    /// Answered as the route should be (2xx; for `Rejected`, the expected 4xx).
    pub ok: u64,
    /// Every other outcome, by label.
    pub others: BTreeMap<String, u64>,
}

impl RouteTally {
    fn new() -> Result<Self, DemoError> {
        Ok(Self {
            latency: Histogram::new_with_bounds(1, 60_000_000, 3)
                .map_err(|e| DemoError::Setup(format!("a latency histogram: {e}")))?,
            ok: 0,
            others: BTreeMap::new(),
        })
    }

    /// Requests answered (or not) in all.
    pub fn count(&self) -> u64 {
        self.latency.len()
    }

    /// A latency quantile.
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_micros(self.latency.value_at_quantile(q))
    }

    /// The slowest.
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.latency.max())
    }
}

/// What the workers recorded: one [`RouteTally`] per fault and route.
#[derive(Debug)]
pub struct Recorded {
    /// Indexed by fault, then by [`Route`].
    pub tallies: Vec<Vec<RouteTally>>,
}

// A poisoned lock means a panic elsewhere while it was held; the counts are still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The load's shared state.
#[derive(Debug)]
pub struct Load {
    client: HttpClient,
    base: String,
    stop: AtomicBool,
    fault: AtomicUsize,
    requests: AtomicU64,
    recorded: Mutex<Recorded>,
}

const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
const USERS: u64 = 50;

impl Load {
    /// Load on the service at `base`, recorded for `faults` faults.
    pub fn new(base: String, faults: usize) -> Result<Arc<Self>, DemoError> {
        let tallies = (0..faults.max(1))
            .map(|_| Route::ALL.iter().map(|_| RouteTally::new()).collect())
            .collect::<Result<_, _>>()?;
        Ok(Arc::new(Self {
            client: client::http_client(),
            base,
            stop: AtomicBool::new(false),
            fault: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            recorded: Mutex::new(Recorded { tallies }),
        }))
    }

    /// Requests answered (or given up on) so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Requests from now on are counted in fault `index`.
    pub fn set_fault(&self, index: usize) {
        self.fault.store(index, Ordering::Relaxed);
    }

    /// Asks the workers to stop after the request each has in flight.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// What was recorded (the workers should have stopped).
    pub fn take(&self) -> Recorded {
        let mut recorded = lock(&self.recorded);
        Recorded {
            tallies: std::mem::take(&mut recorded.tallies),
        }
    }

    fn record(&self, fault: usize, route: Route, latency: Duration, ok: bool, outcome: &Outcome) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut recorded = lock(&self.recorded);
        let Some(tally) = recorded
            .tallies
            .get_mut(fault)
            .and_then(|routes| routes.get_mut(route.index()))
        else {
            return;
        };
        tally.latency.saturating_record(micros);
        if ok {
            tally.ok += 1;
        } else {
            *tally.others.entry(outcome.label()).or_default() += 1;
        }
    }

    /// One request; `expected` is the status that counts as ok (`None`: any 2xx).
    async fn send(
        &self,
        route: Route,
        method: Method,
        path: &str,
        headers: &[(&'static str, &str)],
        body: Bytes,
        expected: Option<u16>,
    ) {
        let fault = self.fault.load(Ordering::Relaxed);
        let url = format!("{}{path}", self.base);
        let sent = Instant::now();
        let reply = tokio::time::timeout(
            CLIENT_TIMEOUT,
            client::send(&self.client, method, &url, headers, body),
        )
        .await;
        let latency = sent.elapsed();
        let (ok, outcome) = match reply {
            Ok(Ok(reply)) => {
                let status = reply.status.as_u16();
                let ok = match expected {
                    Some(want) => status == want,
                    None => reply.status.is_success(),
                };
                (ok, Outcome::of(&reply))
            }
            _ => (false, Outcome::NoResponse),
        };
        self.record(fault, route, latency, ok, &outcome);
    }

    /// A saving worker: documents of 50 users, each request with its own `x-request-id`
    /// (every 16th the longest the service takes, every 32nd none at all).
    pub async fn saver(self: Arc<Self>, worker: usize) {
        let mut n: u64 = 0;
        while !self.stop.load(Ordering::Relaxed) {
            n += 1;
            let serial = (worker as u64) << 40 | n;
            let user = 1 + serial % USERS;
            let bearer = format!("Bearer {}", token_for(user));
            let mut id = format!("soak-s{worker}-{n}");
            if n.is_multiple_of(16) {
                while id.len() < MAX_REQUEST_ID {
                    id.push('x');
                }
            }
            let body = serde_json::json!({
                "title": format!("Soak {worker}-{n}"),
                "body": stack::sample_text(serial),
            });
            let mut headers = vec![
                ("authorization", bearer.as_str()),
                ("content-type", "application/json"),
            ];
            if !n.is_multiple_of(32) {
                headers.push(("x-request-id", id.as_str()));
            }
            self.send(
                Route::Save,
                Method::POST,
                "/documents",
                &headers,
                Bytes::from(body.to_string()),
                None,
            )
            .await;
        }
    }

    /// A reading worker: the seeded documents, round and round.
    pub async fn reader(self: Arc<Self>, worker: usize) {
        let mut n = worker as u64;
        while !self.stop.load(Ordering::Relaxed) {
            n += 1;
            let path = format!("/documents/{}", 1 + n % u64::from(scenario::SEED_DOCUMENTS));
            self.send(Route::Read, Method::GET, &path, &[], Bytes::new(), None)
                .await;
        }
    }

    /// A worker on everything else: the pages, the dashboard's JSON, and requests that must be
    /// rejected ([`VISITS`], round and round).
    pub async fn browser(self: Arc<Self>, worker: usize) {
        let token = format!("Bearer {}", token_for(1));
        let mut n = worker;
        while !self.stop.load(Ordering::Relaxed) {
            n += 1;
            let visit = &VISITS[n % VISITS.len()];
            let mut headers = Vec::new();
            if visit.signed_in {
                headers.push(("authorization", token.as_str()));
            }
            if !visit.body.is_empty() {
                headers.push(("content-type", "application/json"));
            }
            self.send(
                visit.route,
                visit.method.clone(),
                visit.path,
                &headers,
                Bytes::from_static(visit.body.as_bytes()),
                visit.expected,
            )
            .await;
        }
    }
}

/// One request of the browsing workers.
#[derive(Debug)]
pub struct Visit {
    /// Its route group.
    pub route: Route,
    /// The method.
    pub method: Method,
    /// The path.
    pub path: &'static str,
    /// With a valid bearer token.
    pub signed_in: bool,
    /// The body (JSON, or not).
    pub body: &'static str,
    /// The status that counts as ok (`None`: any 2xx).
    pub expected: Option<u16>,
}

const fn get(route: Route, path: &'static str, expected: Option<u16>) -> Visit {
    Visit {
        route,
        method: Method::GET,
        path,
        signed_in: false,
        body: "",
        expected,
    }
}

/// What the browsing workers request, in turn.
pub const VISITS: [Visit; 10] = [
    get(Route::Page, "/", None),
    get(Route::Page, "/dashboard", None),
    get(Route::Page, "/latency.png", None),
    get(Route::Page, "/latency.webp", None),
    get(Route::Api, "/policy", None),
    get(Route::Api, "/locality", None),
    get(Route::Rejected, "/documents/999999999", Some(404)),
    Visit {
        route: Route::Rejected,
        method: Method::POST,
        path: "/documents",
        signed_in: true,
        body: "not json",
        expected: Some(422),
    },
    Visit {
        route: Route::Rejected,
        method: Method::POST,
        path: "/documents",
        signed_in: false,
        body: r#"{"title":"t","body":"b"}"#,
        expected: Some(401),
    },
    get(Route::Rejected, "/missing.png", Some(404)),
];
