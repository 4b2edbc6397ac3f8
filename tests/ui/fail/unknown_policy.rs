include!("../support.rs");

#[policy::resilient(breaker = "serch", deadline = "1s")]
async fn search(query: String) -> Result<Vec<String>, AppError> {
    Ok(vec![query])
}

fn main() {}
