//! Hedging from the attributes and a `.policy` operation (tests/policies/service.policy): a
//! second attempt after the delay, the first answer wins and the other attempt is dropped, each
//! hedge goes through the breaker and the bulkhead and a refusal is not hedged, hedges and
//! retries share one allowance, and the registry's snapshot counts it all. Paused clock.
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    reason = "test helpers: an unexpected outcome fails the test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use velocity_policy::{DeadlineExceeded, RefusalKind, Registry, ResilienceError};

#[derive(Debug)]
enum AppError {
    Refused(ResilienceError),
    TimedOut,
}

impl From<ResilienceError> for AppError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for AppError {
    fn from(_: DeadlineExceeded) -> Self {
        Self::TimedOut
    }
}

impl velocity_policy::Transient for AppError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::TimedOut)
    }
}

/// A dependency whose attempts take the times in `took`, in the order they start, each
/// counted alive from its start to its drop.
#[derive(Clone)]
struct Dependency {
    took: Arc<[u64]>,
    started: Arc<AtomicU32>,
    alive: Arc<AtomicUsize>,
}

impl Dependency {
    fn new(took: &[u64]) -> Self {
        Self {
            took: took.into(),
            started: Arc::default(),
            alive: Arc::default(),
        }
    }

    /// One attempt: its number (from 1), after its time.
    async fn call(&self) -> u32 {
        let number = self.started.fetch_add(1, Ordering::SeqCst) + 1;
        self.alive.fetch_add(1, Ordering::SeqCst);
        let _alive = Alive(self.alive.clone());
        let ms = self.took[(number as usize - 1) % self.took.len()];
        tokio::time::sleep(Duration::from_millis(ms)).await;
        number
    }
}

/// Counts an attempt dead when its future is dropped, answered or cancelled.
struct Alive(Arc<AtomicUsize>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[velocity_policy::critical(hedge(after = "50ms", max = 2), deadline = "1s")]
#[velocity_policy::idempotent]
async fn fetch(dependency: Dependency) -> Result<u32, AppError> {
    Ok(dependency.call().await)
}

#[tokio::test(start_paused = true)]
async fn the_hedge_answers_first_and_the_first_attempt_is_dropped() {
    let dependency = Dependency::new(&[400, 30]);
    let at = Instant::now();
    assert_eq!(fetch(dependency.clone()).await.unwrap(), 2);
    assert_eq!(at.elapsed(), Duration::from_millis(80), "50 ms, then 30 ms");
    assert_eq!(dependency.started.load(Ordering::SeqCst), 2);
    assert_eq!(
        dependency.alive.load(Ordering::SeqCst),
        0,
        "the first attempt was cancelled"
    );

    // Fast enough: no hedge at all.
    let dependency = Dependency::new(&[20]);
    assert_eq!(fetch(dependency.clone()).await.unwrap(), 1);
    assert_eq!(dependency.started.load(Ordering::SeqCst), 1);

    // The first attempt answers while its hedge runs: the hedge is dropped.
    let dependency = Dependency::new(&[70, 500]);
    assert_eq!(fetch(dependency.clone()).await.unwrap(), 1);
    assert_eq!(dependency.alive.load(Ordering::SeqCst), 0);

    let hedge = Registry::global().find_hedge(fetch_hedge_name()).unwrap();
    let s = hedge.snapshot();
    assert_eq!((s.calls, s.started, s.won, s.lost), (3, 2, 1, 1));
}

/// The inline hedge's registry name: the operation's, made unique by the module path.
fn fetch_hedge_name() -> &'static str {
    concat!(module_path!(), "::", "fetch")
}

/// One slot and no queue: the hedge cannot get a permit while the first attempt holds it.
#[velocity_policy::critical(
    hedge(after = "50ms"),
    bulkhead(max_concurrent = 1),
    breaker(failures = 1, within = "10s", cooldown = "5s"),
    deadline = "1s"
)]
#[velocity_policy::idempotent]
async fn guarded(dependency: Dependency, fail: bool) -> Result<u32, AppError> {
    if fail {
        return Err(AppError::TimedOut);
    }
    Ok(dependency.call().await)
}

