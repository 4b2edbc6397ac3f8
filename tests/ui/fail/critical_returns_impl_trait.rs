include!("../support.rs");

#[velocity_policy::critical(deadline = "1s")]
async fn handler() -> impl std::fmt::Display {
    "ok"
}

fn main() {}
