include!("../support.rs");

#[velocity_policy::critical(deadline = "1s", shed_at = 0.5)]
async fn sign_in(user: String) -> Result<(), AppError> {
    let _ = user;
    Ok(())
}

fn main() {}
