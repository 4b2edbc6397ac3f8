include!("../support.rs");

#[velocity_policy::deferred(queue = "embeddings")]
#[velocity_policy::idempotent]
async fn embed(text: String) {
    let _ = text;
}

fn main() {}