#[tokio::test(start_paused = true)]
async fn each_hedge_goes_through_the_bulkhead_and_the_breaker_and_a_refusal_is_not_hedged() {
    let name = concat!(module_path!(), "::", "guarded");
    let dependency = Dependency::new(&[200, 10]);
    let at = Instant::now();
    // The hedge is refused by the full bulkhead: the first attempt's answer stands.
    assert_eq!(guarded(dependency.clone(), false).await.unwrap(), 1);
    assert_eq!(at.elapsed(), Duration::from_millis(200));
    assert_eq!(
        dependency.started.load(Ordering::SeqCst),
        1,
        "the refused hedge never reached the dependency"
    );
    let hedge = Registry::global().find_hedge(name).unwrap().snapshot();
    assert_eq!((hedge.started, hedge.refused, hedge.won), (1, 1, 0));
    let bulkhead = Registry::global().find_bulkhead(name).unwrap().snapshot();
    assert_eq!(bulkhead.refused_full, 1);

    // One failure opens the breaker: the next call is refused at once, and not hedged.
    assert!(matches!(
        guarded(dependency.clone(), true).await,
        Err(AppError::TimedOut)
    ));
    let at = Instant::now();
    match guarded(dependency.clone(), false).await {
        Err(AppError::Refused(refusal)) => assert_eq!(refusal.kind(), RefusalKind::BreakerOpen),
        other => panic!("expected the breaker's refusal, got {other:?}"),
    }
    assert_eq!(at.elapsed(), Duration::ZERO);
    let after = Registry::global().find_hedge(name).unwrap().snapshot();
    assert_eq!(after.started, hedge.started, "no hedge of a refusal");
}

/// Bound by name to `hedged_lookup` in tests/policies/service.policy: its retry and its
/// hedge, which share the retry's allowance.
#[velocity_policy::operation("hedged_lookup")]
async fn hedged_lookup(dependency: Dependency) -> Result<u32, AppError> {
    Ok(dependency.call().await)
}

#[tokio::test(start_paused = true)]
async fn a_policy_files_hedge_follows_its_percentile_and_draws_from_the_retrys_allowance() {
    let hedge = || Registry::global().find_hedge("lookup_tail");
    // 20 calls of 10 ms: p90 is about 10 ms (its bucket's end, at most 1/8 above).
    for _ in 0..20 {
        let dependency = Dependency::new(&[10]);
        assert_eq!(hedged_lookup(dependency).await.unwrap(), 1);
    }
    let delay = hedge().unwrap().delay().unwrap();
    assert!(
        delay >= Duration::from_millis(10) && delay <= Duration::from_micros(11_250),
        "{delay:?}"
    );
    assert_eq!(hedge().unwrap().snapshot().started, 0);
    let dependency = Dependency::new(&[300, 5]);
    let at = Instant::now();
    assert_eq!(hedged_lookup(dependency).await.unwrap(), 2);
    assert!(
        at.elapsed() <= delay + Duration::from_millis(7),
        "{:?}",
        at.elapsed()
    );

    // The retry's allowance is what the hedges withdraw from: spend it, and hedging stops.
    let retry = Registry::global().retry("lookup_retry", |r| r);
    while retry.allowance().try_withdraw() {}
    let dependency = Dependency::new(&[300, 5]);
    let at = Instant::now();
    assert_eq!(hedged_lookup(dependency.clone()).await.unwrap(), 1);
    assert_eq!(at.elapsed(), Duration::from_millis(300));
    assert_eq!(dependency.started.load(Ordering::SeqCst), 1, "no hedge");
    let s = hedge().unwrap().snapshot();
    assert_eq!((s.started, s.won, s.stopped_by_budget), (1, 1, 1));
    let row = Registry::global()
        .snapshot()
        .hedges
        .into_iter()
        .find(|h| &*h.name == "lookup_tail")
        .unwrap();
    assert_eq!(row.after, "p90");
}

/// Names the file's hedge; the tower layer below shares it by name.
#[velocity_policy::critical(hedge = "shared_tail", deadline = "1s")]
#[velocity_policy::idempotent]
async fn shared(dependency: Dependency) -> Result<u32, AppError> {
    Ok(dependency.call().await)
}

