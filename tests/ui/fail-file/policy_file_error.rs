include!("../support.rs");

#[policy::resilient(breaker = "search")]
async fn search(query: String) -> Result<Vec<String>, AppError> {
    Ok(vec![query])
}

fn main() {}
