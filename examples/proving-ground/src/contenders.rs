//! The six services under test. Each is an axum server whose two routes (`/critical`,
//! `/sheddable`) call the dependency once per request through [`DepClient`]; only what wraps
//! that call differs. Each contender's comment says where its configuration comes from.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use tower::{BoxError, ServiceBuilder, ServiceExt as _};

use crate::client::{DepCall, DepClient, DepError, Hyper, hyper_client};
use crate::model::{Class, Contender};

/// One request's work: the dependency called as this contender calls it.
type Call =
    Arc<dyn Fn(Class) -> Pin<Box<dyn Future<Output = Result<(), Failure>> + Send>> + Send + Sync>;

/// The response header that names which mechanism (or which failure of the dependency) ended a
/// failed request, as a short code; the load generator records it.
pub const WHY_HEADER: &str = "x-why";

/// Why a request failed: a short code for the record and the error's text for the body.
#[derive(Debug, Clone)]
pub struct Failure {
    why: &'static str,
    text: String,
}

impl Failure {
    fn new(why: &'static str, text: impl std::fmt::Display) -> Self {
        Self {
            why,
            text: text.to_string(),
        }
    }

    /// An answer the dependency gave, or the lack of one.
    fn dependency(error: &DepError) -> Self {
        Self::new(dependency_code(error), error)
    }

    /// A boxed error from a tower stack: ours, tower's or the dependency's.
    fn boxed(error: &BoxError) -> Self {
        let why = if let Some(refusal) = error.downcast_ref::<velocity_policy::ResilienceError>() {
            refusal.kind().as_str()
        } else if error.is::<velocity_policy::DeadlineExceeded>() {
            "deadline_exceeded"
        } else if error.is::<tower::load_shed::error::Overloaded>() {
            "load_shed"
        } else if error.is::<tower::timeout::error::Elapsed>() {
            "timeout"
        } else if let Some(dependency) = error.downcast_ref::<DepError>() {
            dependency_code(dependency)
        } else {
            "other"
        };
        Self::new(why, error)
    }
}

fn dependency_code(error: &DepError) -> &'static str {
    match error {
        DepError::TooManyRequests(_) => "dependency_429",
        DepError::Status(503) => "dependency_503",
        DepError::Status(504) => "dependency_expired",
        DepError::Status(_) => "dependency_error",
        DepError::Transport(_) => "transport",
    }
}

/// Building a contender failed (a configuration its library refused).
#[derive(Debug, thiserror::Error)]
#[error("cannot build contender `{contender}`: {reason}")]
pub struct BuildError {
    contender: &'static str,
    reason: String,
}

fn build_error(contender: Contender, reason: impl std::fmt::Display) -> BuildError {
    BuildError {
        contender: contender.name(),
        reason: reason.to_string(),
    }
}

/// The service for `contender`, calling the dependency at `base` (`http://127.0.0.1:PORT`).
pub fn router(contender: Contender, base: &str) -> Result<Router, BuildError> {
    let hyper = hyper_client();
    let call = match contender {
        Contender::None => none(hyper, base),
        Contender::Naive => naive(hyper, base),
        Contender::Tower => tower_stack(hyper, base),
        Contender::TowerResilience => tower_resilience(hyper, base),
        Contender::PolicyAttributes => attributes::call(hyper, base),
        Contender::PolicyLayers => {
            return layers::router(hyper, base).map_err(|e| build_error(contender, e));
        }
    }
    .map_err(|e| build_error(contender, e))?;
    Ok(routes(call))
}

fn routes(call: Call) -> Router {
    let critical = call.clone();
    Router::new()
        .route(
            Class::Critical.path(),
            get(move || answer(critical.clone(), Class::Critical)),
        )
        .route(
            Class::Sheddable.path(),
            get(move || answer(call.clone(), Class::Sheddable)),
        )
}

async fn answer(call: Call, class: Class) -> axum::response::Response {
    reply(call(class).await)
}

fn reply(result: Result<(), Failure>) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    match result {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(failure) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(WHY_HEADER, failure.why)],
            failure.text,
        )
            .into_response(),
    }
}

