include!("../support.rs");

#[velocity_policy::deferred]
#[velocity_policy::idempotent]
async fn notify(user: &str) {
    let _ = user;
}

fn main() {}
