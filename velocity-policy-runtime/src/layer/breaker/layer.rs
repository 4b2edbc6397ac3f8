use std::fmt;

use tower_layer::Layer;

use super::{BreakerService, ErrorsAreFailures};
use crate::Breaker;

/// Checks a [`Breaker`] before each call and records each outcome in it; see the
/// [module docs](super).
#[derive(Clone)]
pub struct BreakerLayer<C = ErrorsAreFailures> {
    breaker: Breaker,
    classify: C,
}

impl<C> fmt::Debug for BreakerLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerLayer")
            .field("breaker", &self.breaker.name())
            .finish_non_exhaustive()
    }
}

impl BreakerLayer {
    /// A layer over `breaker` (take it from the [`Registry`](crate::Registry) to share it
    /// with the attributes that name it); errors are failures.
    pub fn new(breaker: Breaker) -> Self {
        Self {
            breaker,
            classify: ErrorsAreFailures,
        }
    }
}

impl<C> BreakerLayer<C> {
    /// The same layer, with `classify` deciding which outcomes are failures (see
    /// [`Classify`](super::Classify)).
    pub fn classify<C2>(self, classify: C2) -> BreakerLayer<C2> {
        BreakerLayer {
            breaker: self.breaker,
            classify,
        }
    }
}

impl<S, C: Clone> Layer<S> for BreakerLayer<C> {
    type Service = BreakerService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        BreakerService::new(inner, self.breaker.clone(), self.classify.clone())
    }
}
