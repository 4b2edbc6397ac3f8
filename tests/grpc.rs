//! Two real tonic services on loopback, A calling B (issue 43): `DeadlineLayer` on both servers,
//! `PropagateDeadlineLayer` on A's channel. B hears at most what A had left minus the reserve;
//! below its minimum B answers `DEADLINE_EXCEEDED` without running the method; the attributes on
//! tonic service methods turn our refusals and expiries into gRPC's statuses (with
//! `grpc-retry-pushback-ms` when the wait is known); and a retry of ours on the client side
//! honours the pushback it receives. Feature `tonic`.
//!
//! Real sockets, so the real clock: every assertion on time is a bound the code guarantees (a
//! budget never above what was left, a retry never sooner than the pushback), with the slack
//! on the other side generous enough for a loaded machine.
#![cfg(feature = "tonic")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

#[path = "../examples/grpc/wire.rs"]
mod wire;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status};
use velocity_policy::grpc::{REFUSAL_HEADER, RETRY_PUSHBACK_HEADER};
use velocity_policy::layer::{DeadlineLayer, PropagateDeadline, PropagateDeadlineLayer};
use velocity_policy::{
    Breaker, Bulkhead, CallError, Deadline, Idempotent, RefusalKind, Registry, RetryPolicy,
    retry_within,
};
use wire::{Answer, Ask, Handler, Reply};

/// What A keeps of its budget for itself when it calls B.
const RESERVE: Duration = Duration::from_millis(100);
/// Below this, B does not start a request.
const B_MIN_BUDGET: Duration = Duration::from_millis(200);
/// How long a test trips a breaker for, which its refusal's pushback says.
const TRIPPED_FOR: Duration = Duration::from_millis(300);

/// The dependency: its methods are tonic service methods under the attributes.
#[derive(Default)]
struct B {
    /// Runs of `Budget`'s body.
    runs: AtomicU32,
}

impl B {
    /// What B had left and what it was told: no attribute, the request's deadline as stamped.
    async fn budget(&self, request: Request<Ask>) -> Result<Response<Answer>, Status> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(Answer {
            remaining_ms: wire::remaining_ms(),
            told_ms: wire::told_ms(&request),
            ..Answer::default()
        }))
    }

    /// Behind a breaker: its refusal is `UNAVAILABLE` with the pushback.
    #[velocity_policy::resilient(
        breaker(failures = 5, within = "30s", cooldown = "10s"),
        deadline = "1s"
    )]
    async fn guarded(&self, _request: Request<Ask>) -> Result<Response<Answer>, Status> {
        Ok(Response::new(Answer::default()))
    }

    /// Behind a bulkhead of one slot: its refusal is `RESOURCE_EXHAUSTED`.
    #[velocity_policy::critical(bulkhead(max_concurrent = 1, max_queued = 0), deadline = "1s")]
    async fn crowded(&self, _request: Request<Ask>) -> Result<Response<Answer>, Status> {
        Ok(Response::new(Answer::default()))
    }

    /// Never answers within its 50 ms: the expiry is `DEADLINE_EXCEEDED`.
    #[velocity_policy::critical(deadline = "50ms")]
    async fn stuck(&self, _request: Request<Ask>) -> Result<Response<Answer>, Status> {
        std::future::pending::<()>().await;
        Ok(Response::new(Answer::default()))
    }

    /// Behind a breaker the retry test trips: refused with a pushback until it closes.
    #[velocity_policy::resilient(
        breaker(failures = 5, within = "30s", cooldown = "10s"),
        deadline = "1s"
    )]
    async fn flaky(&self, _request: Request<Ask>) -> Result<Response<Answer>, Status> {
        Ok(Response::new(Answer::default()))
    }

    /// A dependency that asks not to be retried (a negative pushback, gRPC's A6).
    async fn never_again(&self, _request: Request<Ask>) -> Result<Response<Answer>, Status> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let mut status = Status::unavailable("overloaded: do not retry");
        status
            .metadata_mut()
            .insert(RETRY_PUSHBACK_HEADER, "-1".parse().unwrap());
        Err(status)
    }
}

impl Handler for B {
    const NAME: &'static str = "policy.example.B";

