// These cases build the facade with `tower` only: a rate limit needs no feature (issue 42 made
// `ratelimit` always on; this case was a compile error saying how to turn it on).
include!("../support.rs");

#[velocity_policy::critical(deadline = "1s", ratelimit = "guarded_signups")]
async fn sign_up(user: String) -> Result<usize, AppError> {
    Ok(user.len())
}

fn main() {
    runtime().block_on(async {
        assert_eq!(sign_up("ada".to_owned()).await.unwrap(), 3);
        let snapshot = velocity_policy::Registry::global().snapshot();
        let limiter = snapshot.limiters.iter().find(|l| &*l.name == "guarded_signups");
        assert!(limiter.is_some(), "the limiter is registered by name");
    });
}
