include!("../support.rs");

fn skip(_: &u64, _: velocity_policy::CallError<AppError>) -> Result<(), AppError> {
    Ok(())
}

#[velocity_policy::deferred(fallback = "skip")]
#[velocity_policy::idempotent]
async fn notify_followers(user: u64) -> Result<(), AppError> {
    let _ = user;
    Ok(())
}

fn main() {}
