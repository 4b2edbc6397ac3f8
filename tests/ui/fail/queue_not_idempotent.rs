include!("../support.rs");

#[policy::background(queue = "embeddings")]
async fn embed(text: String) {
    let _ = text;
}

fn main() {}
