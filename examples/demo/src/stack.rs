//! Starting it all: the store, the fake providers, and one or more service instances.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use velocity_policy::Registry;
use velocity_policy::background::BackgroundPool;

use crate::DemoError;
use crate::client::http_client;
use crate::db::Database;
use crate::providers::FakeProvider;
pub use crate::server::ServeLimits;
use crate::server::Server;
use crate::service::{self, Dependency, Services, WorkDone};
use crate::timeline::Timeline;

/// Shares this process's breakers through Redis at `url`, under the key prefix `prefix`, as
/// instance `instance`, and moves the embeddings to the durable queue `embeddings` on the same
/// Redis, with a worker in this process. Call it before the first call builds a breaker.
#[cfg(feature = "redis")]
pub async fn share_breakers(url: &str, prefix: &str, instance: &str) -> Result<(), DemoError> {
    let store = velocity_policy::redis_store::RedisStore::builder()
        .prefix(prefix)
        .instance(instance)
        .connect(url)
        .await
        .map_err(|e| {
            DemoError::Setup(format!(
                "REDIS_URL is set, but Redis cannot be used ({e}); unset REDIS_URL to run the single-instance demo"
            ))
        })?;
    // The queue's numbers are the `queue embeddings { ... }` stanza of `policies/demo.policy`.
    let embeddings =
        velocity_policy::queue::TaskQueue::configured(service::embed_on_queue::queue_settings())
            .build(&store);
    velocity_policy::queue::install(embeddings.clone());
    *lock_worker() = Some(
        embeddings
            .worker()
            .handle(service::embed_on_queue::task())
            .start(),
    );
    Registry::global().set_breaker_store(Arc::new(store));
    Ok(())
}

/// This process's worker of the `embeddings` queue, while it runs.
#[cfg(feature = "redis")]
fn lock_worker() -> std::sync::MutexGuard<'static, Option<velocity_policy::queue::Worker>> {
    static WORKER: std::sync::Mutex<Option<velocity_policy::queue::Worker>> =
        std::sync::Mutex::new(None);
    WORKER.lock().unwrap_or_else(|p| p.into_inner())
}

/// Stops this process's queue worker, if it runs one: no new tasks, at most `drain` for the
/// ones running; what is left is redelivered to another instance. Returns how many were
/// abandoned.
pub async fn drain_queue_worker(drain: Duration) -> u64 {
    #[cfg(feature = "redis")]
    {
        let worker = lock_worker().take();
        if let Some(worker) = worker {
            return worker.shutdown(drain).await.abandoned;
        }
    }
    let _ = drain;
    0
}

/// Without the `redis` feature there is no shared store: a clear error instead.
#[cfg(not(feature = "redis"))]
pub async fn share_breakers(_url: &str, _prefix: &str, _instance: &str) -> Result<(), DemoError> {
    Err(DemoError::Setup(
        "REDIS_URL is set, but this demo was built without its `redis` feature: run `cargo run -p policy-demo --features redis`, or unset REDIS_URL to run the single-instance demo".into(),
    ))
}

/// The fake providers, each a real HTTP server on loopback.
#[derive(Debug)]
pub struct Providers {
    /// The search provider (answers in 8 ms while healthy).
    pub search: FakeProvider,
    /// The notifier (5 ms).
    pub notifier: FakeProvider,
    /// The session store (1 ms).
    pub sessions: FakeProvider,
}

/// Where the providers listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderUrls {
    /// The search provider's base URL.
    pub search: String,
    /// The notifier's base URL.
    pub notifier: String,
    /// The session store's base URL.
    pub sessions: String,
}

impl Providers {
    /// Starts the three, healthy.
    pub async fn start() -> Result<Self, DemoError> {
        Ok(Self {
            search: FakeProvider::start("search", Duration::from_millis(8)).await?,
            notifier: FakeProvider::start("notifier", Duration::from_millis(5)).await?,
            sessions: FakeProvider::start("sessions", Duration::from_millis(1)).await?,
        })
    }

    /// Their URLs, for a service instance.
    pub fn urls(&self) -> ProviderUrls {
        ProviderUrls {
            search: self.search.url(),
            notifier: self.notifier.url(),
            sessions: self.sessions.url(),
        }
    }

    /// All three, in a fixed order.
    pub fn all(&self) -> [&FakeProvider; 3] {
        [&self.search, &self.notifier, &self.sessions]
    }

