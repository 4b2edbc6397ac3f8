include!("../support.rs");

#[policy::deferred]
#[policy::idempotent]
async fn notify(user: &str) {
    let _ = user;
}

fn main() {}
