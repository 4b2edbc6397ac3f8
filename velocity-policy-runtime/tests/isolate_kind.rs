//! `PoolKind::Rayon` exists whatever the features: with `rayon` the pool's work runs on its own
//! threads (named after the pool), without it on tokio's blocking pool, said in a log event.
//! Run both ways: `cargo test -p velocity-policy-runtime --test isolate_kind` (no `rayon`) and
//! with `--all-features`.
#![allow(clippy::unwrap_used, reason = "a test")]

use velocity_policy_runtime::isolate::{IsolatedPool, PoolKind};

#[tokio::test]
async fn a_rayon_pool_runs_on_its_own_threads_with_the_feature_and_on_tokios_without() {
    let pool = IsolatedPool::builder("crunch")
        .kind(PoolKind::Rayon)
        .max_concurrent(1)
        .build();
    let thread = pool
        .run(|| std::thread::current().name().map(str::to_owned))
        .await
        .unwrap();
    if cfg!(feature = "rayon") {
        assert_eq!(thread.as_deref(), Some("crunch-0"));
    } else {
        assert_ne!(thread.as_deref(), Some("crunch-0"), "{thread:?}");
    }
    let snapshot = pool.snapshot();
    assert_eq!(snapshot.kind, PoolKind::Rayon);
    assert_eq!(snapshot.finished, 1);
}
