//! The Redis store over TLS (`rediss://`, feature `redis`), against a `redis-server` the
//! test starts with a certificate from a CA made for it (`velocity_policy_testkit::RedisTcpServer::
//! start_tls`): openings shared as over plain TCP when the store trusts that CA, and, when it
//! does not, no connection at all, which callers do not notice.
#![cfg(feature = "redis")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use velocity_policy_runtime::redis_store::RedisStore;
use velocity_policy_runtime::{Breaker, Sharing};
use velocity_policy_testkit::RedisTcpServer;

fn breaker(store: &Arc<RedisStore>) -> Breaker {
    Breaker::builder("payments")
        .sharing(Sharing::TripsOnly)
        .store(store.clone())
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_openings_are_shared_and_an_unknown_certificate_is_refused() {
    let Some(server) = RedisTcpServer::start_tls() else {
        return;
    };
    let url = server.tls_url().unwrap();
    let trusting = || async {
        Arc::new(
            RedisStore::builder()
                .prefix(server.key_prefix("tls"))
                .timeout(Duration::from_secs(2))
                .tls_root_certificate(server.tls_ca().unwrap())
                .connect(&url)
                .await
                .unwrap(),
        )
    };
    let (a, b) = (trusting().await, trusting().await);
    let (pa, pb) = (breaker(&a), breaker(&b));
    pa.trip(Duration::from_secs(30), "429 Too Many Requests");
    let start = Instant::now();
    while pb.check().is_ok() && start.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(pb.check().is_err(), "the trip reached B over TLS");
    assert!(a.is_healthy() && b.is_healthy());
    assert!(
        server.command_calls().get("evalsha").copied().unwrap_or(0) > 0,
        "the scripts ran on the TLS server"
    );

    // The platform's roots do not know the test's CA: no connection, sharing degraded, and
    // callers see nothing but their own breaker.
    let stranger = Arc::new(
        RedisStore::builder()
            .prefix(server.key_prefix("tls"))
            .timeout(Duration::from_millis(500))
            .connect(&url)
            .await
            .unwrap(),
    );
    let ps = breaker(&stranger);
    assert!(!stranger.is_healthy(), "the certificate was not trusted");
    assert!(
        ps.check().is_ok(),
        "it never learned the trip, and its callers carry on"
    );
    assert!(stranger.snapshot().failed > 0);
}
