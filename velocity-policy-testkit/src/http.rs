//! A real axum server on loopback and a real HTTP/1.1 client, for the tests of tower layers
//! that must see a response as a connection does (feature `http`).
//!
//! ```
//! use axum::{Router, routing::get};
//! use velocity_policy_testkit::http::{Server, client, get as fetch};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let server = Server::start(Router::new().route("/", get(|| async { "hello" }))).await;
//! let (status, body) = fetch(&client(), &server.url("/")).await;
//! assert_eq!((status, body.as_str()), (200, "hello"));
//! server.stop().await;
//! # }
//! ```
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed unwrap is a failed test"
)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
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

/// A real axum server on a loopback port, stopped gracefully by [`Server::stop`].
#[derive(Debug)]
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Server {
    /// Serves `app` on a free loopback port.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound.
    pub async fn start(app: Router) -> Self {
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

    /// The URL of `path` on this server.
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops accepting, waits for the open connections to finish their responses.
    ///
    /// # Panics
    ///
    /// When the server's task panicked.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.unwrap();
    }
}

/// The client [`client`] makes.
pub type Client = HyperClient<HttpConnector, Empty<Bytes>>;

/// A real HTTP/1.1 client that keeps connections alive between requests.
#[must_use]
pub fn client() -> Client {
    HyperClient::builder(TokioExecutor::new()).build_http()
}

/// GETs `url` and reads the whole body: the status and the body as text.
///
/// # Panics
///
/// When `url` is not a URL or the request or the body fails.
pub async fn get(client: &Client, url: &str) -> (u16, String) {
    let response = client.get(url.parse().unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A streaming response body fed by the test through a channel: it ends when the sender is
/// dropped, and then calls `on_end` (before it reports the end to the server).
pub struct ChannelBody {
    chunks: mpsc::Receiver<Bytes>,
    on_end: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for ChannelBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelBody").finish_non_exhaustive()
    }
}

impl ChannelBody {
    /// The sender that feeds the body, and the body.
    pub fn new(on_end: impl FnOnce() + Send + 'static) -> (mpsc::Sender<Bytes>, Self) {
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
