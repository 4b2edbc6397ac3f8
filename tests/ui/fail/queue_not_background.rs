include!("../support.rs");

#[policy::deferred(queue = "embeddings")]
#[policy::idempotent]
async fn embed(text: String) {
    let _ = text;
}

fn main() {}
