include!("../support.rs");

// `audit_row` is `critical, durable` in the policy file: a write that must be acknowledged.
#[velocity_policy::operation("audit_row")]
#[velocity_policy::deferred]
#[velocity_policy::idempotent]
async fn write_audit_row(row: String) -> Result<(), AppError> {
    let _ = row;
    Ok(())
}

fn main() {}
