include!("../support.rs");

#[velocity_policy::critical(deadline = "99999999999999999999h")]
async fn save(id: u64) -> Result<(), AppError> {
    let _ = id;
    Ok(())
}

fn main() {}