/// Contender 1: No policy: a 500 ms timeout around the call (the setting).
const NONE_TIMEOUT: Duration = Duration::from_millis(500);

fn none(hyper: Hyper, base: &str) -> Result<Call, BoxError> {
    let dependency = DepClient::new(hyper, base, NONE_TIMEOUT)?;
    Ok(Arc::new(move |_class| {
        let dependency = dependency.clone();
        Box::pin(async move {
            match tokio::time::timeout(NONE_TIMEOUT, dependency.oneshot(DepCall)).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(Failure::dependency(&e)),
                Err(_) => Err(Failure::new("timeout", "timed out")),
            }
        })
    }))
}

/// Contender 2: The hand-written loop: 3 attempts of 150 ms each, at once, whatever failed (the issue's
/// setting: no backoff, no budget).
const NAIVE_ATTEMPTS: u32 = 3;
const NAIVE_TIMEOUT: Duration = Duration::from_millis(150);

fn naive(hyper: Hyper, base: &str) -> Result<Call, BoxError> {
    let dependency = DepClient::new(hyper, base, NAIVE_TIMEOUT)?;
    Ok(Arc::new(move |_class| {
        let dependency = dependency.clone();
        Box::pin(async move {
            let mut last = Failure::new("timeout", "no attempt");
            for _ in 0..NAIVE_ATTEMPTS {
                match tokio::time::timeout(NAIVE_TIMEOUT, dependency.clone().oneshot(DepCall)).await
                {
                    Ok(Ok(())) => return Ok(()),
                    Ok(Err(e)) => last = Failure::dependency(&e),
                    Err(_) => last = Failure::new("timeout", "timed out"),
                }
            }
            Err(last)
        })
    }))
}

/// The per-attempt timeout every retrying contender uses: the hand-written loop's 150 ms, so
/// that the mechanisms, not the numbers, differ.
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(150);
/// The dependency's capacity in calls at once: every concurrency limit is set to it.
const CONCURRENCY: usize = 10;

/// Contender 3: tower 0.5, configured as its docs show.
///
/// - `tower::retry::budget`'s module docs: a `Policy` that deposits on success and withdraws
///   before each retry from a shared `TpsBudget`; `TpsBudget::default()` is
///   `TpsBudget::new(10 s, 10/s, 20%)`, Finagle's defaults.
/// - Full-jitter backoff (a uniform draw in `[0, min(cap, base × 2^n))`), the AWS article
///   tower's `backoff` module links; base 50 ms as tower's `ExponentialBackoffMaker::default`,
///   cap 1 s. tower's own `ExponentialBackoff` adds jitter to the base instead of drawing the
///   whole pause, so the policy draws it itself.
/// - `ServiceBuilder` order from its docs: `load_shed` outside `concurrency_limit` (refuse at
///   once when no slot is free), the retry, then a `timeout` per attempt.
fn tower_stack(hyper: Hyper, base: &str) -> Result<Call, BoxError> {
    let dependency = DepClient::new(hyper, base, ATTEMPT_TIMEOUT)?;
    let policy = TowerRetry {
        budget: Arc::new(tower::retry::budget::TpsBudget::default()),
        retries_left: NAIVE_ATTEMPTS - 1,
        retried: 0,
    };
    let service = ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(CONCURRENCY)
        .retry(policy)
        .timeout(ATTEMPT_TIMEOUT)
        .service(dependency);
    let service = tower::util::BoxCloneSyncService::new(service);
    Ok(Arc::new(move |_class| {
        let service = service.clone();
        Box::pin(async move {
            service
                .oneshot(DepCall)
                .await
                .map_err(|e| Failure::boxed(&e))
        })
    }))
}

/// tower's retry `Policy`, as `tower::retry::budget`'s docs write it, with a bound on
/// attempts and full jitter between them.
#[derive(Debug, Clone)]
struct TowerRetry {
    budget: Arc<tower::retry::budget::TpsBudget>,
    retries_left: u32,
    retried: u32,
}

