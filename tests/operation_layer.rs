//! `velocity_policy::operation_layer!`: a `.policy` operation (tests/policies/layer.policy) as a tower
//! layer, over the same registry entries as the attribute functions that name its mechanisms.
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    reason = "test helpers: an unexpected outcome fails the test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tower::{Layer, Service, ServiceExt};
use velocity_policy::breaker::BreakerState;
use velocity_policy::layer::BoxError;
use velocity_policy::{
    Deadline, DeadlineExceeded, Idempotent, RefusalKind, Registry, ResilienceError,
};

#[derive(Debug)]
enum AppError {
    Refused(ResilienceError),
    TimedOut(
        #[expect(
            dead_code,
            reason = "carried for the caller; the tests match on the variant"
        )]
        DeadlineExceeded,
    ),
    Lookup,
}

impl From<ResilienceError> for AppError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for AppError {
    fn from(e: DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl velocity_policy::Transient for AppError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::Lookup | Self::TimedOut(_))
    }
}

fn refusal(error: &BoxError) -> RefusalKind {
    match error.downcast_ref::<ResilienceError>() {
        Some(refusal) => refusal.kind(),
        None => panic!("expected a refusal, got {error:?}"),
    }
}

static LOOKUPS: AtomicU32 = AtomicU32::new(0);

/// The attribute side of the shared breaker `shared_lookup`.
#[velocity_policy::resilient(breaker = "shared_lookup", deadline = "1s")]
async fn lookup(fail: bool) -> Result<u32, AppError> {
    LOOKUPS.fetch_add(1, Ordering::SeqCst);
    if fail { Err(AppError::Lookup) } else { Ok(1) }
}

fn breaker_state(name: &str) -> BreakerState {
    Registry::global()
        .find_breaker(name)
        .unwrap()
        .snapshot()
        .state
}

fn entries(name: &str) -> usize {
    let snapshot = Registry::global().snapshot();
    snapshot
        .breakers
        .iter()
        .filter(|b| &*b.name == name)
        .count()
}

#[tokio::test(start_paused = true)]
async fn a_layer_and_an_attribute_naming_one_breaker_share_its_state() {
    let calls = Arc::new(AtomicU32::new(0));
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let service = {
        let (calls, fail) = (calls.clone(), fail.clone());
        tower::service_fn(move |()| {
            let (calls, fail) = (calls.clone(), fail.clone());
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                if fail.load(Ordering::SeqCst) {
                    Err::<u32, BoxError>("lookup failed".into())
                } else {
                    Ok(2)
                }
            }
        })
    };
    let mut layered = velocity_policy::operation_layer!("lookup_layer").layer(service);

    // Two failures through the layer (the file's threshold) open the breaker for the function.
    for _ in 0..2 {
        let error = layered.ready().await.unwrap().call(()).await.unwrap_err();
        assert!(error.downcast_ref::<ResilienceError>().is_none(), "{error}");
    }
    assert_eq!(breaker_state("shared_lookup"), BreakerState::Open);
    let before = LOOKUPS.load(Ordering::SeqCst);
    match lookup(false).await {
        Err(AppError::Refused(refusal)) => assert_eq!(refusal.kind(), RefusalKind::BreakerOpen),
        other => panic!("expected the shared breaker open, got {other:?}"),
    }
    assert_eq!(LOOKUPS.load(Ordering::SeqCst), before, "the body never ran");
    assert_eq!(entries("shared_lookup"), 1, "one registry entry for both");
    assert!(Registry::global().snapshot().conflicts.is_empty());

    // After the cooldown, failures through the function reopen it for the layer.
    tokio::time::advance(Duration::from_secs(11)).await;
    assert!(matches!(lookup(true).await, Err(AppError::Lookup)));
    assert_eq!(breaker_state("shared_lookup"), BreakerState::Open);
    fail.store(false, Ordering::SeqCst);
    let seen = calls.load(Ordering::SeqCst);
    let error = layered.ready().await.unwrap().call(()).await.unwrap_err();
    assert_eq!(refusal(&error), RefusalKind::BreakerOpen);
    assert_eq!(calls.load(Ordering::SeqCst), seen, "the service never ran");
    assert_eq!(entries("shared_lookup"), 1);
}

