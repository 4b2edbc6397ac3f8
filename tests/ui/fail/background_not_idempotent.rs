include!("../support.rs");

#[velocity_policy::background(deadline = "30s")]
async fn embed(text: String) {
    let _ = text;
}

fn main() {}
