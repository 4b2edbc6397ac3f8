use std::sync::Arc;

use tower_layer::Layer;

use super::{Config, CriticalityService};
use crate::criticality::Criticality;
use crate::layer::deadline::HeaderTrust;

/// Puts one [`Criticality`] in scope per request; see the [module docs](super).
#[derive(Debug, Clone)]
pub struct CriticalityLayer {
    pub(super) config: Arc<Config>,
}

impl CriticalityLayer {
    /// Requests on this route are `level`; a trusted caller may send a lower one (never a
    /// higher one, unless [`at_most`](Self::at_most) raises the ceiling).
    pub fn new(level: Criticality) -> Self {
        Self {
            config: Arc::new(Config {
                level,
                ceiling: level,
                trust: HeaderTrust::All,
            }),
        }
    }

    /// The highest level a caller's header may claim on this route (at least the route's own
    /// level: a lower ceiling is raised to it).
    pub fn at_most(self, ceiling: Criticality) -> Self {
        let level = self.config.level;
        let ceiling = if ceiling.rank() < level.rank() {
            level
        } else {
            ceiling
        };
        self.edit(|c| c.ceiling = ceiling)
    }

    /// Whose `x-criticality` header to believe, as for the deadline's headers: every
    /// caller's (the default, still never above the ceiling), no caller's, or only internal
    /// callers'.
    pub fn trust_headers(self, trust: HeaderTrust) -> Self {
        self.edit(|c| c.trust = trust)
    }

    /// The route's level.
    pub fn level(&self) -> Criticality {
        self.config.level
    }

    fn edit(mut self, f: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config {
            level: self.config.level,
            ceiling: self.config.ceiling,
            trust: self.config.trust.clone(),
        };
        f(&mut config);
        self.config = Arc::new(config);
        self
    }
}

impl<S> Layer<S> for CriticalityLayer {
    type Service = CriticalityService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CriticalityService {
            inner,
            config: self.config.clone(),
        }
    }
}
