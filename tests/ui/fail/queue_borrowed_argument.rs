include!("../support.rs");

#[policy::background(queue = "embeddings")]
#[policy::idempotent]
async fn embed(text: &'static str) {
    let _ = text;
}

fn main() {}
