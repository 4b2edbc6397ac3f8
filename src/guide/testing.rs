//! Testing your policies with `velocity-policy-testkit`: a fake dependency, a registry per test, assertions on the paused clock.
//!
//! # Testing your policies
//!
//! `velocity-policy-testkit` is a test kit for your own tests of your own annotated functions: add it to
//! your `[dev-dependencies]` with only the features you use.
//!
//! ```toml
//! [dev-dependencies]
//! velocity-policy-testkit = { version = "0.1", features = ["fake", "isolation", "assert", "store"] } # "fake-http" for the HTTP server
//! tokio = { version = "1", features = ["macros", "rt", "time", "test-util"] }
//! ```
//!
//! A test that injects a slow dependency and asserts the latency bound and the breaker opening,
//! on tokio's paused clock (no real time passes), as `velocity-policy-testkit/tests/testing_your_policies.rs` runs it:
//!
//! ```rust
//! # use std::time::Duration;
//! use velocity_policy_testkit::assert::{breaker_opens_after, no_call_outlives};
//! # #[derive(Debug)] enum Error { Refused, TimedOut }
//! # impl From<velocity_policy::ResilienceError> for Error { fn from(_: velocity_policy::ResilienceError) -> Self { Self::Refused } }
//! # impl From<velocity_policy::DeadlineExceeded> for Error { fn from(_: velocity_policy::DeadlineExceeded) -> Self { Self::TimedOut } }
//!
//! #[velocity_policy::resilient(breaker(failures = 3, within = "30s", cooldown = "10s"), deadline = "200ms")]
//! async fn quote_price() -> Result<u32, Error> {
//!     tokio::time::sleep(Duration::from_secs(5)).await; // the slow dependency
//!     Ok(42)
//! }
//!
//! // #[tokio::test(start_paused = true)]
//! async fn a_slow_dependency_is_bounded_and_opens_its_breaker() {
//!     let _test = velocity_policy_testkit::isolation::isolate(); // a registry of its own
//!     let latency = no_call_outlives(Duration::from_secs(1), 2, quote_price).await;
//!     assert_eq!(latency.max, Duration::from_millis(200)); // the function's deadline, not 5 s
//!     velocity_policy_testkit::isolation::reset(); // forget those two timeouts
//!     let breaker = breaker_opens_after("quote_price", 3, Duration::from_secs(30), quote_price).await;
//!     assert_eq!(breaker.open_for, Some(Duration::from_secs(10)));
//! }
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() { a_slow_dependency_is_bounded_and_opens_its_breaker().await }
//! ```
//!
//! ## A fake dependency
//!
//! `velocity_policy_testkit::fake::FakeDependency` is a dependency your test scripts and switches while it
//! runs: healthy (with a latency), slow (a fixed delay or a range), down (a 503), rate limited (a
//! 429 with its `Retry-After`), flaky at a rate (which calls fail is fixed by a seed, so a run
//! repeats), or a script of phases ("healthy for 10 calls, then down for 5 s, then healthy"). It
//! counts its calls per outcome, the calls in flight and the most at once, and the calls whose
//! caller stopped waiting. Its delays are tokio's, so on the paused clock a slow dependency takes
//! no real time. Its error, `FakeError`, is a `thiserror` type you wrap in your own; its
//! `is_transient` is true for a 503 and false for a 429, whose `retry_after()` you can give to a
//! breaker's `trip`.
//!
//! Your `#[resilient]` function against it, the deadline bounding a slow call and the breaker
//! opening after the dependency goes down:
//!
//! ```rust
//! use std::time::Duration;
//! use velocity_policy::{DeadlineExceeded, RefusalKind, ResilienceError};
//! use velocity_policy_testkit::fake::{Behaviour, FakeDependency, FakeError};
//!
//! #[derive(Debug, thiserror::Error)]
//! enum SearchError {
//!     #[error(transparent)]
//!     Dependency(#[from] FakeError),
//!     #[error(transparent)]
//!     Refused(#[from] ResilienceError),
//!     #[error(transparent)]
//!     TimedOut(#[from] DeadlineExceeded),
//! }
//!
//! #[velocity_policy::resilient(breaker(failures = 3, within = "30s", cooldown = "10s"), deadline = "500ms")]
//! async fn search(search: &FakeDependency) -> Result<u64, SearchError> {
//!     Ok(search.call().await?.call)
//! }
//!
//! // In your tests: `#[tokio::test(start_paused = true)]` on `async fn a_test()`.
//! #[tokio::main(flavor = "current_thread", start_paused = true)]
//! async fn main() {
//!     let dependency = FakeDependency::new("search").with(Behaviour::slow(Duration::from_secs(2)));
//!     let start = tokio::time::Instant::now();
//!     assert!(matches!(search(&dependency).await, Err(SearchError::TimedOut(_))));
//!     assert_eq!(start.elapsed(), Duration::from_millis(500));
//!
//!     dependency.set(Behaviour::down());
//!     for _ in 0..2 {
//!         assert!(matches!(search(&dependency).await, Err(SearchError::Dependency(_))));
//!     }
//!     let Err(SearchError::Refused(refusal)) = search(&dependency).await else { panic!() };
//!     assert_eq!(refusal.kind(), RefusalKind::BreakerOpen);
//!     assert_eq!(dependency.counts().calls, 3, "the open breaker refused without calling");
//! }
//! ```
//!
//! With feature `fake-http`, `velocity_policy_testkit::fake::http::FakeHttpDependency::start("search")`
//! serves the same dependency on a free loopback port (`url()`): a 200 after its latency, a 503
//! while down, a 429 with a `Retry-After` header, `POST /_mode` with `slow 800ms` to switch it
//! from outside. It also counts calls per caller (the `x-caller` header) and records the budgets
//! callers propagated (`x-deadline-ms`, `grpc-timeout`). The demo's search provider, notifier and
//! session store are this server, with their own names, latencies and routes
//! (`examples/demo/src/providers.rs`).
//!
//! ## A registry per test
//!
//! Named mechanisms are process-global: every function naming the breaker `search` shares one
//! breaker, and the test harness runs a binary's tests in parallel. So a test that opens it would
//! open it for every test running at that moment. `velocity_policy_testkit::isolation::isolate()` (feature
//! `isolation`) gives the calling test a registry of its own until the guard drops: the
//! attributes' mechanisms, `Registry::global()` and what reads it (`find_breaker`, the snapshot,
//! layers and overrides built in the test) resolve to it.
//!
//! ```rust
//! # use std::time::Duration;
//! use velocity_policy::{Registry, breaker::BreakerState};
//!
//! // #[tokio::test(start_paused = true)]
//! async fn trips_only_its_own_breaker() {
//!     let test = velocity_policy_testkit::isolation::isolate();
//!     Registry::global().breaker("search", |b| b).trip(Duration::from_secs(30), "429");
//!     assert_eq!(test.registry().find_breaker("search").unwrap().state(), BreakerState::Open);
//! }
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! #     trips_only_its_own_breaker().await;
//! #     assert!(Registry::global().find_breaker("search").is_none()); // the process never saw it
//! # }
//! ```
//!
//! - It rests on `velocity-policy-runtime`'s feature `test-registry`, which only the test kit turns on, as a
//!   dev-dependency: your service's build has none of it (a handle stays one atomic load), and
//!   `velocity-policy-testkit/tests/isolation.rs` checks that the default build of `policy` resolves without it.
//! - The scope is the test's thread. `#[tokio::test]` runs a current-thread runtime there, so the
//!   test and every task it spawns see it. On a multi-thread runtime a bare `tokio::spawn` runs on
//!   a worker thread and does not: spawn with `velocity_policy_testkit::isolation::spawn`, which carries it.
//!   `isolated(async { .. })` isolates one future instead of a thread.
//! - What the registry does not hold stays process-wide: deferred work's and background pools'
//!   counts, a stale-if-error cache, a metrics recorder.
//! - Each test's registry is leaked (mechanisms are borrowed for `'static`): a few kilobytes per
//!   test, in test binaries only.
//! - Tests that run one after another can share the process's registry and call
//!   `velocity_policy_testkit::isolation::reset()` (`Registry::reset_state`): every breaker closed, its
//!   window and counters empty.
//!
//! ## Assertions on the paused clock
//!
//! `velocity_policy_testkit::assert` (feature `assert`) drives your functions and reads what the
//! mechanisms did from the registry; each returns a report of the numbers it saw, and panics with
//! the numbers and the fix when the mechanism does not do what it asserts:
//!
//! | helper | asserts |
//! |---|---|
//! | `breaker_opens_after(name, n, window, call)` | the breaker opens after exactly `n` failures inside `window`, not after failures spread wider, then refuses |
//! | `no_call_outlives(deadline, calls, call)` | under a request deadline, no call takes longer than it |
//! | `retries_within_budget(retry, calls, &attempts, call)` | attempts per call within the policy's `attempts`, retries within its allowance, no retry besides the policy's |
//! | `critical_never_shed(bulkhead, calls, critical, optional)` | at the load that sheds the optional work, every critical call is admitted |
//!
//! Each needs the paused clock (`#[tokio::test(start_paused = true)]`) and says so when it runs on
//! a running one. A name is the mechanism's, or the function's for an inline one
//! (`breaker(failures = 3, ..)` is named after the function's path; its last segment finds it).
//!
//! ## Fleet behaviour without Redis
//!
//! `velocity_policy_testkit::store::SharedMemory` (feature `store`) is one in-memory "Redis" for several
//! instances: `SharedMemory::instance("a")` is instance `a`'s `BreakerStore`, and openings and
//! fleet failure counts travel between them by the Redis store's rules (what each breaker's
//! `Sharing` shares, the quorum, the receiver's own bound on what it accepts, the status counters
//! a dashboard reads), synchronously and on tokio's clock. `set_reachable(false)`, for the whole
//! store or one instance, is the outage: every instance decides alone, the status says
//! `healthy: false`, and when it is back each instance pushes its own openings and loads the
//! fleet's, as a Redis store does after reconnecting.
//!
//! ```rust
//! # use std::time::Duration;
//! use velocity_policy::{Breaker, Sharing, breaker::BreakerState};
//! use velocity_policy_testkit::store::SharedMemory;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let redis = SharedMemory::new();
//! let on = |id| Breaker::builder("payments").sharing(Sharing::TripsOnly).store(redis.instance(id)).build();
//! let (a, b) = (on("a"), on("b"));
//! a.trip(Duration::from_secs(10), "429 Too Many Requests");
//! assert_eq!(b.state(), BreakerState::Open); // b heard it from the store
//! # }
//! ```
//!
//! For integration tests against a real server, `velocity_policy_testkit::RedisServer::start()` runs a
//! private `redis-server` on a unix socket in a temporary folder (`RedisCluster` and
//! `RedisSentinel` a cluster and a Sentinel set), so the same test can run on `RedisStore`.
