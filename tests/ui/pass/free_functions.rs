include!("../support.rs");

/// Critical work with an inline deadline and minimum budget.
#[velocity_policy::critical(deadline = "1s", min_budget = "10ms")]
pub async fn save_document(body: String) -> Result<usize, AppError> {
    Ok(body.len())
}

/// Every mechanism named in the policy file, and an inline retry.
#[velocity_policy::resilient(breaker = "search", bulkhead = "search", retry(attempts = 2, base = "1ms", cap = "5ms"), deadline = "1s")]
#[velocity_policy::idempotent]
pub(crate) async fn push_to_index(id: u64) -> Result<u64, AppError> {
    Ok(id)
}

/// Bound to an operation of the file.
#[velocity_policy::operation("charge_card")]
async fn charge(cents: u64) -> Result<u64, AppError> {
    Ok(cents)
}

#[velocity_policy::idempotent]
async fn only_declared_idempotent() -> u8 {
    1
}

fn main() {
    runtime().block_on(async {
        assert_eq!(save_document("doc".to_owned()).await.unwrap(), 3);
        assert_eq!(push_to_index(7).await.unwrap(), 7);
        assert_eq!(charge(100).await.unwrap(), 100);
        assert_eq!(only_declared_idempotent().await, 1);
    });
}