/// Full jitter: a uniform draw in `[0, min(cap, base × 2^n))`.
fn full_jitter(retry: u32, base: Duration, cap: Duration) -> Duration {
    let ceiling = base.saturating_mul(1 << retry.min(16)).min(cap);
    ceiling.mul_f64(rand::random::<f64>())
}

impl<E> tower::retry::Policy<DepCall, (), E> for TowerRetry {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _request: &mut DepCall,
        result: &mut Result<(), E>,
    ) -> Option<Self::Future> {
        use tower::retry::budget::Budget as _;
        match result {
            Ok(()) => {
                self.budget.deposit();
                None
            }
            Err(_) => {
                if self.retries_left == 0 || !self.budget.withdraw() {
                    return None;
                }
                self.retries_left -= 1;
                let pause = full_jitter(
                    self.retried,
                    Duration::from_millis(50),
                    Duration::from_secs(1),
                );
                self.retried += 1;
                Some(tokio::time::sleep(pause))
            }
        }
    }

    fn clone_request(&mut self, request: &DepCall) -> Option<DepCall> {
        Some(*request)
    }
}

/// The breaker's cooldown of `policies/proving.policy` (the facade's `guide::sizing`),
/// given to tower-resilience's breaker too so that recovery compares mechanisms, not numbers.
const BREAKER_COOLDOWN: Duration = Duration::from_secs(1);

/// Contender 4: tower-resilience 0.13, as its README suggests (crates.io README of 0.13.0):
///
/// - Retry: the `RetryLayer::exponential_backoff()` preset (3 attempts, 100 ms base), with the
///   README's "Retry budgets" token bucket (10 retries/s, bursting to 100).
/// - Order and predicate from its `docs/circuitbreaker-tower-comparison.md` ("Recommended
///   default ordering"): retry outermost, `retry_on` excluding an open circuit, so a refusal
///   costs no budget.
/// - Circuit breaker: the Quick Start's `failure_rate_threshold(0.5)` and the Circuit Breaker
///   section's `sliding_window_size(100)`. Its wait in the open state is set to this engine's
///   cooldown ([`BREAKER_COOLDOWN`]) with the README's own `.wait_duration_in_open(..)`: the README's example
///   (60 s) and default (30 s) outlast a scenario's after phase, and recovery would then compare
///   two numbers rather than two mechanisms.
/// - Bulkhead: the `BulkheadLayer::small()` preset (10 calls, rejects when full), the
///   dependency's capacity, inside the breaker as in the Quick Start.
/// - Time limiter: 150 ms per attempt, as every retrying contender (its presets are 1 s and
///   up).
fn tower_resilience(hyper: Hyper, base: &str) -> Result<Call, BoxError> {
    use tower_resilience::bulkhead::{BulkheadLayer, BulkheadServiceError};
    use tower_resilience::circuitbreaker::{CircuitBreakerError, CircuitBreakerLayer};
    use tower_resilience::retry::{RetryBudgetBuilder, RetryLayer};
    use tower_resilience::timelimiter::{TimeLimiterError, TimeLimiterLayer};

    type StackError = CircuitBreakerError<BulkheadServiceError<TimeLimiterError<DepError>>>;

    let dependency = DepClient::new(hyper, base, ATTEMPT_TIMEOUT)?;
    let budget = RetryBudgetBuilder::new()
        .token_bucket()
        .tokens_per_second(10.0)
        .max_tokens(100)
        .build()?;
    let retry = RetryLayer::<DepCall, (), StackError>::exponential_backoff()
        .budget(budget)
        .retry_on(|error: &StackError| !error.is_circuit_open())
        .build();
    let breaker = CircuitBreakerLayer::builder()
        .failure_rate_threshold(0.5)
        .sliding_window_size(100)
        .wait_duration_in_open(BREAKER_COOLDOWN)
        .build()?;
    let bulkhead = BulkheadLayer::small().build()?;
    let limiter = TimeLimiterLayer::builder()
        .timeout_duration(ATTEMPT_TIMEOUT)
        .build();
    let service = ServiceBuilder::new()
        .layer(retry)
        .layer(breaker)
        .layer(bulkhead)
        .layer(limiter)
        .service(dependency);
    Ok(Arc::new(move |_class| {
        let service = service.clone();
        Box::pin(async move {
            service.oneshot(DepCall).await.map_err(|e| {
                let why = match &e {
                    CircuitBreakerError::OpenCircuit => "breaker_open",
                    CircuitBreakerError::Inner(BulkheadServiceError::Bulkhead(_)) => {
                        "bulkhead_full"
                    }
                    CircuitBreakerError::Inner(BulkheadServiceError::Inner(
                        TimeLimiterError::Timeout,
                    )) => "timeout",
                    CircuitBreakerError::Inner(BulkheadServiceError::Inner(
                        TimeLimiterError::Inner(dependency),
                    )) => dependency_code(dependency),
                };
                Failure::new(why, e)
            })
        })
    }))
}

