//! When the work cannot run: a fallback per operation, which only ever drops privileges.
//!
//! # When the work cannot run: fallbacks per operation
//!
//! A refusal means the work never ran, so a fallback is the only useful response. A fallback
//! belongs to one function (a nested call that is refused does not use its caller's) and answers
//! its refusals and expiries, or its own failures too with `fallback_on_failure`. It takes the
//! function's arguments by reference and the reason; a mismatched signature is a compile error at
//! the attribute that says what was expected. Graceful degradation only ever drops privileges:
//! `velocity_policy::fallback::degrade` checks an answer against the most the caller could have had and
//! fails a debug assertion when a fallback widens it.
//!
//! ```rust
//! use velocity_policy::{CallError, DeadlineExceeded, ResilienceError};
//! use velocity_policy::fallback::{Privileges, degrade};
//!
//! #[derive(Debug, Clone, PartialEq)]
//! enum Session { Anonymous, User(u64) }
//! impl Privileges for Session {
//!     fn is_within(&self, ceiling: &Self) -> bool { *self == Session::Anonymous || self == ceiling }
//!     fn least() -> Self { Session::Anonymous }
//! }
//!
//! #[derive(Debug)]
//! enum AuthError { Store, Refused(ResilienceError), TimedOut(DeadlineExceeded) }
//! impl From<ResilienceError> for AuthError { fn from(e: ResilienceError) -> Self { Self::Refused(e) } }
//! impl From<DeadlineExceeded> for AuthError { fn from(e: DeadlineExceeded) -> Self { Self::TimedOut(e) } }
//!
//! /// The session store is down or slow: the request degrades to anonymous, never wider.
//! fn anonymous(claimed_user: &u64, _why: CallError<AuthError>) -> Result<Session, AuthError> {
//!     Ok(degrade(Session::Anonymous, &Session::User(*claimed_user)))
//! }
//!
//! #[velocity_policy::critical(deadline = "50ms", fallback = "anonymous")]
//! async fn lookup_session(claimed_user: u64) -> Result<Session, AuthError> {
//!     tokio::time::sleep(std::time::Duration::from_secs(1)).await; // the store hangs
//!     Ok(Session::User(claimed_user))
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! assert_eq!(lookup_session(7).await.unwrap(), Session::Anonymous);
//! # }
//! ```
//!
//! Less privileged is not "not allowed". A request degraded to anonymous because the session
//! store timed out must not be answered like one that really is anonymous: told 401, its client
//! signs in again, which cannot help. Let the fallback's answer say it is degraded and why (a
//! variant of its own, such as `Session::Degraded { because }`, granting what anonymous grants),
//! and where work needs the privilege answer 503 with the reason and a `Retry-After` for it, 401 or
//! 403 only for a caller the store said no to (the `velocity_policy::fallback` docs show it; the demo's
//! saves answer `503` with `x-degraded: anonymous` and `x-degraded-reason: deadline_exceeded`).
//!
//! `stale_if_error = "5m"` (feature `stale`) serves the last good result for the same arguments,
//! for at most that long, when the call is refused, expires or fails. Every fallback and every
//! stale answer is a tracing event (`kind = "fallback"` or `"stale"`) and a counter per operation in
//! `Registry::global().snapshot().fallbacks`.
