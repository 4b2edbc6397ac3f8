include!("../support.rs");

#[velocity_policy::critical(deadline = "1s", ratelimit = "best_effort_views")]
async fn sign_up(user: String) -> Result<(), AppError> {
    let _ = user;
    Ok(())
}

fn main() {}
