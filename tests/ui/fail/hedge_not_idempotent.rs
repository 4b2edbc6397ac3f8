include!("../support.rs");

#[velocity_policy::critical(hedge(after = "p95", max = 2), deadline = "1s")]
async fn charge(card: u64) -> Result<(), AppError> {
    let _ = card;
    Ok(())
}

fn main() {}
