// These cases build the facade with `tower` only: a chaos drill without the `chaos` feature is
// one error saying how to turn it on, and a default build has no fault injection at all.
include!("../support.rs");

#[velocity_policy::critical(deadline = "1s", chaos = "ui_drill")]
async fn search(query: String) -> Result<(), AppError> {
    let _ = query;
    Ok(())
}

fn main() {}
