use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use super::{ClaimedIdempotent, RetryService, TransientErrors};
use crate::{Idempotent, RetryPolicy};

/// Retries an [`Idempotent`] service under a [`RetryPolicy`]; see the [module docs](super).
#[derive(Clone)]
pub struct RetryLayer<C = TransientErrors> {
    policy: Arc<RetryPolicy>,
    classify: C,
    budget: Duration,
}

impl<C> fmt::Debug for RetryLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("policy", &self.policy.name())
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl RetryLayer {
    /// The budget of a call made outside any deadline scope: 10 s.
    pub const DEFAULT_BUDGET: Duration = Duration::from_secs(10);

    /// A layer retrying under `policy` (take it from the [`Registry`](crate::Registry) to share
    /// its allowance and counters with the attributes that name it).
    pub fn new(policy: Arc<RetryPolicy>) -> Self {
        Self {
            policy,
            classify: TransientErrors,
            budget: Self::DEFAULT_BUDGET,
        }
    }
}

impl<C> RetryLayer<C> {
    /// The same layer, with `classify` deciding which outcomes are worth another attempt (see
    /// [`RetryClassify`](super::RetryClassify)).
    pub fn classify<C2>(self, classify: C2) -> RetryLayer<C2> {
        RetryLayer {
            policy: self.policy,
            classify,
            budget: self.budget,
        }
    }

    /// The deadline every attempt of a call shares when no deadline is in scope
    /// ([`RetryLayer::DEFAULT_BUDGET`] unless set): a retry is never unbounded.
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }
}

impl<S: ClaimedIdempotent, C: Clone> Layer<S> for RetryLayer<C> {
    type Service = RetryService<S::Service, C>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService::new(
            inner.into_service(),
            self.policy.clone(),
            self.classify.clone(),
            self.budget,
        )
    }
}

/// Claims the service below is idempotent ([`Idempotent::service`]), for a `ServiceBuilder`:
/// `.layer(RetryLayer::new(policy)).layer(IdempotentLayer)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdempotentLayer;

impl<S> Layer<S> for IdempotentLayer {
    type Service = Idempotent<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Idempotent::service(inner)
    }
}
