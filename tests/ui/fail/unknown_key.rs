include!("../support.rs");

#[velocity_policy::critical(deadlne = "3s")]
async fn save(id: u64) -> Result<(), AppError> {
    let _ = id;
    Ok(())
}

fn main() {}
