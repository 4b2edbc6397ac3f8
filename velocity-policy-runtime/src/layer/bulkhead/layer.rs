use tower_layer::Layer;

use super::BulkheadService;
use crate::Bulkhead;

/// Holds a [`Bulkhead`] slot for each call; see the [module docs](super).
#[derive(Debug, Clone)]
pub struct BulkheadLayer {
    bulkhead: Bulkhead,
}

impl BulkheadLayer {
    /// A layer over `bulkhead` (take it from the [`Registry`](crate::Registry) to share it
    /// with the attributes that name it).
    pub fn new(bulkhead: Bulkhead) -> Self {
        Self { bulkhead }
    }
}

impl<S> Layer<S> for BulkheadLayer {
    type Service = BulkheadService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BulkheadService::new(inner, self.bulkhead.clone())
    }
}
