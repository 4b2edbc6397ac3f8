include!("../support.rs");

#[velocity_policy::critical(
    deadline = "1s",
    bulkhead(max_concurrent = 16, adaptive(min = 4, max = 64))
)]
async fn call_partner(id: u64) -> Result<(), AppError> {
    let _ = id;
    Ok(())
}

#[velocity_policy::critical(deadline = "1s", bulkhead(adaptive(min = 8, max = 2)))]
async fn call_other(id: u64) -> Result<(), AppError> {
    let _ = id;
    Ok(())
}

fn main() {}
