//! [`RateLimitLayer`]: may this capability run once more in this period? A
//! [`RateLimiter`](crate::limiter::RateLimiter) around a service.
//!
//! `call` asks the limiter. In process the decision is made there and then (one
//! compare-and-swap, no allocation): admitted, the inner future runs as it is; refused, the
//! response future is an immediate [`ResilienceError`](crate::ResilienceError) of kind
//! `rate_limited` whose [`retry_after`](crate::ResilienceError::retry_after) is the wait that
//! would admit the call, and the inner future is never polled. A fleet limiter (through a Redis
//! store) is asked in the response future, before the inner future is first polled; its
//! `on_timeout` and `on_error` decide when the store fails, as they do for the attribute.
//!
//! `poll_ready` forwards the inner readiness only: a limited call is refused, never held back
//! until the rate allows it (tower's `RateLimit` waits in `poll_ready` instead).
//!
//! Take the limiter from the [`Registry`](crate::Registry::rate_limiter): an attribute or a
//! `.policy` operation naming the same rate limit then shares its state and its snapshot row.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_runtime::layer::{BoxError, RateLimitLayer};
//! use velocity_policy_runtime::{RefusalKind, Registry, ResilienceError};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let signups = Registry::global().rate_limiter("signups-doc", 1, Duration::from_secs(1), |l| l);
//! let mut service = ServiceBuilder::new()
//!     .layer(RateLimitLayer::new(signups))
//!     .service_fn(|name: &'static str| async move { Ok::<_, BoxError>(name.len()) });
//! assert_eq!(service.ready().await.unwrap().call("ada").await.unwrap(), 3);
//! let error = service.ready().await.unwrap().call("bob").await.unwrap_err();
//! let refusal = error.downcast_ref::<ResilienceError>().unwrap();
//! assert_eq!(refusal.kind(), RefusalKind::RateLimited);
//! assert_eq!(refusal.retry_after(), Some(Duration::from_secs(1)));
//! # }
//! ```

mod future;
mod layer;
mod service;

pub use future::ResponseFuture;
pub use layer::RateLimitLayer;
pub use service::RateLimitService;
