#[derive(Debug)]
enum FetchError {
    Refused(velocity_policy::ResilienceError),
    TimedOut(velocity_policy::DeadlineExceeded),
}

impl From<velocity_policy::ResilienceError> for FetchError {
    fn from(e: velocity_policy::ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<velocity_policy::DeadlineExceeded> for FetchError {
    fn from(e: velocity_policy::DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

#[velocity_policy::resilient(retry = "transient", deadline = "1s")]
#[velocity_policy::idempotent]
async fn fetch(id: u64) -> Result<u64, FetchError> {
    Ok(id)
}

fn main() {}
