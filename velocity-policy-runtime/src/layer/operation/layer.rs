use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use super::{CallSpan, OperationService, Optional};
use crate::WorkClass;
use crate::calls::Calls;
use crate::deadline::OperationDeadline;
use crate::layer::breaker::{BreakerService, ErrorsAreFailures};
use crate::layer::bulkhead::BulkheadService;
use crate::layer::retry::{ClaimedIdempotent, RetryService, TransientErrors};
use crate::layer::shedding::ShedService;
use crate::layer::{RetryLayer, ShedLayer};
use crate::{Breaker, Bulkhead, Idempotent, RetryPolicy, Shedder};

/// The span of a call of an operation built by hand: INFO, named `operation` (a span's name is
/// fixed where it is written, and a layer's operation is named at run time), with the fields
/// `operation` (its name) and `class` (`critical`), as the attribute's, and OpenTelemetry's
/// `otel.status_code` and `error.type`, recorded when a measured call ends in error.
fn operation_span(name: &str) -> tracing::Span {
    tracing::info_span!(
        target: "policy",
        "operation",
        operation = name,
        class = "critical",
        "otel.status_code" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
    )
}

/// An operation without retry: layers any service.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRetry;

/// An operation with retry: layers only an [`Idempotent`] service.
#[derive(Debug, Clone)]
pub struct WithRetry(RetryLayer);

/// Applies a whole operation; see the [module docs](super).
#[derive(Debug, Clone)]
pub struct OperationLayer<R = NoRetry> {
    name: Arc<str>,
    span: CallSpan,
    calls: Option<&'static Calls>,
    deadline: Duration,
    min_budget: Duration,
    named: Option<Arc<OperationDeadline>>,
    breaker: Option<Breaker>,
    bulkhead: Option<Bulkhead>,
    shed: Option<ShedLayer>,
    ratelimit: Option<crate::limiter::RateLimiter>,
    /// The chaos drill inside each attempt (feature `chaos`).
    #[cfg(feature = "chaos")]
    chaos: Option<crate::chaos::Chaos>,
    retry: R,
}

impl OperationLayer {
    /// The operation `name`, whose calls get a child of the current deadline of at most
    /// `deadline` (a fresh one outside any scope).
    pub fn new(name: &str, deadline: Duration) -> Self {
        Self {
            name: Arc::from(name),
            span: operation_span,
            calls: None,
            deadline,
            min_budget: Duration::ZERO,
            named: None,
            breaker: None,
            bulkhead: None,
            shed: None,
            ratelimit: None,
            #[cfg(feature = "chaos")]
            chaos: None,
            retry: NoRetry,
        }
    }

    /// Each call runs in the span `span` makes (INFO, target `policy`): what
    /// `velocity_policy::operation_layer!` sets, so the span is named after the operation as the
    /// attribute's is (`info_span!(target: "policy", "index_document", operation =
    /// "index_document", class = "critical")`). By default the span is named `operation`.
    pub fn span(mut self, span: CallSpan) -> Self {
        self.span = span;
        self
    }

    /// Each call is measured for the metrics of `calls`' operation (feature `metrics`): its
    /// duration by outcome (`ok`, `failed`, `expired`, `refused` by kind) and its attempts,
    /// as an attribute's call is (see [`observe`](crate::observe)'s "Metrics"). The handles
    /// live in the `static`, registered at the first call. `velocity_policy::operation_layer!` sets
    /// it; a layer built by hand without it still has its mechanisms' metrics, and no call
    /// duration.
    ///
    /// ```
    /// use std::time::Duration;
    /// use velocity_policy_runtime::layer::OperationLayer;
    /// use velocity_policy_runtime::observe::Calls;
    ///
    /// static CHECKOUT: Calls = Calls::new("checkout");
    /// let layer = OperationLayer::new("checkout", Duration::from_secs(1)).calls(&CHECKOUT);
    /// # let _ = layer;
    /// ```
    pub fn calls(mut self, calls: &'static Calls) -> Self {
        self.calls = Some(calls);
        self
    }

    /// Retries each call under `policy`; the layer then wraps only an [`Idempotent`] service.
    pub fn retry(self, policy: Arc<RetryPolicy>) -> OperationLayer<WithRetry> {
        OperationLayer {
            name: self.name,
            span: self.span,
            calls: self.calls,
            deadline: self.deadline,
            min_budget: self.min_budget,
            named: self.named,
            breaker: self.breaker,
            bulkhead: self.bulkhead,
            shed: self.shed,
            ratelimit: self.ratelimit,
            #[cfg(feature = "chaos")]
            chaos: self.chaos,
            retry: WithRetry(RetryLayer::new(policy)),
        }
    }
}

impl<R> OperationLayer<R> {
    /// Each call's deadline and minimum budget are `operation`'s current ones (the registry's
    /// entry an attribute naming the operation reads, which an override may change) instead
    /// of `new`'s and [`min_budget`](Self::min_budget)'s. `velocity_policy::operation_layer!` sets it.
    pub fn deadline_of(mut self, operation: Arc<OperationDeadline>) -> Self {
        self.named = Some(operation);
        self
    }

    /// The least budget worth starting with: below it a call is refused before any work.
    pub fn min_budget(mut self, min_budget: Duration) -> Self {
        self.min_budget = min_budget;
        self
    }

