//! The demo's policies as a model: `policies/demo.policy`, the same file the attributes of
//! [`service`](crate::service) bind to at compile time, compiled in and read once with
//! `policy-lang` for what only the running service needs (the request's deadline, which
//! [`router`](crate::service::router) stamps on every request with a `DeadlineLayer`).

use std::sync::LazyLock;
use std::time::Duration;

use policy::layer::DeadlineLayer;
use policy_lang::PolicySet;

use crate::DemoError;

/// The policy file's name in diagnostics.
const FILE: &str = "policies/demo.policy";

static SET: LazyLock<PolicySet> = LazyLock::new(|| {
    let mut set = PolicySet::new();
    set.add_source(FILE, include_bytes!("../policies/demo.policy"));
    set
});

/// The request's budget, from the `request { deadline }` stanza of `policies/demo.policy`.
///
/// An error naming the file and the fix when the policy does not parse or declares no request
/// deadline (the attributes' expansion already refuses an invalid file at compile time, so
/// this is for a file edited to drop the stanza).
pub fn request_deadline() -> Result<Duration, DemoError> {
    let report = SET.check();
    if let Some(error) = report.errors.first() {
        return Err(DemoError::Setup(SET.render(error)));
    }
    SET.spec().request_deadline().ok_or_else(|| {
        DemoError::Setup(format!(
            "{FILE} declares no request deadline: add `request {{ deadline = 5s }}` so every request gets one budget"
        ))
    })
}

/// The `DeadlineLayer` the service's routes get: the request stanza's budget, tightened by a
/// caller's `grpc-timeout` or `x-deadline-ms`.
pub fn deadline_layer() -> Result<DeadlineLayer, DemoError> {
    Ok(DeadlineLayer::new(request_deadline()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_budget_is_the_policy_files() {
        // demo.policy says `request { deadline = 5s }`.
        assert_eq!(request_deadline().unwrap(), Duration::from_secs(5));
        assert_eq!(deadline_layer().unwrap().budget(), Duration::from_secs(5));
    }
}
