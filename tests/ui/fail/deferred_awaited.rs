include!("../support.rs");

// A deferred call is scheduled, not waited for: it returns `()`, and awaiting it is an error
// whose first help is the fix (remove the `.await`).
#[velocity_policy::deferred]
#[velocity_policy::idempotent]
async fn send_receipt(order: u64) -> Result<(), AppError> {
    let _ = order;
    Ok(())
}

async fn checkout() {
    send_receipt(7).await;
}

fn main() {
    drop(checkout());
}