    fn call(self: Arc<Self>, method: &str, request: Request<Ask>) -> Reply {
        match method {
            "Budget" => Box::pin(async move { self.budget(request).await }),
            "Guarded" => Box::pin(async move { self.guarded(request).await }),
            "Crowded" => Box::pin(async move { self.crowded(request).await }),
            "Stuck" => Box::pin(async move { self.stuck(request).await }),
            "Flaky" => Box::pin(async move { self.flaky(request).await }),
            "NeverAgain" => Box::pin(async move { self.never_again(request).await }),
            other => {
                let status = Status::unimplemented(format!("B has no method {other}"));
                Box::pin(async move { Err(status) })
            }
        }
    }
}

/// The caller: relays to B through a channel that carries its deadline.
struct A {
    b: tonic::client::Grpc<PropagateDeadline<Channel>>,
}

impl A {
    async fn relay(&self, request: Request<Ask>) -> Result<Response<Answer>, Status> {
        let remaining_ms = wire::remaining_ms();
        let told_ms = wire::told_ms(&request);
        let mut b = self.b.clone();
        let answer = wire::call::<B, _>(&mut b, "Budget", Request::new(Ask {}))
            .await?
            .into_inner();
        Ok(Response::new(Answer {
            remaining_ms,
            told_ms,
            downstream_remaining_ms: answer.remaining_ms,
            downstream_told_ms: answer.told_ms,
        }))
    }
}

impl Handler for A {
    const NAME: &'static str = "policy.example.A";

    fn call(self: Arc<Self>, method: &str, request: Request<Ask>) -> Reply {
        match method {
            "Relay" => Box::pin(async move { self.relay(request).await }),
            other => {
                let status = Status::unimplemented(format!("A has no method {other}"));
                Box::pin(async move { Err(status) })
            }
        }
    }
}

/// A tonic server on a loopback port of its own, stopped by [`Running::stop`].
struct Running {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Running {
    async fn start<H: Handler>(handler: Arc<H>, deadline: DeadlineLayer) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(
            tonic::transport::Server::builder()
                .layer(deadline)
                .add_service(wire::Server::new(handler))
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                }),
        );
        Self { addr, stop, task }
    }

    fn channel(&self) -> Channel {
        Endpoint::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect_lazy()
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

/// B behind its `DeadlineLayer` (5 s at most, nothing started under [`B_MIN_BUDGET`]).
async fn start_b() -> (Arc<B>, Running) {
    let b = Arc::new(B::default());
    let layer = DeadlineLayer::new(Duration::from_secs(5)).min_budget(B_MIN_BUDGET);
    let running = Running::start(Arc::clone(&b), layer).await;
    (b, running)
}

/// A behind its own `DeadlineLayer`, calling `b` through `PropagateDeadlineLayer`.
async fn start_a(b: &Running) -> Running {
    let channel = tower::ServiceBuilder::new()
        .layer(PropagateDeadlineLayer::new().reserve(RESERVE))
        .service(b.channel());
    let a = Arc::new(A {
        b: tonic::client::Grpc::new(channel),
    });
    let layer = DeadlineLayer::new(Duration::from_secs(5)).min_budget(Duration::from_millis(10));
    Running::start(a, layer).await
}

/// A plain client (no propagation: the test sets each request's timeout itself).
fn client(server: &Running) -> tonic::client::Grpc<Channel> {
    tonic::client::Grpc::new(server.channel())
}

/// A request with `grpc-timeout` set to `timeout`.
fn asking(timeout: Duration) -> Request<Ask> {
    let mut request = Request::new(Ask {});
    request.set_timeout(timeout);
    request
}

fn header<'a>(status: &'a Status, name: &str) -> Option<&'a str> {
    status.metadata().get(name).map(|v| v.to_str().unwrap())
}

/// The mechanism of kind `list` whose name ends with `::function` (an attribute names its
/// inline mechanisms after the function's path).
fn named(names: impl IntoIterator<Item = Arc<str>>, function: &str) -> Arc<str> {
    let suffix = format!("::{function}");
    names
        .into_iter()
        .find(|name| name.ends_with(&suffix))
        .unwrap_or_else(|| panic!("no mechanism named ...{suffix}"))
}

fn breaker_of(function: &str) -> Breaker {
    let snapshot = Registry::global().snapshot();
    let name = named(snapshot.breakers.into_iter().map(|b| b.name), function);
    Registry::global().find_breaker(&name).unwrap()
}

