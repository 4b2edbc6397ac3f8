include!("../support.rs");

// `charge_card` is `critical` in the policy file: an attribute does not make it deferred.
#[velocity_policy::deferred]
#[velocity_policy::idempotent]
async fn charge_card(order: u64) -> Result<(), AppError> {
    let _ = order;
    Ok(())
}

fn main() {}
