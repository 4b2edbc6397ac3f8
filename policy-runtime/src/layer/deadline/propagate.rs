use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderName, HeaderValue, Request};
use tower_layer::Layer;
use tower_service::Service;

use super::headers::{DEADLINE_MS_HEADER, GRPC_TIMEOUT_HEADER};
use crate::Deadline;
use crate::deadline::format_grpc_timeout;

/// Carries the current deadline on outgoing requests (client side); see the
/// [module docs](super).
///
/// On each `call` with a deadline in scope, it sets `grpc-timeout` and the millisecond header
/// ([`DEADLINE_MS_HEADER`] unless configured) to what is left minus the reserve, rounded down:
/// the receiver never waits longer than we would. Outside any scope the request goes as it is.
///
/// ```
/// use std::time::Duration;
/// use policy_runtime::layer::PropagateDeadlineLayer;
/// use hyper_util::client::legacy::Client;
/// use hyper_util::rt::TokioExecutor;
/// use tower::ServiceBuilder;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let client = Client::builder(TokioExecutor::new()).build_http::<String>();
/// // Keep 20 ms for reading the answer once it arrives.
/// let client = ServiceBuilder::new()
///     .layer(PropagateDeadlineLayer::new().reserve(Duration::from_millis(20)))
///     .service(client);
/// # let _ = client;
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PropagateDeadlineLayer {
    reserve: Duration,
    ms_header: Option<HeaderName>,
    grpc_timeout: bool,
}

impl Default for PropagateDeadlineLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl PropagateDeadlineLayer {
    /// Sets both headers, with no reserve.
    pub fn new() -> Self {
        Self {
            reserve: Duration::ZERO,
            ms_header: Some(HeaderName::from_static(DEADLINE_MS_HEADER)),
            grpc_timeout: true,
        }
    }

    /// Time held back for work after the call (reading the answer, writing ours): the
    /// receiver is told what is left minus this.
    pub fn reserve(mut self, reserve: Duration) -> Self {
        self.reserve = reserve;
        self
    }

    /// Sends the millisecond budget in `header` instead of [`DEADLINE_MS_HEADER`].
    pub fn ms_header(mut self, header: HeaderName) -> Self {
        self.ms_header = Some(header);
        self
    }

    /// Sends no millisecond header (only `grpc-timeout`).
    pub fn without_ms_header(mut self) -> Self {
        self.ms_header = None;
        self
    }

    /// Sends no `grpc-timeout` (only the millisecond header).
    pub fn without_grpc_timeout(mut self) -> Self {
        self.grpc_timeout = false;
        self
    }
}

impl<S> Layer<S> for PropagateDeadlineLayer {
    type Service = PropagateDeadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PropagateDeadline {
            inner,
            config: self.clone(),
        }
    }
}

/// The service [`PropagateDeadlineLayer`] makes.
#[derive(Debug, Clone)]
pub struct PropagateDeadline<S> {
    inner: S,
    config: PropagateDeadlineLayer,
}

impl<S, B> Service<Request<B>> for PropagateDeadline<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        if let Some(deadline) = Deadline::current() {
            let left = deadline.remaining().saturating_sub(self.config.reserve);
            let headers = request.headers_mut();
            if self.config.grpc_timeout
                && let Ok(value) = HeaderValue::try_from(format_grpc_timeout(left))
            {
                headers.insert(GRPC_TIMEOUT_HEADER, value);
            }
            if let Some(name) = &self.config.ms_header {
                let millis = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
                headers.insert(name.clone(), HeaderValue::from(millis));
            }
        }
        self.inner.call(request)
    }
}
