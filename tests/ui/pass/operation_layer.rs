// A `.policy` operation as a tower layer over any service (no retry: no idempotence claim).
use velocity_policy::layer::BoxError;
use tower::{Layer, Service, ServiceExt};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let charge = tower::service_fn(|amount: u64| async move { Ok::<_, BoxError>(amount) });
    let mut charge = velocity_policy::operation_layer!("charge_card").layer(charge);
    assert_eq!(charge.ready().await.unwrap().call(5).await.unwrap(), 5);
}