fn bulkhead_of(function: &str) -> Bulkhead {
    let snapshot = Registry::global().snapshot();
    let name = named(snapshot.bulkheads.into_iter().map(|b| b.name), function);
    Registry::global().find_bulkhead(&name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_hears_at_most_what_a_had_left_minus_the_reserve() {
    let (b, b_server) = start_b().await;
    let a_server = start_a(&b_server).await;

    let answer = wire::call::<A, _>(
        &mut client(&a_server),
        "Relay",
        asking(Duration::from_secs(2)),
    )
    .await
    .unwrap()
    .into_inner();

    // A's deadline is its caller's 2 s (below its own 5 s).
    assert!((1_000..=2_000).contains(&answer.remaining_ms), "{answer:?}");
    // B was told what A had left when it called, less the reserve: never more.
    let most = answer.remaining_ms - RESERVE.as_millis() as u64;
    assert!(answer.downstream_told_ms <= most, "{answer:?}");
    assert!(answer.downstream_told_ms + 500 >= most, "{answer:?}");
    // And B's deadline is that budget, not its own 5 s.
    assert!(
        answer.downstream_remaining_ms <= answer.downstream_told_ms,
        "{answer:?}"
    );
    assert!(answer.downstream_remaining_ms > 0, "{answer:?}");
    assert_eq!(b.runs.load(Ordering::SeqCst), 1);

    a_server.stop().await;
    b_server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_its_minimum_b_answers_deadline_exceeded_without_running_the_method() {
    let (b, b_server) = start_b().await;
    let a_server = start_a(&b_server).await;

    // A has at most 250 ms, so it tells B at most 150 ms: under B's 200 ms minimum.
    let status = wire::call::<A, _>(
        &mut client(&a_server),
        "Relay",
        asking(Duration::from_millis(250)),
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(b.runs.load(Ordering::SeqCst), 0, "B's method never ran");

    // Asked directly with too little, B says why in gRPC's terms.
    let status = wire::call::<B, _>(
        &mut client(&b_server),
        "Budget",
        asking(Duration::from_millis(150)),
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(
        header(&status, REFUSAL_HEADER),
        Some(RefusalKind::InsufficientBudget.as_str())
    );
    assert_eq!(b.runs.load(Ordering::SeqCst), 0);

    // With enough, it runs.
    wire::call::<B, _>(
        &mut client(&b_server),
        "Budget",
        asking(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    assert_eq!(b.runs.load(Ordering::SeqCst), 1);

    a_server.stop().await;
    b_server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attributes_refusals_and_expiries_reach_the_caller_as_grpc_statuses() {
    let (_b, b_server) = start_b().await;
    let mut b = client(&b_server);
    let ask = || asking(Duration::from_secs(2));

    // A breaker open: UNAVAILABLE, with how long it stays open as the pushback.
    wire::call::<B, _>(&mut b, "Guarded", ask()).await.unwrap();
    let breaker = breaker_of("guarded");
    breaker.trip(Duration::from_secs(2), "told to back off");
    let status = wire::call::<B, _>(&mut b, "Guarded", ask())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(
        header(&status, REFUSAL_HEADER),
        Some(RefusalKind::BreakerOpen.as_str())
    );
    let pushback: u64 = header(&status, RETRY_PUSHBACK_HEADER)
        .expect("a pushback")
        .parse()
        .unwrap();
    assert!((1_000..=2_000).contains(&pushback), "{pushback}");
    assert!(
        !status.message().contains("guarded"),
        "the breaker's name stays in B: {}",
        status.message()
    );

    // A full bulkhead: RESOURCE_EXHAUSTED, and no pushback (nobody knows when a slot frees).
    wire::call::<B, _>(&mut b, "Crowded", ask()).await.unwrap();
    let bulkhead = bulkhead_of("crowded");
    let held = bulkhead.try_acquire().unwrap();
    let status = wire::call::<B, _>(&mut b, "Crowded", ask())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(
        header(&status, REFUSAL_HEADER),
        Some(RefusalKind::BulkheadFull.as_str())
    );
    assert_eq!(header(&status, RETRY_PUSHBACK_HEADER), None);
    drop(held);
    wire::call::<B, _>(&mut b, "Crowded", ask()).await.unwrap();

    // An expiry of the method's own 50 ms: DEADLINE_EXCEEDED, long before the caller's 2 s.
    let started = Instant::now();
    let status = wire::call::<B, _>(&mut b, "Stuck", ask())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(
        header(&status, REFUSAL_HEADER),
        None,
        "an expiry, not a refusal"
    );

    b_server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_of_ours_honours_the_pushback_it_receives() {
    let (b, b_server) = start_b().await;
    let b_client = client(&b_server);
    // Its own backoff would come back within 2 ms, while the breaker is still open.
    let policy = RetryPolicy::builder("grpc_client")
        .attempts(3)
        .backoff(Duration::from_millis(1), Duration::from_millis(2))
        .build();
    let retried = |method: &'static str| {
        let starts = Arc::new(Mutex::new(Vec::new()));
        let call_starts = Arc::clone(&starts);
        let b_client = b_client.clone();
        let policy = &policy;
        async move {
            let start = Instant::now();
            let result = retry_within(
                &Deadline::after(Duration::from_secs(3)),
                policy,
                Idempotent::claim(|_| {
                    call_starts.lock().unwrap().push(start.elapsed());
                    let mut b_client = b_client.clone();
                    async move {
                        wire::call::<B, _>(&mut b_client, method, Request::new(Ask {}))
                            .await
                            .map_err(CallError::Failed)
                    }
                }),
            )
            .await;
            let starts = starts.lock().unwrap().clone();
            (starts, result)
        }
    };

    wire::call::<B, _>(&mut b_client.clone(), "Flaky", Request::new(Ask {}))
        .await
        .unwrap();
    breaker_of("flaky").trip(TRIPPED_FOR, "told to back off");
    let (starts, result) = retried("Flaky").await;
    assert!(result.is_ok(), "{result:?} after {starts:?}");
    assert_eq!(starts.len(), 2, "one refusal, then the retry: {starts:?}");
    assert!(starts[1] - starts[0] >= TRIPPED_FOR, "{starts:?}");

    // A negative pushback asks not to retry: one attempt, and the retrying stops.
    let (starts, result) = retried("NeverAgain").await;
    match result {
        Err(CallError::Failed(status)) => assert_eq!(status.code(), Code::Unavailable),
        other => panic!("expected B's status, got {other:?}"),
    }
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(b.runs.load(Ordering::SeqCst), 1);
    assert_eq!(policy.snapshot().stopped_by_pushback, 1);

    b_server.stop().await;
}

/// A service trait as tonic-build writes one: `#[async_trait]`.
#[tonic::async_trait]
trait Quotes: Send + Sync + 'static {
    async fn quote(&self, request: Request<Ask>) -> Result<Response<Answer>, Status>;
    async fn reserve(&self, request: Request<Ask>) -> Result<Response<Answer>, Status>;
}

#[derive(Default)]
struct QuoteService {
    runs: AtomicU32,
}

#[tonic::async_trait]
impl Quotes for QuoteService {
    /// The attribute on the trait method itself, under `#[async_trait]`.
    #[velocity_policy::resilient(
        breaker(failures = 5, within = "30s", cooldown = "10s"),
        deadline = "1s"
    )]
    async fn quote(&self, request: Request<Ask>) -> Result<Response<Answer>, Status> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(Answer {
            remaining_ms: wire::remaining_ms(),
            told_ms: wire::told_ms(&request),
            ..Answer::default()
        }))
    }

    /// Never answers within its 30 ms.
    #[velocity_policy::critical(deadline = "30ms")]
    async fn reserve(&self, _request: Request<Ask>) -> Result<Response<Answer>, Status> {
        std::future::pending::<()>().await;
        Ok(Response::new(Answer::default()))
    }
}

#[tokio::test(start_paused = true)]
async fn the_attributes_go_on_an_async_trait_service_method_itself() {
    let service = QuoteService::default();
    let answer = service
        .quote(Request::new(Ask {}))
        .await
        .unwrap()
        .into_inner();
    assert!(
        (1..=1_000).contains(&answer.remaining_ms),
        "under the attribute's 1 s deadline: {answer:?}"
    );
    assert_eq!(service.runs.load(Ordering::SeqCst), 1);

    breaker_of("quote").trip(Duration::from_secs(2), "told to back off");
    let status = service.quote(Request::new(Ask {})).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(header(&status, RETRY_PUSHBACK_HEADER), Some("2000"));
    assert_eq!(service.runs.load(Ordering::SeqCst), 1, "refused: never ran");

    let status = service.reserve(Request::new(Ask {})).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
}
