include!("../support.rs");

/// CPU work, moved off the async workers.
#[velocity_policy::isolate(max_concurrent = 2, max_queued = 4)]
pub fn embed(text: String) -> Vec<f32> {
    text.bytes().map(f32::from).collect()
}

#[velocity_policy::isolate]
fn checksum<T: AsRef<[u8]> + Send + 'static>(data: T) -> u64 {
    data.as_ref().iter().map(|b| u64::from(*b)).sum()
}

#[velocity_policy::critical(deadline = "1s", poll_budget = "5ms")]
async fn index(text: String) -> Result<usize, AppError> {
    let vector = embed(text).await.map_err(|_| AppError::Failed)?;
    Ok(vector.len())
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    rt.block_on(async {
        assert_eq!(index("abc".to_owned()).await.unwrap(), 3);
        assert_eq!(checksum(vec![1u8, 2, 3]).await.unwrap(), 6);
    });
}
