include!("../support.rs");

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

#[velocity_policy::deferred(deadline = "5s")]
#[velocity_policy::idempotent]
async fn count(counter: Arc<AtomicU32>) {
    counter.fetch_add(1, Ordering::SeqCst);
}

#[velocity_policy::deferred(retry = "transient", deadline = "5s")]
#[velocity_policy::idempotent]
async fn count_or_fail(counter: Arc<AtomicU32>) -> Result<(), AppError> {
    counter.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[velocity_policy::background(bulkhead = "search", shed_at = 0.9)]
#[velocity_policy::idempotent]
async fn embed(counter: Arc<AtomicU32>) -> Result<(), AppError> {
    counter.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

fn main() {
    runtime().block_on(async {
        let counter = Arc::new(AtomicU32::new(0));
        count(counter.clone());
        count_or_fail(counter.clone());
        embed(counter.clone());
        for _ in 0..200 {
            if counter.load(Ordering::SeqCst) == 3 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("scheduled work did not run");
    });
}
