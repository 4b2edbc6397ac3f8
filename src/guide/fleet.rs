//! A fleet of instances through Redis: shared breaker openings, fleet-wide rate limits, one set of overrides.
//!
//! # Sharing breakers across instances (Redis)
//!
//! With the `redis` feature, one line at startup shares breaker openings across every instance,
//! so a cold instance does not rediscover on its own that a provider is down:
//!
//! ```rust,no_run
//! # #[cfg(feature = "redis")]
//! # async fn startup() -> Result<(), Box<dyn std::error::Error>> {
//! # use std::sync::Arc;
//! velocity_policy::Registry::global().set_breaker_store(Arc::new(velocity_policy::redis_store::RedisStore::connect(&std::env::var("REDIS_URL")?).await?));
//! # Ok(())
//! # }
//! ```
//!
//! Each breaker says what it shares (`Sharing::TripsOnly`, or `Sharing::Openings { quorum }` so
//! one instance's own network trouble cannot open the fleet's breaker). The hot path still reads
//! only the in-process mirror (a closed breaker sends no Redis command), and a Redis outage
//! degrades sharing, never callers. Bulkheads still bound **one instance**: ten instances with
//! four slots each put forty calls at the dependency. The same store makes rate limits fleet-wide
//! (`Registry::global().set_limiter_store(store)`, see [`guide::rate_limits`](crate::guide::rate_limits)), each with
//! `on_timeout` and `on_error` as separate decisions (`open`, `closed`, or by default `local`: an
//! outage degrades the fleet's rate to a per-instance one, and after one failed call no caller
//! waits on Redis until a background probe finds it again). Details and
//! key names: `velocity_policy_runtime::redis_store`.
//!
//! The same store runs on a Redis Cluster (`RedisStore::builder().connect_cluster(nodes)`: every
//! breaker's keys share a hash slot, openings travel on sharded pub/sub) and behind Redis Sentinel
//! (`connect_sentinel(sentinels, service)`: a failover costs what an outage costs), and over
//! `rediss://`; callers cannot tell them apart, and no connection string
//! is ever printed. Tests start a three-primary cluster, a Sentinel setup and a TLS server of their
//! own and kill primaries mid-run. What a fleet costs Redis (200 simulated instances: 0 commands
//! per call, an opening to all of them in 4.5 ms at the median) and where the design stops scaling
//! is in BENCHMARKS.md (`cargo run --release --example fleet --features redis`).
//!
//! **What comes from Redis is input, not truth.** Whoever can write to your Redis can already do
//! much (delete the shared state, fill its memory), but cannot disable a dependency for longer
//! than each instance's own configuration allows, or grow an instance. An opening from another
//! instance lasts at most the receiving breaker's cooldown (a trip: at most its
//! `max_retry_after`, 5 minutes by default, which also caps a local `Retry-After`); a malformed,
//! oversized or out-of-range message is dropped, counted in the store's status (`rejected`) and
//! logged as `store_message_rejected` with a `reason`; openings for breakers not built yet are
//! bounded (`pending_capacity`, 1,024 names). Without a secret, someone who can publish can still
//! open a breaker for one local bound per message, as long as they keep publishing, visibly; give
//! the fleet a shared secret and only messages it signed are taken, and a replayed one only while
//! its own opening lasts:
//!
//! ```rust,no_run
//! # #[cfg(feature = "redis")]
//! # async fn startup() -> Result<(), Box<dyn std::error::Error>> {
//! let store = velocity_policy::redis_store::RedisStore::builder()
//!     .shared_secret(std::env::var("POLICY_REDIS_SECRET")?) // never sent to Redis, never printed
//!     .connect(&std::env::var("REDIS_URL")?)
//!     .await?;
//! # let _ = store;
//! # Ok(())
//! # }
//! ```
//!
//! # One set for the whole fleet
//!
//! With the features `overrides` and `redis`, a set published once reaches every instance through
//! the Redis store. `velocity_policy::overrides::publish(&store, dir)` stores the directory's files (names
//! and texts) under one key, `<prefix>:overrides:{fleet}`, and announces it on a channel; each
//! instance that follows validates the set against its own compiled policy, then applies it through
//! the reload's path or refuses it with the same diagnostic and keeps its set. The key is the
//! truth: an instance reads it when it starts following (so one started after a publication starts
//! on the latest set), on each announcement, after a reconnection and at each re-sync (5 s), so a
//! missed message costs one re-sync. With the store's shared secret, only sets signed with it are
//! taken. The dashboard and `/policy` (`overrides.fleet`) show the set's version, publisher and
//! publication time instead of a directory. There is no `policy publish` command: the CLI does not
//! link the runtime or Redis, and its size budget has no room for them.
//!
//! ```rust,no_run
//! # #[cfg(all(feature = "overrides", feature = "redis"))]
//! # async fn fleet() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! let store = velocity_policy::redis_store::RedisStore::builder()
//!     .shared_secret(std::env::var("POLICY_REDIS_SECRET")?)
//!     .connect(&std::env::var("REDIS_URL")?)
//!     .await?;
//! let overrides = Arc::new(velocity_policy::overrides::load("policies")?);
//! // Every instance: the latest published set now, then each one published later.
//! let _following = overrides.follow(&store).await;
//! // One instance (or an admin binary), once `policy check --against` passed:
//! velocity_policy::overrides::publish(&store, "policies/production").await?;
//! # Ok(())
//! # }
//! # fn main() {}
//! ```
//!
//! `velocity-policy-runtime/tests/overrides_fleet.rs` runs two instances against a real `redis-server`.
