#[derive(Debug)]
enum FetchError {
    Refused(policy::ResilienceError),
    TimedOut(policy::DeadlineExceeded),
}

impl From<policy::ResilienceError> for FetchError {
    fn from(e: policy::ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<policy::DeadlineExceeded> for FetchError {
    fn from(e: policy::DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

#[policy::resilient(retry = "transient", deadline = "1s")]
#[policy::idempotent]
async fn fetch(id: u64) -> Result<u64, FetchError> {
    Ok(id)
}

fn main() {}
