//! reqwest through `reqwest-middleware` (feature `reqwest`): the deadline on every outgoing
//! request, and the breaker a `Retry-After` trips.
//!
//! - [`DeadlineMiddleware`] sets `grpc-timeout` and the millisecond header from the current
//!   deadline minus a reserve, as [`PropagateDeadlineLayer`] does for tower clients (it is
//!   configured by one), and bounds the request's own timeout by the same budget: the call
//!   never waits past our deadline, whatever the client's timeout.
//! - [`BreakerMiddleware`] refuses at once while the breaker is open (the request is never
//!   sent; the error is the [`ResilienceError`](crate::ResilienceError), as
//!   [`reqwest_middleware::Error::Middleware`]), counts a transport error or a `5xx` as a
//!   failure and any other answer as a success, and trips the breaker for exactly as long as
//!   a `429` or `503` with `Retry-After` asks ([`RetryAfter`], or a [`TripOn`] of yours).
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::Registry;
//! use velocity_policy_runtime::client::reqwest::{BreakerMiddleware, DeadlineMiddleware};
//!
//! let partner = Registry::global().breaker("partner", |b| b);
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(DeadlineMiddleware::new().reserve(Duration::from_millis(20)))
//!     .with(BreakerMiddleware::new(partner))
//!     .build();
//! # let _ = client;
//! ```
//!
//! [`PropagateDeadlineLayer`]: crate::layer::PropagateDeadlineLayer

use std::sync::Arc;
use std::time::Duration;

use ::reqwest::{Request, Response};
use http::Extensions;
use reqwest_middleware::{Middleware, Next, Result};

use super::{RetryAfter, TripOn, trip};
use crate::Breaker;
use crate::layer::PropagateDeadlineLayer;

/// Carries the current deadline on outgoing reqwest requests; see the [module docs](self).
#[derive(Debug, Clone, Default)]
pub struct DeadlineMiddleware {
    headers: PropagateDeadlineLayer,
}

impl DeadlineMiddleware {
    /// Both headers, no reserve, every host.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stamps as `layer` is configured (its reserve, headers and hosts).
    pub fn from_layer(layer: PropagateDeadlineLayer) -> Self {
        Self { headers: layer }
    }

    /// Time held back for work after the call: the dependency is told what is left minus this.
    pub fn reserve(self, reserve: Duration) -> Self {
        Self {
            headers: self.headers.reserve(reserve),
        }
    }
}

#[async_trait::async_trait]
impl Middleware for DeadlineMiddleware {
    async fn handle(
        &self,
        mut request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<Response> {
        let host = request.url().host_str().map(str::to_owned);
        if let Some(left) = self.headers.stamp(host.as_deref(), request.headers_mut()) {
            let timeout = request.timeout_mut();
            *timeout = Some(timeout.map_or(left, |own| own.min(left)));
        }
        next.run(request, extensions).await
    }
}

/// A breaker around reqwest calls, tripped by `Retry-After`; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct BreakerMiddleware<C = RetryAfter> {
    breaker: Breaker,
    classify: Arc<C>,
}

impl BreakerMiddleware {
    /// Guards calls with `breaker`, tripped on a 429 or 503 with `Retry-After`
    /// ([`RetryAfter`]).
    pub fn new(breaker: Breaker) -> Self {
        Self {
            breaker,
            classify: Arc::new(RetryAfter),
        }
    }
}

impl<C> BreakerMiddleware<C> {
    /// Trips as `classify` says instead.
    pub fn classify<C2: TripOn>(self, classify: C2) -> BreakerMiddleware<C2> {
        BreakerMiddleware {
            breaker: self.breaker,
            classify: Arc::new(classify),
        }
    }
}

#[async_trait::async_trait]
impl<C: TripOn + 'static> Middleware for BreakerMiddleware<C> {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<Response> {
        self.breaker
            .check()
            .map_err(reqwest_middleware::Error::middleware)?;
        let result = next.run(request, extensions).await;
        match &result {
            Ok(response) => {
                let status = response.status();
                self.breaker.record(!status.is_server_error());
                trip(&self.breaker, &*self.classify, status, response.headers());
            }
            Err(_) => self.breaker.record_failure(),
        }
        result
    }
}
