//! `#[isolate(pool = "rayon")]` with the `rayon` feature: the work runs on the pool's own
//! threads, named after it. (Without the feature the attribute does not compile:
//! `tests/ui/fail/rayon_without_feature.rs`.)
#![allow(clippy::unwrap_used, reason = "a test")]

use velocity_policy::Registry;
use velocity_policy::isolate::PoolKind;

#[velocity_policy::isolate(pool = "rayon", max_concurrent = 1)]
fn crunch_on_rayon() -> Option<String> {
    std::thread::current().name().map(str::to_owned)
}

#[tokio::test]
async fn an_attribute_pool_of_kind_rayon_runs_on_its_own_threads() {
    let thread = crunch_on_rayon().await.unwrap().unwrap();
    assert!(thread.ends_with("crunch_on_rayon-0"), "{thread}");
    let pool = Registry::global()
        .snapshot()
        .isolated
        .into_iter()
        .find(|p| &*p.display_name == "crunch_on_rayon")
        .unwrap();
    assert_eq!(pool.kind, PoolKind::Rayon);
    assert_eq!(pool.finished, 1);
}