    /// The breaker each attempt checks and records in.
    pub fn breaker(mut self, breaker: Breaker) -> Self {
        self.breaker = Some(breaker);
        self
    }

    /// The bulkhead each attempt takes a slot from.
    pub fn bulkhead(mut self, bulkhead: Bulkhead) -> Self {
        self.bulkhead = Some(bulkhead);
        self
    }

    /// The shedding decision for work of `class` that usually costs `expected_cost`, with the
    /// operation's bulkhead (if set before this) as the load signal.
    pub fn shed(
        mut self,
        shedder: Arc<Shedder>,
        class: WorkClass,
        expected_cost: Duration,
    ) -> Self {
        let mut shed = ShedLayer::new(shedder, class).expected_cost(expected_cost);
        if let Some(bulkhead) = &self.bulkhead {
            shed = shed.load_of(bulkhead.clone());
        }
        self.shed = Some(shed);
        self
    }

    /// The rate limit that admits each call once, after the shedding decision and before any
    /// attempt.
    pub fn ratelimit(mut self, limiter: crate::limiter::RateLimiter) -> Self {
        self.ratelimit = Some(limiter);
        self
    }

    fn limited<S>(&self, inner: S) -> Optional<Limit<S>, S> {
        match &self.ratelimit {
            Some(limiter) => Optional::Applied(Limit::new(inner, limiter.clone())),
            None => Optional::Skipped(inner),
        }
    }

    /// The chaos drill each attempt draws from (feature `chaos`), after the breaker's check
    /// and the bulkhead's admission, inside the attempt's deadline: the same step as an
    /// attribute's.
    #[cfg(feature = "chaos")]
    #[must_use]
    pub fn chaos(mut self, chaos: crate::chaos::Chaos) -> Self {
        self.chaos = Some(chaos);
        self
    }

    /// Does not compile without the `chaos` feature, with a message saying how to turn it on
    /// (what `operation_layer!` calls for an operation with a `chaos`).
    #[cfg(not(feature = "chaos"))]
    #[doc(hidden)]
    #[must_use]
    pub fn chaos<F: crate::__macro_support::ChaosFeature>(
        self,
        _chaos: crate::__macro_support::Chaos<F>,
    ) -> Self {
        self
    }

    #[cfg(feature = "chaos")]
    fn chaotic<S>(&self, inner: S) -> Chaotic<S> {
        match &self.chaos {
            Some(chaos) => Optional::Applied(crate::layer::chaos::ChaosService::new(
                inner,
                chaos.clone(),
                self.breaker.clone(),
            )),
            None => Optional::Skipped(inner),
        }
    }

    #[cfg(not(feature = "chaos"))]
    #[inline]
    #[expect(
        clippy::unused_self,
        reason = "the same call with and without the feature"
    )]
    fn chaotic<S>(&self, inner: S) -> Chaotic<S> {
        inner
    }

    fn attempt<S>(&self, inner: S) -> Attempt<S> {
        let inner = self.chaotic(inner);
        let inner = match &self.bulkhead {
            Some(bulkhead) => Optional::Applied(BulkheadService::new(inner, bulkhead.clone())),
            None => Optional::Skipped(inner),
        };
        match &self.breaker {
            Some(breaker) => Optional::Applied(BreakerService::new(
                inner,
                breaker.clone(),
                ErrorsAreFailures,
            )),
            None => Optional::Skipped(inner),
        }
    }

    fn around<S>(&self, inner: S) -> Around<S> {
        let inner = self.limited(inner);
        let inner = match &self.shed {
            Some(shed) => Optional::Applied(shed.layer(inner)),
            None => Optional::Skipped(inner),
        };
        OperationService::new(
            inner,
            self.name.clone(),
            self.span,
            self.calls,
            self.deadline,
            self.min_budget,
            self.named.clone(),
        )
    }
}

/// One attempt: the breaker around the bulkhead around the service, each when declared.
pub(super) type Attempt<S> = Optional<
    BreakerService<Optional<BulkheadService<Chaotic<S>>, Chaotic<S>>, ErrorsAreFailures>,
    Optional<BulkheadService<Chaotic<S>>, Chaotic<S>>,
>;

#[cfg(feature = "chaos")]
type Chaotic<S> = Optional<crate::layer::chaos::ChaosService<S>, S>;
#[cfg(not(feature = "chaos"))]
type Chaotic<S> = S;

/// The rate limit's service.
type Limit<S> = crate::layer::ratelimit::RateLimitService<S>;

/// The rate limit, when declared, around `Inner`.
type Limited<Inner> = Optional<Limit<Inner>, Inner>;

/// The whole operation around `Inner`: its deadline, the shedding decision, then the rate
/// limit.
type Around<Inner> = OperationService<Optional<ShedService<Limited<Inner>>, Limited<Inner>>>;

impl<S> Layer<S> for OperationLayer<NoRetry> {
    type Service = Around<Attempt<S>>;

    fn layer(&self, inner: S) -> Self::Service {
        self.around(self.attempt(inner))
    }
}

impl<S: ClaimedIdempotent> Layer<S> for OperationLayer<WithRetry> {
    type Service = Around<RetryService<Attempt<S::Service>, TransientErrors>>;

    fn layer(&self, inner: S) -> Self::Service {
        let attempt = self.attempt(inner.into_service());
        self.around(self.retry.0.layer(Idempotent::service(attempt)))
    }
}
