include!("../support.rs");

#[velocity_policy::resilient(retry = "transient")]
#[velocity_policy::idempotent]
async fn fetch(id: u64) -> Result<u64, AppError> {
    Ok(id)
}

fn main() {}
