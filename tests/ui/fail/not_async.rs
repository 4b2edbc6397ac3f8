include!("../support.rs");

#[velocity_policy::resilient(breaker = "search")]
fn search(query: String) -> Result<Vec<String>, AppError> {
    Ok(vec![query])
}

fn main() {}
