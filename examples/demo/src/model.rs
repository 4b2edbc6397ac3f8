//! The demo's policies as a model: `policies/demo.policy`, the same file the attributes of
//! [`service`](crate::service) bind to at compile time, compiled in and read once with
//! `velocity-policy-lang` for what only the running service needs (the request's deadline, which
//! [`router`](crate::service::router) stamps on every request with a `DeadlineLayer`).

use std::sync::LazyLock;
use std::time::Duration;

use velocity_policy::layer::DeadlineLayer;
use velocity_policy_lang::PolicySet;

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

/// The request's minimum budget, from the `request { min_budget }` setting (none: only a
/// request arriving with nothing left is refused).
pub fn request_min_budget() -> Option<Duration> {
    SET.spec().request_min_budget()
}

/// The numbers of `policies/demo.policy` for the request's bound (`velocity_policy_lang::bound`): each
/// operation's deadline, minimum budget, retry and hedge, and the request's budget.
pub fn bound_model() -> velocity_policy_lang::bound::Model {
    velocity_policy_lang::bound::Model::from_spec(SET.spec())
}

/// The tree of `entry` as this process ran it: the calls between annotated operations the
/// registry observed, composed with `demo.policy`'s numbers (and, for an operation only an
/// attribute declares, such as `push_to_index`, the numbers in force in the registry). `None`
/// when `entry` was never called.
pub fn observed_tree(
    registry: &velocity_policy::Registry,
    entry: &str,
) -> Option<velocity_policy_lang::bound::Tree> {
    let snapshot = registry.snapshot();
    let (in_force, graph) = velocity_policy::dashboard::observed(&snapshot, registry);
    let mut model = bound_model();
    for budget in in_force.budgets() {
        if model.get(&budget.operation).is_none() {
            model.insert(budget.clone());
        }
    }
    velocity_policy_lang::bound::compose(&model, &graph)
        .trees
        .into_iter()
        .find(|tree| tree.entry() == entry)
}

/// The `DeadlineLayer` the service's routes get: the request stanza's budget, tightened by a
/// caller's `grpc-timeout` or `x-deadline-ms`, and its minimum.
pub fn deadline_layer() -> Result<DeadlineLayer, DemoError> {
    let layer = DeadlineLayer::new(request_deadline()?);
    Ok(match request_min_budget() {
        Some(min_budget) => layer.min_budget(min_budget),
        None => layer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_budget_is_the_policy_files() {
        // demo.policy says `request { deadline = 5s; min_budget = 20ms }`.
        assert_eq!(request_deadline().unwrap(), Duration::from_secs(5));
        assert_eq!(request_min_budget(), Some(Duration::from_millis(20)));
        assert_eq!(deadline_layer().unwrap().budget(), Duration::from_secs(5));
    }
}
