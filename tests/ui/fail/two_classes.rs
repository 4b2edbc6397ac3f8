include!("../support.rs");

#[velocity_policy::critical(deadline = "1s")]
#[velocity_policy::deferred]
async fn save(id: u64) -> Result<(), AppError> {
    let _ = id;
    Ok(())
}

fn main() {}
