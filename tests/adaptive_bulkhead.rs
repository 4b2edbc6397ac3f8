//! The adaptive bulkhead through the facade: `adaptive(min, max)` in a `.policy` bulkhead
//! (tests/policies/layer.policy) and inline in an attribute, one registry entry shared with
//! `operation_layer!` and a `BulkheadLayer`; the limit follows a dependency's capacity; the
//! admitted call allocates nothing. Feature `tower`; tokio's paused clock.
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    reason = "test helpers: an unexpected outcome fails the test"
)]

use std::time::Duration;

use tower::{Layer, Service, ServiceExt};
use velocity_policy::layer::{BoxError, BulkheadLayer};
use velocity_policy::{DeadlineExceeded, Registry, ResilienceError};
use velocity_policy_testkit::capacity::Capacity;

#[derive(Debug)]
enum AppError {
    Refused(#[expect(dead_code, reason = "only the variant is matched")] ResilienceError),
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

/// Binds by name to the file's operation: its adaptive bulkhead applies.
#[velocity_policy::operation("call_partner")]
async fn call_partner(partner: Capacity) -> Result<Duration, AppError> {
    Ok(partner.call().await)
}

/// An inline adaptive bulkhead.
#[velocity_policy::critical(bulkhead(adaptive(min = 3, max = 12)), deadline = "1s")]
async fn call_inline(partner: Capacity) -> Result<Duration, AppError> {
    Ok(partner.call().await)
}

/// `clients` tasks calling `call` again as soon as it answers, 2 ms after a refusal.
fn saturate<F, Fut>(clients: usize, call: F)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<Duration, AppError>> + Send,
{
    for _ in 0..clients {
        let call = call.clone();
        tokio::spawn(async move {
            loop {
                match call().await {
                    Ok(_) => {}
                    Err(AppError::Refused(_)) => {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    Err(AppError::TimedOut) => panic!("no call should reach its deadline"),
                }
            }
        });
    }
}

#[tokio::test(start_paused = true)]
async fn the_file_the_operation_layer_and_a_bulkhead_layer_share_one_adaptive_limit() {
    let partner = Capacity::new(6, Duration::from_millis(20));
    call_partner(partner.clone()).await.unwrap();
    let bulkhead = Registry::global()
        .find_bulkhead("adaptive_partners")
        .expect("the operation registered the file's bulkhead");
    let bounds = bulkhead.adaptive().expect("adaptive, as the file says");
    assert_eq!((bounds.min(), bounds.max()), (2, 16));
    assert_eq!(bulkhead.max_concurrent(), 2, "it starts at min");

    // The attribute function, the operation's layer and a plain BulkheadLayer all load it.
    {
        let partner = partner.clone();
        saturate(12, move || call_partner(partner.clone()));
    }
    let mut layered = BulkheadLayer::new(bulkhead.clone()).layer(tower::service_fn({
        let partner = partner.clone();
        move |()| {
            let call = partner.call();
            async move { Ok::<_, BoxError>(call.await) }
        }
    }));
    let mut operation =
        velocity_policy::operation_layer!("call_partner").layer(tower::service_fn({
            let partner = partner.clone();
            move |()| {
                let call = partner.call();
                async move { Ok::<_, BoxError>(call.await) }
            }
        }));
    let mut through_layers = 0;
    let end = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < end {
        for service in [&mut layered as &mut dyn CallOnce, &mut operation] {
            if service.call_once().await {
                through_layers += 1;
            } else {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }
    assert!(through_layers > 0);
    let slots = bulkhead.max_concurrent();
    assert!(
        (6..=8).contains(&slots),
        "the shared limit follows the partner's 6 calls at once: {slots}"
    );
    let row = Registry::global()
        .snapshot()
        .bulkheads
        .into_iter()
        .find(|row| &*row.name == "adaptive_partners")
        .unwrap();
    let adaptive = row.adaptive.unwrap();
    assert_eq!((adaptive.min, adaptive.max), (2, 16));
    assert_eq!(row.max_concurrent, slots);
    assert!(adaptive.windows > 10);
    let json = serde_json::to_value(&adaptive).unwrap();
    assert!(json["latency_noload_ms"].as_f64().unwrap() >= 20.0);
}

/// One call through a layered service: whether it was admitted.
trait CallOnce {
    fn call_once(&mut self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + '_>>;
}

impl<S> CallOnce for S
where
    S: Service<(), Response = Duration, Error = BoxError>,
{
    fn call_once(&mut self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + '_>> {
        Box::pin(async move { self.ready().await.unwrap().call(()).await.is_ok() })
    }
}

#[tokio::test(start_paused = true)]
async fn an_inline_adaptive_bulkhead_stays_within_its_bounds() {
    let partner = Capacity::new(64, Duration::from_millis(20));
    {
        let partner = partner.clone();
        saturate(40, move || call_inline(partner.clone()));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let row = Registry::global()
        .snapshot()
        .bulkheads
        .into_iter()
        .find(|row| row.adaptive.as_ref().is_some_and(|a| a.min == 3))
        .expect("the inline bulkhead is registered");
    assert_eq!(row.adaptive.unwrap().max, 12);
    assert_eq!(row.max_concurrent, 12, "grown to max, and no further");
}

#[velocity_policy::critical(bulkhead(adaptive(min = 4, max = 64)), deadline = "1s")]
async fn admitted(id: u64) -> Result<u64, AppError> {
    Ok(id)
}

#[test]
fn an_admitted_call_allocates_nothing() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        for i in 0..1_000 {
            admitted(i).await.unwrap();
        }
    });
    let counted = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                assert_eq!(admitted(i).await.unwrap(), i);
            }
        });
    });
    assert_eq!(counted.count_total, 0, "{counted:?}");
}
