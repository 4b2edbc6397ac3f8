use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use tower_layer::Layer;

use super::DeadlineService;
use super::headers::DEADLINE_MS_HEADER;
use crate::Deadline;
use crate::deadline::process_clock::nanos;

/// Stamps one deadline per request; see the [module docs](super).
#[derive(Debug, Clone)]
pub struct DeadlineLayer {
    pub(super) config: Arc<Config>,
}

#[derive(Debug)]
pub(super) struct Config {
    pub(super) name: Arc<str>,
    pub(super) budget: Duration,
    /// `budget` in nanoseconds, converted once: the deadline of a request that sends no budget.
    pub(super) budget_nanos: u64,
    pub(super) min_budget: Duration,
    pub(super) ms_header: Option<HeaderName>,
    pub(super) grpc_timeout: bool,
}

impl DeadlineLayer {
    /// The name refusals carry unless [`DeadlineLayer::name`] sets another: `request`.
    pub const DEFAULT_NAME: &'static str = "request";

    /// Every request gets at most `budget` (at most [`Deadline::MAX_BUDGET`]); a caller may send
    /// less, never more. No minimum: only a request that arrives with nothing left is
    /// refused. Reads `grpc-timeout` and [`DEADLINE_MS_HEADER`].
    pub fn new(budget: Duration) -> Self {
        let budget = budget.min(Deadline::MAX_BUDGET);
        Self {
            config: Arc::new(Config {
                name: Arc::from(Self::DEFAULT_NAME),
                budget,
                budget_nanos: nanos(budget),
                min_budget: Duration::ZERO,
                ms_header: Some(HeaderName::from_static(DEADLINE_MS_HEADER)),
                grpc_timeout: true,
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config {
            name: self.config.name.clone(),
            budget: self.config.budget,
            budget_nanos: self.config.budget_nanos,
            min_budget: self.config.min_budget,
            ms_header: self.config.ms_header.clone(),
            grpc_timeout: self.config.grpc_timeout,
        };
        f(&mut config);
        self.config = Arc::new(config);
        self
    }

    /// The least budget worth starting a request with: a request that arrives with less is
    /// answered at once, and the handler never runs.
    pub fn min_budget(self, min_budget: Duration) -> Self {
        self.edit(|c| c.min_budget = min_budget)
    }

    /// The name refusals carry (the `ResilienceError`'s name and the tracing field `name`).
    pub fn name(self, name: &str) -> Self {
        let name = Arc::from(name);
        self.edit(|c| c.name = name)
    }

    /// Reads the caller's millisecond budget from `header` instead of [`DEADLINE_MS_HEADER`].
    pub fn ms_header(self, header: HeaderName) -> Self {
        self.edit(|c| c.ms_header = Some(header))
    }

    /// Reads no millisecond header (only `grpc-timeout`, unless that is off too).
    pub fn without_ms_header(self) -> Self {
        self.edit(|c| c.ms_header = None)
    }

    /// Ignores `grpc-timeout`: for an edge whose callers must not choose their own budget.
    pub fn without_grpc_timeout(self) -> Self {
        self.edit(|c| c.grpc_timeout = false)
    }

    /// The configured budget.
    pub fn budget(&self) -> Duration {
        self.config.budget
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = DeadlineService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DeadlineService::new(inner, self.config.clone())
    }
}
