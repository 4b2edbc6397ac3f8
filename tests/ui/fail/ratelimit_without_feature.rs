// These cases build the facade with `tower` only: a rate limit without the `ratelimit` feature
// is one error saying how to turn it on.
include!("../support.rs");

#[policy::critical(deadline = "1s", ratelimit = "guarded_signups")]
async fn sign_up(user: String) -> Result<(), AppError> {
    let _ = user;
    Ok(())
}

fn main() {}
