include!("../support.rs");

// Two mistakes in one attribute, reported together in one build: a misspelt key and a retry
// of work not marked idempotent. The function is still emitted, so `main` type-checks
// against it and no third error appears.
#[velocity_policy::critical(deadlne = "3s", retry = "transient", deadline = "1s")]
async fn save(id: u64) -> Result<(), AppError> {
    let _ = id;
    Ok(())
}

fn main() {
    let _ = save(7);
}