    /// Stops all three.
    pub async fn stop(self) {
        self.search.stop().await;
        self.notifier.stop().await;
        self.sessions.stop().await;
    }
}

/// Opens the store (a temporary file unless `path` is given), creates its tables, chooses the
/// background pool, and seeds `seed` documents for the read route.
pub async fn prepare_database(path: Option<&Path>, seed: u32) -> Result<Arc<Database>, DemoError> {
    // Before the first mechanism is built (the `database` bulkhead, below): see `metrics`.
    crate::metrics::install();
    let db = Arc::new(match path {
        Some(path) => Database::open(path)?,
        None => Database::temporary()?,
    });
    service::create_schema(db.clone())
        .await
        .map_err(|e| DemoError::Setup(e.to_string()))?;
    configure_background_pool();
    let seeding = db.clone();
    tokio::task::spawn_blocking(move || {
        for n in 0..seed {
            let title = format!("Seeded document {n}");
            seeding.insert_document(u64::from(n % 50) + 1, &title, &sample_text(u64::from(n)))?;
        }
        Ok::<_, crate::db::DbError>(())
    })
    .await
    .map_err(|e| DemoError::Setup(format!("seeding the store: {e}")))??;
    Ok(db)
}

/// The background pool the embeddings go to: one slot, a short queue, and it yields to the
/// `database` compartment (shed at a quarter of its load), so critical writes keep their room.
///
/// The pool is process-wide and chosen once; later calls keep the first.
fn configure_background_pool() {
    // `create_schema` went through the `database` bulkhead, so the registry has built it from
    // `policies/demo.policy`.
    let Some(database) = Registry::global().find_bulkhead("database") else {
        return;
    };
    let pool = BackgroundPool::builder("embedding")
        .max_concurrent(1)
        .max_queued(4)
        .yield_to(&database)
        .build();
    let _ = velocity_policy::background::set_pool(pool);
}

/// Text of a few hundred characters, different per `n`.
pub fn sample_text(n: u64) -> String {
    const WORDS: &[&str] = &[
        "deadline",
        "breaker",
        "bulkhead",
        "retry",
        "budget",
        "latency",
        "provider",
        "index",
        "search",
        "notify",
        "session",
        "document",
        "critical",
        "deferred",
        "background",
        "response",
        "shed",
        "load",
        "window",
        "cooldown",
        "jitter",
        "queue",
        "slot",
        "probe",
    ];
    let mut state = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut text = String::with_capacity(600);
    while text.len() < 500 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let word = WORDS[(state >> 33) as usize % WORDS.len()];
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(word);
    }
    text
}

/// One service instance on a loopback port.
#[derive(Debug)]
pub struct Instance {
    /// What its functions use.
    pub services: Services,
    server: Server,
}

impl Instance {
    /// Starts an instance named `name` (its `x-caller` to the providers) on a free loopback
    /// port (or `port`), calling the providers at `urls`, within the default [`ServeLimits`].
    pub async fn start(
        name: &str,
        urls: &ProviderUrls,
        db: Arc<Database>,
        port: u16,
    ) -> Result<Self, DemoError> {
        Self::start_within(name, urls, db, port, ServeLimits::default()).await
    }

    /// [`start`](Self::start), serving within `limits`.
    pub async fn start_within(
        name: &str,
        urls: &ProviderUrls,
        db: Arc<Database>,
        port: u16,
        limits: ServeLimits,
    ) -> Result<Self, DemoError> {
        let client = http_client();
        let services = Services {
            db,
            search: Dependency::new("search", &urls.search, name, client.clone()),
            notifier: Dependency::new("notifier", &urls.notifier, name, client.clone()),
            sessions: Dependency::new("sessions", &urls.sessions, name, client),
            timeline: Timeline::new(),
            work: Arc::new(WorkDone::default()),
        };
        let app = service::router(services.clone(), crate::model::deadline_layer()?);
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let server = Server::spawn(listener, app, "the service".to_owned(), limits)?;
        Ok(Self { services, server })
    }

    /// Its base URL.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The limits it serves within.
    pub fn limits(&self) -> ServeLimits {
        self.server.limits()
    }

    /// Connections it closed at once because `max_connections` were open.
    pub fn refused_connections(&self) -> u64 {
        self.server.refused_connections()
    }

    /// Stops accepting and waits for the open connections to finish their responses.
    pub async fn stop(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.server.stop()).await;
    }
}
