//! Rate limits: how many calls start per period, in one instance or across the fleet.
//!
//! # Rate limits
//!
//! A rate limit bounds how many calls start per period (sign ups per minute, a provider's quota),
//! where a bulkhead bounds how many run at once. With no feature to turn on
//! it runs from all three interfaces, and one name is one limiter with one state:
//!
//! ```rust,ignore
//! // policies/accounts.policy:
//! //   ratelimit signups { 100 per 1m; on_timeout = closed; on_error = closed }
//! //   operation sign_up: critical { ratelimit = signups; deadline = 2s }
//!
//! /// Bound to the file's operation of the same name: its rate limit applies.
//! #[velocity_policy::critical]
//! async fn sign_up(email: String) -> Result<UserId, AppError> { /* ... */ }
//!
//! /// Or named from the attribute.
//! #[velocity_policy::critical(ratelimit = "signups", deadline = "2s")]
//! async fn invite(email: String) -> Result<UserId, AppError> { /* ... */ }
//! ```
//!
//! The expansion adds one step, `ratelimit.acquire().await`, after the deadline and the shedding
//! decision and before the breaker: once per call, not per attempt. Over the rate, the call is a
//! refusal (`ResilienceError` of kind `RateLimited`, the work never ran) whose `retry_after()` is
//! the wait that would admit it (`retry_after_ms` in JSON and in the refusal's event), ready for a
//! `Retry-After` header. A tower service takes the same limiter from the registry:
//!
//! ```rust
//! # #[cfg(feature = "tower")]
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use std::time::Duration;
//! use velocity_policy::layer::{BoxError, RateLimitLayer};
//! use velocity_policy::{RefusalKind, Registry, ResilienceError};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! // The entry `ratelimit = "signups"` and `operation { ratelimit = signups }` use.
//! let signups = Registry::global().rate_limiter("signups", 100, Duration::from_secs(60), |l| l);
//! let mut service = ServiceBuilder::new()
//!     .layer(RateLimitLayer::new(signups))
//!     .service_fn(|email: String| async move { Ok::<_, BoxError>(email.len()) });
//! for _ in 0..100 {
//!     service.ready().await.unwrap().call("ada@example.com".into()).await.unwrap();
//! }
//! let error = service.ready().await.unwrap().call("bob@example.com".into()).await.unwrap_err();
//! let refusal = error.downcast_ref::<ResilienceError>().unwrap();
//! assert_eq!(refusal.kind(), RefusalKind::RateLimited);
//! assert_eq!(refusal.retry_after(), Some(Duration::from_millis(600))); // one call per 600 ms
//! # }
//! # #[cfg(not(feature = "tower"))]
//! # fn main() {}
//! ```
//!
//! By default a limiter decides in this process (GCRA from the `governor` crate on tokio's clock:
//! one compare-and-swap, no allocation, no lock), so it bounds **one instance**. With the `redis`
//! feature, `Registry::global().set_limiter_store(store)` at startup makes the limiters built after
//! it fleet-wide (one Lua round trip each), and then `on_timeout` and `on_error` decide what a slow
//! or a down store means: `closed` refuses (a limiter guarding unbounded work), `open` admits
//! (best-effort work), `local`, the default, keeps this instance's own rate (`local_rate`). A
//! limiter that guards critical work must choose both (`policy::ratelimit-fail-mode-unset`);
//! best-effort work may leave them to the default. A limiter's settings are one plain value,
//! `limiter::RateLimitConfig` (`RateLimitConfig::new(100, Duration::from_secs(60))
//! .with_on_timeout(FailMode::Closed)`, a `const` if you like), which a stanza becomes and
//! `RateLimiter::from_config(name, config)` or the registry's `|l| l.config(config)` takes.
//! `Registry::snapshot().limiters` lists every limiter with its scope, its `config` and its
//! admitted and refused counts.
