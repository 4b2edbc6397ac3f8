//! Helpers for the deferred-work and background tests that run a real server on loopback.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

#[path = "../common/captured.rs"]
mod captured;
pub(crate) use captured::Captured;

/// Captures every event (DEBUG and up) of every thread of this test binary: the server's
/// worker threads log too. Tests tell their lines apart by unique task names.
pub(crate) fn global_capture() -> &'static Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        captured
    })
}

/// A real axum server on a loopback port, stopped gracefully by [`Server::stop`].
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Server {
    pub(crate) async fn start(app: Router) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            addr,
            stop: Some(stop),
            task,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops accepting, waits for the open connections to finish their responses.
    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.unwrap();
    }
}

pub(crate) type Client = HyperClient<HttpConnector, Empty<Bytes>>;

/// A real HTTP/1.1 client that keeps connections alive between requests.
pub(crate) fn client() -> Client {
    HyperClient::builder(TokioExecutor::new()).build_http()
}

/// GETs `url` and reads the whole body.
pub(crate) async fn get(client: &Client, url: &str) -> (u16, String) {
    let response = client.get(url.parse().unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A streaming response body fed by the test through a channel: it ends when the sender is
/// dropped, and then calls `on_end` (before it reports the end to the server).
pub(crate) struct ChannelBody {
    chunks: mpsc::Receiver<Bytes>,
    on_end: Option<Box<dyn FnOnce() + Send>>,
}

impl ChannelBody {
    pub(crate) fn new(on_end: impl FnOnce() + Send + 'static) -> (mpsc::Sender<Bytes>, Self) {
        let (tx, chunks) = mpsc::channel(16);
        let body = Self {
            chunks,
            on_end: Some(Box::new(on_end)),
        };
        (tx, body)
    }
}

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.chunks.poll_recv(cx) {
            Poll::Ready(Some(chunk)) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            Poll::Ready(None) => {
                if let Some(on_end) = self.on_end.take() {
                    on_end();
                }
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
