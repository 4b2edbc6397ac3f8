include!("../support.rs");

#[policy::critical(deadline = "1s")]
#[policy::deferred]
async fn save(id: u64) -> Result<(), AppError> {
    let _ = id;
    Ok(())
}

fn main() {}
