include!("../support.rs");

use std::sync::atomic::{AtomicU32, Ordering};

static EMBEDDED: AtomicU32 = AtomicU32::new(0);

// Without the `redis` feature (and so without an installed queue) the queue form runs on the
// in-process background pool, as `#[velocity_policy::background]` does.
#[velocity_policy::background(queue = "embeddings", deadline = "5s")]
#[velocity_policy::idempotent]
async fn embed(text: String, chunks: u32) -> Result<(), AppError> {
    assert_eq!((text.as_str(), chunks), ("report", 3));
    EMBEDDED.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

fn main() {
    // The worker's side exists in every build, for the queue's worker.
    assert_eq!(embed::task().operation(), "embed");
    runtime().block_on(async {
        embed("report".to_owned(), 3);
        for _ in 0..200 {
            if EMBEDDED.load(Ordering::SeqCst) == 1 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("queued work did not run on the in-process pool");
    });
}
