//! Outgoing HTTP calls (feature `http`): what a dependency's answer says about backing off,
//! and the breaker it trips.
//!
//! A dependency that answers `429 Too Many Requests` or `503 Service Unavailable` with a
//! `Retry-After` is telling us how long not to call it. [`RetryAfter`], the default
//! [`TripOn`] classifier, reads that wait (delta-seconds, or an HTTP date from now), and the
//! layers here open the named breaker for **exactly that long** with [`Breaker::trip`]
//! (bounded by its [`max_retry_after`](crate::breaker::BreakerBuilder::max_retry_after)): every
//! caller of the dependency in this process is then refused at once, without a request, until
//! the wait is over, and the breaker probes again.
//!
//! | the answer | [`RetryAfter`] says |
//! |---|---|
//! | 429 or 503 with `Retry-After: 2` | trip for 2 s |
//! | 429 or 503 with `Retry-After: <an HTTP date>` | trip until that date (now if it passed: no trip) |
//! | 429 or 503 with `Retry-After: 0`, or none, or one that does not parse | no trip |
//! | any other status, `Retry-After` or not | no trip |
//!
//! Around hyper-util's client (or any tower HTTP client), stack [`TripLayer`] with the
//! breaker's [`BreakerLayer`](crate::layer::BreakerLayer) (which refuses while it is open and
//! counts failures) and [`PropagateDeadlineLayer`](crate::layer::PropagateDeadlineLayer) (which
//! tells the dependency our deadline):
//!
//! ```
//! use std::time::Duration;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use velocity_policy_runtime::Registry;
//! use velocity_policy_runtime::client::TripLayer;
//! use velocity_policy_runtime::layer::{BreakerLayer, PropagateDeadlineLayer};
//! use tower::ServiceBuilder;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let partner = Registry::global().breaker("partner", |b| b);
//! let client = Client::builder(TokioExecutor::new()).build_http::<String>();
//! let client = ServiceBuilder::new()
//!     .layer(TripLayer::new(partner.clone()))
//!     .layer(BreakerLayer::new(partner))
//!     .layer(PropagateDeadlineLayer::new().reserve(Duration::from_millis(20)))
//!     .service(client);
//! # let _ = client;
//! # }
//! ```
//!
//! With reqwest, feature `reqwest`: [`reqwest::BreakerMiddleware`] and
//! [`reqwest::DeadlineMiddleware`] do the same through `reqwest-middleware`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use http::{HeaderMap, Response, StatusCode, header::RETRY_AFTER};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::Breaker;

#[cfg(feature = "reqwest")]
pub mod reqwest;

/// Decides, from a dependency's answer, whether to open its breaker and for how long: `Some`
/// wait trips it for exactly that long ([`Breaker::trip`]). [`RetryAfter`] is the default;
/// any `Fn(StatusCode, &HeaderMap) -> Option<Duration>` is one too.
pub trait TripOn: Send + Sync {
    /// How long the dependency asked not to be called, if it did.
    fn trip_for(&self, status: StatusCode, headers: &HeaderMap) -> Option<Duration>;
}

impl<F> TripOn for F
where
    F: Fn(StatusCode, &HeaderMap) -> Option<Duration> + Send + Sync,
{
    fn trip_for(&self, status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
        self(status, headers)
    }
}

/// The default [`TripOn`]: a `429` or `503` with a `Retry-After` of delta-seconds or an HTTP
/// date (RFC 9110, 10.2.3), see the [module docs](self). A wait of zero is no trip.
///
/// ```
/// use std::time::Duration;
/// use http::{HeaderMap, StatusCode};
/// use velocity_policy_runtime::client::{RetryAfter, TripOn};
///
/// let mut headers = HeaderMap::new();
/// headers.insert("retry-after", "2".parse().unwrap());
/// assert_eq!(RetryAfter.trip_for(StatusCode::TOO_MANY_REQUESTS, &headers), Some(Duration::from_secs(2)));
/// assert_eq!(RetryAfter.trip_for(StatusCode::SERVICE_UNAVAILABLE, &headers), Some(Duration::from_secs(2)));
/// assert_eq!(RetryAfter.trip_for(StatusCode::INTERNAL_SERVER_ERROR, &headers), None);
/// assert_eq!(RetryAfter.trip_for(StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new()), None);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryAfter;

impl TripOn for RetryAfter {
    fn trip_for(&self, status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
        retry_after_at(status, headers, SystemTime::now())
    }
}

