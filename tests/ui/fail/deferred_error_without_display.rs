#[derive(Debug)]
enum JobError {
    Refused(velocity_policy::ResilienceError),
    TimedOut(velocity_policy::DeadlineExceeded),
}

impl From<velocity_policy::ResilienceError> for JobError {
    fn from(e: velocity_policy::ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<velocity_policy::DeadlineExceeded> for JobError {
    fn from(e: velocity_policy::DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

#[velocity_policy::deferred(deadline = "1s")]
#[velocity_policy::idempotent]
async fn send_receipt(order: u64) -> Result<(), JobError> {
    let _ = order;
    Ok(())
}

fn main() {}
