include!("../support.rs");

#[velocity_policy::deferred]
#[velocity_policy::idempotent]
async fn count_views(page: u64) -> Result<u64, AppError> {
    Ok(page)
}

fn main() {}