/// A service that records the budget each call was given and fails its first `failures` calls
/// with a transient error.
#[derive(Clone)]
struct Index {
    calls: Arc<AtomicU32>,
    failures: u32,
    budgets: Arc<std::sync::Mutex<Vec<Duration>>>,
    hold: Option<Arc<Notify>>,
}

impl Index {
    fn new(failures: u32) -> Self {
        Self {
            calls: Arc::default(),
            failures,
            budgets: Arc::default(),
            hold: None,
        }
    }
}

impl Service<u64> for Index {
    type Response = u64;
    type Error = BoxError;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<u64, BoxError>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, id: u64) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let call = this.calls.fetch_add(1, Ordering::SeqCst);
            let remaining = Deadline::current().map(|d| d.remaining());
            this.budgets
                .lock()
                .unwrap()
                .push(remaining.unwrap_or(Duration::MAX));
            if let Some(hold) = &this.hold {
                hold.notified().await;
            }
            if call < this.failures {
                Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset).into())
            } else {
                Ok(id)
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn the_layer_applies_the_operations_settings_from_the_file() {
    // retry = index_retry (3 attempts): two transient failures, then the answer.
    let index = Index::new(2);
    let mut layered = velocity_policy::operation_layer!("layered_index")
        .layer(Idempotent::service(index.clone()));
    assert_eq!(layered.ready().await.unwrap().call(7).await.unwrap(), 7);
    assert_eq!(index.calls.load(Ordering::SeqCst), 3, "retried twice");
    let retries = Registry::global().snapshot().retries;
    let retry = retries.iter().find(|r| &*r.name == "index_retry").unwrap();
    assert_eq!((retry.attempts, retry.retries), (3, 2));

    // deadline = 300ms: each attempt ran under at most the operation's budget.
    for budget in index.budgets.lock().unwrap().iter() {
        assert!(*budget <= Duration::from_millis(300), "{budget:?}");
    }

    // min_budget = 50ms: with 40 ms left above it, refused before the service runs.
    let outer =
        Deadline::for_operation("caller", Duration::from_millis(40), Duration::ZERO).unwrap();
    let error = outer
        .run_in_scope(async { layered.ready().await.unwrap().call(8).await })
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(refusal(&error), RefusalKind::InsufficientBudget);
    assert_eq!(
        index.calls.load(Ordering::SeqCst),
        3,
        "not run below the minimum"
    );

    // bulkhead shared_index { max_concurrent = 1; max_queued = 0 }: a second call while one holds
    // the slot is refused at once.
    let hold = Arc::new(Notify::new());
    let held = Index {
        hold: Some(hold.clone()),
        ..Index::new(0)
    };
    let mut first =
        velocity_policy::operation_layer!("layered_index").layer(Idempotent::service(held.clone()));
    let mut second = first.clone();
    let running = tokio::spawn(async move { first.ready().await.unwrap().call(1).await });
    tokio::task::yield_now().await;
    assert_eq!(held.calls.load(Ordering::SeqCst), 1);
    let error = second.ready().await.unwrap().call(2).await.unwrap_err();
    assert_eq!(refusal(&error), RefusalKind::BulkheadFull);
    hold.notify_one();
    assert_eq!(running.await.unwrap().unwrap(), 1);

    // breaker shared_index (4 failures within 30s; each failed attempt is one, the first call's two
    // included): a service that always fails opens it on its second attempt, the third is
    // refused (and a refusal is not retried), and the next call never reaches the service.
    let broken = Index::new(u32::MAX);
    let mut failing = velocity_policy::operation_layer!("layered_index")
        .layer(Idempotent::service(broken.clone()));
    assert_eq!(breaker_state("shared_index"), BreakerState::Closed);
    let error = failing.ready().await.unwrap().call(3).await.unwrap_err();
    assert_eq!(refusal(&error), RefusalKind::BreakerOpen);
    assert_eq!(broken.calls.load(Ordering::SeqCst), 2);
    assert_eq!(breaker_state("shared_index"), BreakerState::Open);
    let seen = broken.calls.load(Ordering::SeqCst);
    let error = failing.ready().await.unwrap().call(4).await.unwrap_err();
    assert_eq!(refusal(&error), RefusalKind::BreakerOpen);
    assert_eq!(broken.calls.load(Ordering::SeqCst), seen);
    assert_eq!(entries("shared_index"), 1);
}

/// The attribute side of the operation `hangs_through_attribute`: a dependency that never
/// answers.
#[velocity_policy::critical]
#[velocity_policy::idempotent]
async fn hangs_through_attribute() -> Result<u32, AppError> {
    std::future::pending().await
}

fn breaker_snapshot(name: &str) -> velocity_policy::breaker::BreakerSnapshot {
    Registry::global().find_breaker(name).unwrap().snapshot()
}

#[tokio::test(start_paused = true)]
async fn a_dependency_that_hangs_opens_the_breaker_through_the_attribute_and_the_layer_alike() {
    // The attribute: three attempts, each out of its 100 ms, are three failures.
    let started = tokio::time::Instant::now();
    assert!(matches!(
        hangs_through_attribute().await,
        Err(AppError::TimedOut(_))
    ));
    let attribute_waited = started.elapsed();
    // The layer over the same operation, written as `operation_layer!`: the retry's attempt
    // timeout drops the breaker's call, and the breaker counts it as the attribute does.
    let calls = Arc::new(AtomicU32::new(0));
    let service = {
        let calls = calls.clone();
        tower::service_fn(move |()| {
            calls.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<u32, BoxError>>()
        })
    };
    let mut layered = velocity_policy::operation_layer!("hangs_through_layer")
        .layer(Idempotent::service(service));
    let started = tokio::time::Instant::now();
    let error = layered.ready().await.unwrap().call(()).await.unwrap_err();
    assert!(error.is::<DeadlineExceeded>(), "{error}");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let (attribute, layer) = (
        breaker_snapshot("hanging_attribute"),
        breaker_snapshot("hanging_layer"),
    );
    assert_eq!(
        (attribute.failures, attribute.state),
        (3, BreakerState::Open)
    );
    assert_eq!((layer.failures, layer.state), (3, BreakerState::Open));
    // Three attempts of 100 ms and two pauses of at most 2 ms, through either.
    for waited in [attribute_waited, started.elapsed()] {
        assert!(
            (Duration::from_millis(300)..Duration::from_millis(305)).contains(&waited),
            "{waited:?}"
        );
    }

    // Open, either refuses at once: no request pays the timeout again.
    let started = tokio::time::Instant::now();
    match hangs_through_attribute().await {
        Err(AppError::Refused(refusal)) => assert_eq!(refusal.kind(), RefusalKind::BreakerOpen),
        other => panic!("expected the breaker open, got {other:?}"),
    }
    let error = layered.ready().await.unwrap().call(()).await.unwrap_err();
    assert_eq!(refusal(&error), RefusalKind::BreakerOpen);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

// ---- One span per layer call, named after the operation (issue 20) ----

#[test]
fn a_layer_call_is_one_span_named_after_its_operation() {
    let logs = velocity_policy_testkit::captured::Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .without_time()
        .finish();
    // The process's subscriber, not this thread's: the other tests of this binary run in
    // parallel, and a callsite one of them hit first while no subscriber was set could stay
    // cached as "never" for a thread's own subscriber (the refusal's event went missing under
    // load, even with the interest cache rebuilt). This is the binary's only test that installs
    // one; it reads only its own operation's lines.
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let service = tower::service_fn(|x: u32| async move { Ok::<_, BoxError>(x) });
        let mut layered = velocity_policy::operation_layer!("spanned_lookup").layer(service);
        // 10 ms left of the request, below the operation's 100 ms minimum: refused.
        let refused = Deadline::after(Duration::from_millis(10))
            .scope(async { layered.ready().await.unwrap().call(1).await })
            .await
            .unwrap_err();
        assert_eq!(refusal(&refused), RefusalKind::InsufficientBudget);
    });
    let text = logs.text();
    let refused: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("kind=\"insufficient_budget\"") && l.contains("spanned_lookup"))
        .collect();
    assert_eq!(refused.len(), 1, "{text}");
    assert!(
        refused[0].contains("spanned_lookup{operation=\"spanned_lookup\" class=\"critical\"}:"),
        "{text}"
    );
}
