include!("../support.rs");

#[velocity_policy::resilient(breaker = "serch", deadline = "1s")]
async fn search(query: String) -> Result<Vec<String>, AppError> {
    Ok(vec![query])
}

fn main() {}
