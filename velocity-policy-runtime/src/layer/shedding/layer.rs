use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use super::{Config, ShedService};
use crate::WorkClass;
use crate::{Bulkhead, Shedder};

/// Decides, before each call, whether the work is worth doing; see the [module docs](super).
#[derive(Debug, Clone)]
pub struct ShedLayer {
    config: Config,
}

impl ShedLayer {
    /// A layer deciding with `shedder` (take it from the [`Registry`](crate::Registry) to
    /// share its counters with the attributes) for work of `class`.
    pub fn new(shedder: Arc<Shedder>, class: WorkClass) -> Self {
        Self {
            config: Config {
                shedder,
                class,
                load_of: None,
                expected_cost: Duration::ZERO,
            },
        }
    }

    /// The compartment whose load is the load signal.
    pub fn load_of(mut self, bulkhead: Bulkhead) -> Self {
        self.config.load_of = Some(bulkhead);
        self
    }

    /// What the work usually costs: with less than this left of the current deadline it is
    /// shed for budget.
    pub fn expected_cost(mut self, cost: Duration) -> Self {
        self.config.expected_cost = cost;
        self
    }
}

impl<S> Layer<S> for ShedLayer {
    type Service = ShedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ShedService::new(inner, self.config.clone())
    }
}
