include!("../support.rs");

#[policy::resilient(retry = "transient")]
#[policy::idempotent]
async fn fetch(id: u64) -> Result<u64, AppError> {
    Ok(id)
}

fn main() {}