#[tokio::test(start_paused = true)]
async fn a_hedge_layer_shares_the_attributes_hedge_and_goes_through_the_bulkhead_below_it() {
    use tower::{Service, ServiceBuilder, ServiceExt};
    use velocity_policy::layer::{BoxError, BulkheadLayer, HedgeLayer, IdempotentLayer};

    let dependency = Dependency::new(&[300, 10]);
    assert_eq!(shared(dependency).await.unwrap(), 2);
    let hedge = Registry::global().find_hedge("shared_tail").unwrap();
    assert_eq!(hedge.snapshot().won, 1);

    let dependency = Dependency::new(&[300, 10]);
    let service_dependency = dependency.clone();
    let bulkhead = Registry::global().bulkhead("hedge-layer-test", |b| b.max_concurrent(2));
    let mut service = ServiceBuilder::new()
        .layer(HedgeLayer::new(hedge.clone()))
        .layer(IdempotentLayer)
        .layer(BulkheadLayer::new(bulkhead.clone()))
        .service_fn(move |()| {
            let dependency = service_dependency.clone();
            async move { Ok::<_, BoxError>(dependency.call().await) }
        });
    let at = Instant::now();
    assert_eq!(service.ready().await.unwrap().call(()).await.unwrap(), 2);
    assert_eq!(at.elapsed(), Duration::from_millis(50));
    assert_eq!(
        dependency.alive.load(Ordering::SeqCst),
        0,
        "the first was dropped"
    );
    assert_eq!(bulkhead.snapshot().running, 0, "both permits given back");
    let s = hedge.snapshot();
    assert_eq!((s.calls, s.started, s.won), (2, 2, 2), "one state for both");

    // A bulkhead of one: the hedge is refused below the layer and the first answer stands.
    let one = Registry::global().bulkhead("hedge-layer-test-one", |b| b.max_concurrent(1));
    let dependency = Dependency::new(&[300, 10]);
    let service_dependency = dependency.clone();
    let mut service = ServiceBuilder::new()
        .layer(HedgeLayer::new(hedge.clone()))
        .layer(IdempotentLayer)
        .layer(BulkheadLayer::new(one.clone()))
        .service_fn(move |()| {
            let dependency = service_dependency.clone();
            async move { Ok::<_, BoxError>(dependency.call().await) }
        });
    assert_eq!(service.ready().await.unwrap().call(()).await.unwrap(), 1);
    assert_eq!(dependency.started.load(Ordering::SeqCst), 1);
    assert_eq!(one.snapshot().refused_full, 1);
    assert_eq!(hedge.snapshot().refused, 1);
}

#[tokio::test(start_paused = true)]
async fn below_a_retry_layer_the_hedges_draw_from_the_retrys_allowance() {
    use tower::{Service, ServiceBuilder, ServiceExt};
    use velocity_policy::layer::{BoxError, HedgeLayer, IdempotentLayer, RetryLayer};

    let retry = Registry::global().retry("hedge-layer-retry", |r| r.attempts(2));
    let hedge = Registry::global().hedge("hedge-layer-within-retry", |h| {
        h.after(Duration::from_millis(20))
    });
    let dependency = Dependency::new(&[300, 5]);
    let service_dependency = dependency.clone();
    let mut service = ServiceBuilder::new()
        .layer(RetryLayer::new(retry.clone()))
        .layer(IdempotentLayer)
        .layer(HedgeLayer::new(hedge.clone()).within_retry(retry.clone()))
        .layer(IdempotentLayer)
        .service_fn(move |()| {
            let dependency = service_dependency.clone();
            async move { Ok::<_, BoxError>(dependency.call().await) }
        });
    assert_eq!(service.ready().await.unwrap().call(()).await.unwrap(), 2);
    assert_eq!(
        retry.allowance().snapshot().calls,
        1,
        "counted once, by the retry layer"
    );
    assert_eq!(
        hedge.allowance().snapshot().calls,
        0,
        "not in the hedge's own"
    );
    assert_eq!(
        retry.allowance().snapshot().retries,
        1,
        "the hedge withdrew from it"
    );

    // The retry's allowance spent: no hedge.
    while retry.allowance().try_withdraw() {}
    let dependency = Dependency::new(&[300, 5]);
    let service_dependency = dependency.clone();
    let mut service = ServiceBuilder::new()
        .layer(HedgeLayer::new(hedge.clone()).within_retry(retry.clone()))
        .layer(IdempotentLayer)
        .service_fn(move |()| {
            let dependency = service_dependency.clone();
            async move { Ok::<_, BoxError>(dependency.call().await) }
        });
    assert_eq!(service.ready().await.unwrap().call(()).await.unwrap(), 1);
    assert_eq!(hedge.snapshot().stopped_by_budget, 1);
}
