#[velocity_policy::isolate(max_concurrent = 2)]
async fn embed(text: String) -> Vec<f32> {
    text.bytes().map(f32::from).collect()
}

fn main() {}
