use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use super::HedgeService;
use crate::RetryPolicy;
use crate::hedge::Hedge;
use crate::layer::ClaimedIdempotent;

/// Hedges an [`Idempotent`](crate::Idempotent) service under a [`Hedge`]; see the
/// [module docs](super).
#[derive(Clone)]
pub struct HedgeLayer {
    hedge: Arc<Hedge>,
    retry: Option<Arc<RetryPolicy>>,
    budget: Duration,
}

impl fmt::Debug for HedgeLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeLayer")
            .field("hedge", &self.hedge.name())
            .field("budget", &self.budget)
            .finish()
    }
}

impl HedgeLayer {
    /// The budget of a call made outside any deadline scope: 10 s.
    pub const DEFAULT_BUDGET: Duration = Duration::from_secs(10);

    /// A layer hedging under `hedge` (take it from the [`Registry`](crate::Registry), by
    /// [`hedge`](crate::Registry::hedge) or [`find_hedge`](crate::Registry::find_hedge), to share
    /// its latencies, allowance and counters with the attributes that name it).
    pub fn new(hedge: Arc<Hedge>) -> Self {
        Self {
            hedge,
            retry: None,
            budget: Self::DEFAULT_BUDGET,
        }
    }

    /// For a layer below a [`RetryLayer`](crate::layer::RetryLayer) of `retry`: its hedges
    /// withdraw from the retry policy's allowance (one budget for retries and hedges, as the
    /// attributes do), and a call, counted there by the retry layer, is not counted again.
    pub fn within_retry(mut self, retry: Arc<RetryPolicy>) -> Self {
        self.retry = Some(retry);
        self
    }

    /// The deadline every attempt of a call shares when no deadline is in scope
    /// ([`HedgeLayer::DEFAULT_BUDGET`] unless set).
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }
}

impl<S: ClaimedIdempotent> Layer<S> for HedgeLayer {
    type Service = HedgeService<S::Service>;

    fn layer(&self, inner: S) -> Self::Service {
        HedgeService::new(
            inner.into_service(),
            self.hedge.clone(),
            self.retry.clone(),
            self.budget,
        )
    }
}
