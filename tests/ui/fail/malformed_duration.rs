include!("../support.rs");

#[velocity_policy::critical(deadline = "3 seconds")]
async fn save(id: u64) -> Result<(), AppError> {
    let _ = id;
    Ok(())
}

fn main() {}
