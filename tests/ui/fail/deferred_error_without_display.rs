#[derive(Debug)]
enum JobError {
    Refused(policy::ResilienceError),
    TimedOut(policy::DeadlineExceeded),
}

impl From<policy::ResilienceError> for JobError {
    fn from(e: policy::ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<policy::DeadlineExceeded> for JobError {
    fn from(e: policy::DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

#[policy::deferred(deadline = "1s")]
#[policy::idempotent]
async fn send_receipt(order: u64) -> Result<(), JobError> {
    let _ = order;
    Ok(())
}

fn main() {}
