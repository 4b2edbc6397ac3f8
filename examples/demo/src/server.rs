//! An axum app served on a loopback listener until it is stopped or dropped: what the fake
//! providers and the service instances both are underneath.
//!
//! `axum::serve` waits for a client as long as it likes: a client that opens a connection and
//! sends half its headers, or its headers and then its body one byte at a time, holds a
//! connection (and its task and buffers) forever, and nothing bounds how many such connections
//! are open. This server is hyper-util's connection builder and graceful shutdown around the
//! same app, with the three bounds a service on a network needs ([`ServeLimits`]):
//!
//! - **the headers' read timeout** (hyper's `header_read_timeout`): a request's headers must
//!   arrive within it, or the connection is closed. hyper starts it as soon as the connection
//!   waits for a request, so it is also how long an idle keep-alive connection stays open;
//! - **the body's read deadline** (tower-http's `RequestBodyDeadlineLayer`): the whole body
//!   must arrive within it after the headers, however it trickles in; past it the request is
//!   answered 408 and the connection closed;
//! - **a connection limit** (a semaphore taken on accept): past it a new connection is closed
//!   at once, never queued, and counted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinHandle;
use tower_http::timeout::RequestBodyDeadlineLayer;

/// What a server allows one client: how long it may take to send a request's headers and its
/// body, and how many connections may be open at once.
///
/// The defaults are the service's; the facade's serving guide (`velocity_policy::guide::serving`) says
/// what a production service should choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// How long a request's headers may take to arrive, counted from when the connection waits
    /// for the request: also how long an idle keep-alive connection stays open. 10 s.
    pub header_read_timeout: Duration,
    /// How long a request's whole body may take to arrive after its headers; past it the
    /// request is answered 408 and the connection closed. 10 s.
    pub body_read_timeout: Duration,
    /// Connections open at once; past it a new connection is closed at once. 1,024.
    pub max_connections: usize,
}

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            max_connections: 1024,
        }
    }
}

/// A server's connections, counted.
#[derive(Debug, Default)]
struct Connections {
    /// Closed at once because `max_connections` were open.
    refused: AtomicU64,
    /// True from a refusal until the next connection is accepted: one warning per episode.
    at_limit: AtomicBool,
}

/// A running server. Dropping it stops accepting; [`Server::stop`] also waits for the open
/// connections to finish.
#[derive(Debug)]
pub(crate) struct Server {
    addr: SocketAddr,
    limits: ServeLimits,
    connections: Arc<Connections>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves `app` on `listener` within `limits`, in a task of its own; `what` names it in
    /// its log lines.
    pub(crate) fn spawn(
        listener: TcpListener,
        app: Router,
        what: String,
        limits: ServeLimits,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let connections = Arc::new(Connections::default());
        let app = app.layer(RequestBodyDeadlineLayer::new(limits.body_read_timeout));
        let task = tokio::spawn(accept_loop(
            listener,
            app,
            what,
            limits,
            connections.clone(),
            stopped,
        ));
        Ok(Self {
            addr,
            limits,
            connections,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://` and the address.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The limits it serves within.
    pub(crate) fn limits(&self) -> ServeLimits {
        self.limits
    }

    /// Connections closed at once because `max_connections` were open.
    pub(crate) fn refused_connections(&self) -> u64 {
        self.connections.refused.load(Ordering::Relaxed)
    }

    /// Stops accepting, tells every open connection to finish its request in progress and
    /// close (idle keep-alive connections close at once), and waits for them.
    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    app: Router,
    what: String,
    limits: ServeLimits,
    connections: Arc<Connections>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(&what, &error).await;
                    continue;
                }
            },
            _ = &mut stopped => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Refused, not queued: the client learns at once, and the connection costs
            // nothing more.
            connections.refused.fetch_add(1, Ordering::Relaxed);
            if !connections.at_limit.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    server = %what,
                    max_connections = limits.max_connections,
                    "{what}: {} connections open, closing new ones until one closes",
                    limits.max_connections
                );
            }
            drop(stream);
            continue;
        };
        connections.at_limit.store(false, Ordering::Relaxed);
        let _ = stream.set_nodelay(true);
        let connection =
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _slot = slot;
            // A client that went away, or timed out sending its headers, ends here too.
            let _ = connection.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Accepting failed: a client that gave up before its connection was accepted is nothing; out
/// of file descriptors is worth a line, and a pause so the loop does not spin.
async fn accept_failed(what: &str, error: &std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::ConnectionRefused
    ) {
        return;
    }
    tracing::error!(server = %what, "{what}: accepting a connection failed: {error}");
    tokio::time::sleep(Duration::from_millis(100)).await;
}
