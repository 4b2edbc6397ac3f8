// Shared by the trybuild cases: an error type that can carry refusals and expiries.
#[derive(Debug)]
pub enum AppError {
    Refused(velocity_policy::ResilienceError),
    TimedOut(velocity_policy::DeadlineExceeded),
    Failed,
}

impl From<velocity_policy::ResilienceError> for AppError {
    fn from(e: velocity_policy::ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<velocity_policy::DeadlineExceeded> for AppError {
    fn from(e: velocity_policy::DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

impl velocity_policy::Transient for AppError {
    fn is_transient(&self) -> bool {
        !matches!(self, Self::Refused(_))
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

#[allow(dead_code)]
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
