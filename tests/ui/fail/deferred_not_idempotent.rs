include!("../support.rs");

#[velocity_policy::deferred]
async fn index_document(id: u64) -> Result<(), AppError> {
    let _ = id;
    Ok(())
}

fn main() {}
