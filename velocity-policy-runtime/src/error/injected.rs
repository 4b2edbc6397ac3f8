//! An error a fault injector returned in place of the real answer, carrying who injected it.

use std::fmt;
use std::sync::Arc;

/// The error a fault injector returns in place of a tower service's answer (the `chaos`
/// feature's [`ChaosLayer`](crate::layer::ChaosLayer)): a tower service's error is a
/// `BoxError`, so this is its own type, and it carries the drill that injected it.
///
/// The breaker's layer above counts it as a failure, as it counts any error it is told is one,
/// and records it as injected by [`name`](Self::name)
/// ([`Breaker::record_injected_failure`](crate::Breaker::record_injected_failure)): counted on
/// this instance, never shared with the fleet, and an opening it decides says it was a drill.
/// In every build; only an injector makes one.
///
/// ```
/// use std::sync::Arc;
/// use velocity_policy_runtime::error::InjectedError;
///
/// let error = InjectedError::new(Arc::from("search_drill"));
/// assert_eq!(error.name(), "search_drill");
/// assert_eq!(
///     error.to_string(),
///     "error injected by chaos drill `search_drill` (not the dependency's)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectedError {
    name: Arc<str>,
}

impl InjectedError {
    /// An error injected by the drill `name`.
    pub fn new(name: Arc<str>) -> Self {
        Self { name }
    }

    /// The drill that injected it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The drill's name, shared.
    pub fn name_arc(&self) -> Arc<str> {
        self.name.clone()
    }
}

impl fmt::Display for InjectedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error injected by chaos drill `{}` (not the dependency's)",
            self.name
        )
    }
}

impl std::error::Error for InjectedError {}
