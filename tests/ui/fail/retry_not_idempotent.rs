include!("../support.rs");

#[velocity_policy::resilient(retry = "transient", deadline = "1s")]
async fn push_to_index(id: u64) -> Result<(), AppError> {
    let _ = id;
    Ok(())
}

fn main() {}
