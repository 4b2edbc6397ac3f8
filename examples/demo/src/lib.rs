//! The main demo: a document service whose dependencies misbehave, and what the policy engine
//! does about it.
//!
//! `cargo run -p policy-demo` starts the service ([`service`]) and its fake providers
//! ([`providers`]: a search provider, a notifier and a session store, real HTTP servers on
//! loopback), drives load through phases ([`scenario`]: healthy, the search provider slow, then
//! down, then answering 429 with `Retry-After`, a burst above capacity, the session store down,
//! recovery), prints one table per phase and writes an HTML report ([`report`]). Every figure
//! comes from the run.
//!
//! Every request gets one deadline from `policies/demo.policy`'s `request` stanza ([`model`],
//! a `DeadlineLayer` on the routes); the critical functions take children of it, and the calls
//! to the providers carry what is left (`PropagateDeadlineLayer`): the report shows the budgets
//! each provider was given.
//!
//! The service serves its live state too ([`dashboard`]): `GET /policy` (JSON),
//! `GET /dashboard` (a page that refreshes itself) and `GET /locality`.
//!
//! `cargo run --release -p policy-demo -- soak --minutes N` runs the service in a process of its
//! own for N minutes of load on every route while the providers' faults cycle, measures its
//! memory, descriptors, tasks and deferred accounting every few seconds, and judges the run
//! ([`soak`]).
//!
//! Everything runs in-process on embedded defaults; with `REDIS_URL` set (and the `redis` feature), a second instance
//! runs in its own process and the two share their breakers through Redis.

pub mod client;
pub mod dashboard;
pub mod db;
pub mod events;
pub mod metrics;
pub mod model;
pub mod providers;
pub mod report;
pub mod scenario;
mod server;
pub mod service;
pub mod soak;
pub mod stack;
pub mod timeline;

/// Why the demo could not run.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A socket, a file or a child process failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The store failed.
    #[error("{0}")]
    Db(#[from] db::DbError),
    /// Something the demo needs could not be set up.
    #[error("{0}")]
    Setup(String),
    /// The policy events cannot be recorded.
    #[error("{0}")]
    Events(#[from] events::AlreadyInstalled),
}
