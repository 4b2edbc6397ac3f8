include!("../support.rs");

#[policy::deferred]
#[policy::idempotent]
async fn count_views(page: u64) -> Result<u64, AppError> {
    Ok(page)
}

fn main() {}
