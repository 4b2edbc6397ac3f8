include!("../support.rs");

#[derive(Debug)]
pub struct Session;

// The fallback must take the arguments by reference and the reason, and return what the
// function returns: `fn(&String, velocity_policy::CallError<AppError>) -> Result<Session, AppError>`.
fn anonymous() -> Session {
    Session
}

#[velocity_policy::critical(deadline = "200ms", fallback = "anonymous")]
async fn lookup_session(token: String) -> Result<Session, AppError> {
    let _ = token;
    Ok(Session)
}

fn main() {}