/// Why one of this engine's calls failed: the three outcomes the docs ask a user to keep
/// apart (the work never ran; we stopped waiting; it ran and failed).
#[derive(Debug)]
pub enum CallFailed {
    /// The dependency failed.
    Dependency(DepError),
    /// A breaker, bulkhead, shedder or the budget refused: the work never ran.
    Refused(velocity_policy::ResilienceError),
    /// We stopped waiting.
    TimedOut(velocity_policy::DeadlineExceeded),
}

impl From<velocity_policy::ResilienceError> for CallFailed {
    fn from(e: velocity_policy::ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<velocity_policy::DeadlineExceeded> for CallFailed {
    fn from(e: velocity_policy::DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

impl std::fmt::Display for CallFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dependency(e) => write!(f, "{e}"),
            Self::Refused(e) => write!(f, "{e}"),
            Self::TimedOut(e) => write!(f, "{e}"),
        }
    }
}

impl velocity_policy::Transient for CallFailed {
    /// A 5xx, a lost connection, an attempt that timed out: worth repeating. Not a 429 (the
    /// breaker is tripped for its Retry-After, as `guide::layers`' example does), nor a
    /// refusal.
    fn is_transient(&self) -> bool {
        match self {
            Self::Dependency(DepError::TooManyRequests(_)) | Self::Refused(_) => false,
            Self::Dependency(DepError::Status(status)) => *status >= 500,
            Self::Dependency(DepError::Transport(_)) | Self::TimedOut(_) => true,
        }
    }
}

/// A 429 is an instruction: trip the breaker for its `Retry-After` (the facade's
/// `guide::layers` example: `registry.find_breaker("search").unwrap().trip(Duration::from_secs(5), "429")`).
fn trip_on_429(error: &DepError) {
    if let DepError::TooManyRequests(pause) = error
        && let Some(breaker) = velocity_policy::Registry::global().find_breaker("dependency")
    {
        breaker.trip(*pause, "429 Too Many Requests");
    }
}

/// Contender 5: This engine through the attributes: the call is a function bound by its name to
/// `operation call_dependency` of `policies/proving.policy`, its client wrapped in
/// `PropagateDeadlineLayer` (`guide::layers`: "for hyper's client"); the sheddable route's calls
/// run with `criticality::scope(Criticality::Sheddable, ..)` (`guide::layers`, "How much a
/// request matters").
mod attributes {
    use std::sync::{Arc, OnceLock};

    use tower::{BoxError, Layer as _, ServiceExt as _};
    use velocity_policy::criticality::{self, Criticality};
    use velocity_policy::layer::{PropagateDeadline, PropagateDeadlineLayer};

    use super::{Call, CallFailed, Failure, trip_on_429};
    use crate::client::{DepCall, DepClient, Hyper};
    use crate::model::Class;

    type Client = DepClient<PropagateDeadline<Hyper>>;

    static CLIENT: OnceLock<Client> = OnceLock::new();

