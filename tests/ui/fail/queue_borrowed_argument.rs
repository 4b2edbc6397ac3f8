include!("../support.rs");

#[velocity_policy::background(queue = "embeddings")]
#[velocity_policy::idempotent]
async fn embed(text: &'static str) {
    let _ = text;
}

fn main() {}
