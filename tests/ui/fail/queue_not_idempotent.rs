include!("../support.rs");

#[velocity_policy::background(queue = "embeddings")]
async fn embed(text: String) {
    let _ = text;
}

fn main() {}