    /// The dependency, called once; the operation `call_dependency` of the `.policy` file
    /// applies (its breaker, bulkhead, retry and deadline).
    #[velocity_policy::critical]
    #[velocity_policy::idempotent]
    async fn call_dependency() -> Result<(), CallFailed> {
        let Some(client) = CLIENT.get() else {
            return Err(CallFailed::Dependency(crate::client::DepError::Transport(
                "the client is not set".into(),
            )));
        };
        client.clone().oneshot(DepCall).await.map_err(|e| {
            trip_on_429(&e);
            CallFailed::Dependency(e)
        })
    }

    pub(super) fn call(hyper: Hyper, base: &str) -> Result<Call, BoxError> {
        let client = DepClient::new(
            PropagateDeadlineLayer::new().layer(hyper),
            base,
            super::ATTEMPT_TIMEOUT,
        )?;
        let _ = CLIENT.set(client);
        Ok(Arc::new(|class| {
            Box::pin(async move {
                // `guide::layers`, "How much a request matters": a route's level in scope for its
                // calls, as a `CriticalityLayer` puts it for a tower stack.
                let level = match class {
                    Class::Critical => Criticality::Critical,
                    Class::Sheddable => Criticality::Sheddable,
                };
                let outcome = criticality::scope(level, call_dependency()).await;
                outcome.map_err(|e| match &e {
                    CallFailed::Dependency(dependency) => Failure::dependency(dependency),
                    CallFailed::Refused(refusal) => Failure::new(refusal.kind().as_str(), &e),
                    CallFailed::TimedOut(_) => Failure::new("deadline_exceeded", &e),
                })
            })
        }))
    }
}

/// Contender 6: This engine through the layers: `DeadlineLayer` on the server (the `request` stanza's
/// 1 s), the operation as one layer (`operation_layer!("call_dependency")`, `guide::layers`: "A
/// whole `.policy` operation is one layer"), the client under `PropagateDeadlineLayer`; the
/// sheddable route is marked `sheddable` with a `CriticalityLayer` (`guide::layers`, "How much
/// a request matters"), so the operation's bulkhead keeps room for the critical route.
mod layers {
    use std::time::Duration;

    use axum::Router;
    use axum::routing::get;
    use tower::{Layer as _, ServiceBuilder, ServiceExt as _};
    use velocity_policy::Idempotent;
    use velocity_policy::criticality::Criticality;
    use velocity_policy::layer::{
        BoxError, CriticalityLayer, DeadlineLayer, PropagateDeadlineLayer,
    };

    use super::trip_on_429;
    use crate::client::{DepCall, DepClient, Hyper};
    use crate::model::Class;

    pub(super) fn router(hyper: Hyper, base: &str) -> Result<Router, BoxError> {
        let client = DepClient::new(
            PropagateDeadlineLayer::new().layer(hyper),
            base,
            super::ATTEMPT_TIMEOUT,
        )?;
        let client = ServiceBuilder::new()
            .map_err(|e: crate::client::DepError| {
                trip_on_429(&e);
                BoxError::from(e)
            })
            .service(client);
        let operation = ServiceBuilder::new()
            .layer(velocity_policy::operation_layer!("call_dependency"))
            .service(Idempotent::service(client));
        let operation = tower::util::BoxCloneSyncService::new(operation);
        let sheddable = operation.clone();
        let critical = operation;
        Ok(Router::new()
            .route(
                Class::Critical.path(),
                get(move || {
                    let critical = critical.clone();
                    async move { reply(critical.oneshot(DepCall).await) }
                }),
            )
            .route(
                Class::Sheddable.path(),
                get(move || {
                    let sheddable = sheddable.clone();
                    async move { reply(sheddable.oneshot(DepCall).await) }
                })
                // `guide::layers`, "How much a request matters": this route's work may be turned
                // away to keep room for critical work (and the caller cannot claim more).
                .layer(CriticalityLayer::new(Criticality::Sheddable)),
            )
            .layer(
                DeadlineLayer::new(Duration::from_secs(1)).min_budget(Duration::from_millis(20)),
            ))
    }

    fn reply(result: Result<(), BoxError>) -> axum::response::Response {
        super::reply(result.map_err(|e| super::Failure::boxed(&e)))
    }
}
