include!("../support.rs");

fn skip(_: &u64, _: policy::CallError<AppError>) -> Result<(), AppError> {
    Ok(())
}

#[policy::deferred(fallback = "skip")]
#[policy::idempotent]
async fn notify_followers(user: u64) -> Result<(), AppError> {
    let _ = user;
    Ok(())
}

fn main() {}