/// [`RetryAfter`]'s reading with `now` given (for an HTTP date).
fn retry_after_at(status: StatusCode, headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if status != StatusCode::TOO_MANY_REQUESTS && status != StatusCode::SERVICE_UNAVAILABLE {
        return None;
    }
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let wait =
        if !value.is_empty() && value.len() <= 10 && value.bytes().all(|b| b.is_ascii_digit()) {
            Duration::from_secs(value.parse().ok()?)
        } else {
            httpdate::parse_http_date(value)
                .ok()?
                .duration_since(now)
                .ok()?
        };
    (!wait.is_zero()).then_some(wait)
}

/// The reason a trip records ([`OpenCause::Tripped`](crate::OpenCause::Tripped)'s `reason`).
fn reason(status: StatusCode) -> &'static str {
    match status {
        StatusCode::TOO_MANY_REQUESTS => "429 Too Many Requests with Retry-After",
        StatusCode::SERVICE_UNAVAILABLE => "503 Service Unavailable with Retry-After",
        _ => "the dependency asked to back off",
    }
}

/// Trips `breaker` as `classify` says for one answer; the wait, when it tripped.
fn trip(breaker: &Breaker, classify: &dyn TripOn, status: StatusCode, headers: &HeaderMap) {
    if let Some(wait) = classify.trip_for(status, headers) {
        breaker.trip(wait, reason(status));
    }
}

/// Opens a breaker for as long as the dependency's answer asks ([`TripOn`], [`RetryAfter`] by
/// default): a tower layer for an HTTP client. It neither refuses nor counts: stack it with
/// the same breaker's [`BreakerLayer`](crate::layer::BreakerLayer), as the
/// [module docs](self) show.
#[derive(Debug, Clone)]
pub struct TripLayer<C = RetryAfter> {
    breaker: Breaker,
    classify: Arc<C>,
}

impl TripLayer {
    /// Trips `breaker` on a 429 or 503 with `Retry-After`.
    pub fn new(breaker: Breaker) -> Self {
        Self {
            breaker,
            classify: Arc::new(RetryAfter),
        }
    }
}

impl<C> TripLayer<C> {
    /// Trips as `classify` says instead.
    pub fn classify<C2: TripOn>(self, classify: C2) -> TripLayer<C2> {
        TripLayer {
            breaker: self.breaker,
            classify: Arc::new(classify),
        }
    }
}

impl<S, C> Layer<S> for TripLayer<C> {
    type Service = TripService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        TripService {
            inner,
            breaker: self.breaker.clone(),
            classify: Arc::clone(&self.classify),
        }
    }
}

/// The service [`TripLayer`] makes.
#[derive(Debug, Clone)]
#[doc(hidden)]
pub struct TripService<S, C = RetryAfter> {
    inner: S,
    breaker: Breaker,
    classify: Arc<C>,
}

impl<S, C, Req, B> Service<Req> for TripService<S, C>
where
    S: Service<Req, Response = Response<B>>,
    C: TripOn + 'static,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = TripFuture<S::Future, C>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        TripFuture {
            fut: self.inner.call(request),
            breaker: Some(self.breaker.clone()),
            classify: Arc::clone(&self.classify),
        }
    }
}

pin_project! {
    /// The response future of [`TripService`].
    #[derive(Debug)]
    #[doc(hidden)]
    pub struct TripFuture<F, C> {
        #[pin]
        fut: F,
        breaker: Option<Breaker>,
        classify: Arc<C>,
    }
}

impl<F, C, B, E> Future for TripFuture<F, C>
where
    F: Future<Output = Result<Response<B>, E>>,
    C: TripOn + 'static,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = std::task::ready!(this.fut.poll(cx));
        if let (Ok(response), Some(breaker)) = (&result, this.breaker.take()) {
            trip(
                &breaker,
                &**this.classify,
                response.status(),
                response.headers(),
            );
        }
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_seconds_or_a_date_from_now_and_zero_is_no_trip() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(
                RETRY_AFTER,
                value.parse().unwrap_or_else(|_| unreachable!()),
            );
            headers
        };
        let at = |status, value: &str| retry_after_at(status, &with(value), now);
        let too_many = StatusCode::TOO_MANY_REQUESTS;
        assert_eq!(at(too_many, "120"), Some(Duration::from_secs(120)));
        assert_eq!(at(too_many, " 3 "), Some(Duration::from_secs(3)));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(
            at(StatusCode::SERVICE_UNAVAILABLE, &date),
            Some(Duration::from_secs(90))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(5));
        assert_eq!(at(too_many, &past), None, "a date past is no wait");
        for none in ["0", "-1", "1.5", "soon", "99999999999"] {
            assert_eq!(at(too_many, none), None, "{none}");
        }
        assert_eq!(at(StatusCode::BAD_GATEWAY, "5"), None);
        assert_eq!(at(StatusCode::OK, "5"), None);
    }
}
