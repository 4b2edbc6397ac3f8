// A `RetryLayer` over a service nobody claimed idempotent: a compile error that says how to
// make the claim (`Idempotent::service` or `IdempotentLayer`).
use std::sync::Arc;
use std::time::Duration;

use velocity_policy::RetryPolicy;
use velocity_policy::layer::{BoxError, RetryLayer};
use tower::ServiceBuilder;

fn main() {
    let policy = Arc::new(
        RetryPolicy::builder("charge")
            .attempts(3)
            .backoff(Duration::from_millis(10), Duration::from_millis(100))
            .build(),
    );
    let charge = tower::service_fn(|amount: u64| async move { Ok::<_, BoxError>(amount) });
    let _retried = ServiceBuilder::new()
        .layer(RetryLayer::new(policy))
        .service(charge);
}
