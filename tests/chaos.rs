//! Fault injection through real attribute functions (tests/policies/chaos.policy), on tokio's
//! paused clock: injected faults go through the same mechanisms as real ones (the breaker
//! counts them, the deadline bounds them, retries see them, hedges race them), a drill is
//! switched at run time through the registry, keeps to its window and share of instances, and
//! is visible as injected in events, metrics and the snapshot. Drills inject only in a process
//! that armed them (`chaos::arm()`, off by default: velocity-policy-runtime's tests/chaos_armed.rs), so
//! every test here arms them first.
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    reason = "test helpers: an unexpected outcome fails the test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use velocity_policy::chaos::{self, FaultKind};
use velocity_policy::{DeadlineExceeded, RefusalKind, RefusalReason, Registry, ResilienceError};

#[derive(Debug)]
enum AppError {
    Refused(ResilienceError),
    TimedOut,
    /// What the drills inject: the function's own error, marked.
    Injected,
    /// A real failure of the dependency.
    Broken,
}

impl From<ResilienceError> for AppError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for AppError {
    fn from(_: DeadlineExceeded) -> Self {
        Self::TimedOut
    }
}

impl velocity_policy::Transient for AppError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::Injected | Self::TimedOut)
    }
}

/// Counts the real calls: an injected fault in place of the call leaves it alone.
#[derive(Clone, Default)]
struct Real(Arc<AtomicU32>);

impl Real {
    async fn call(&self, took: u64) -> u32 {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::time::sleep(Duration::from_millis(took)).await;
        n
    }

    fn calls(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

fn injected(name: &str, kind: FaultKind) -> u64 {
    Registry::global()
        .find_chaos(name)
        .unwrap()
        .snapshot()
        .faults
        .iter()
        .find(|f| f.kind == kind)
        .map_or(0, |f| f.injected)
}

#[velocity_policy::resilient(
    breaker(failures = 3, within = "30s", cooldown = "10s"),
    chaos = "breaker_drill",
    deadline = "1s"
)]
async fn counted(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn the_breaker_counts_injected_failures_and_opens() {
    chaos::arm();
    Registry::global().chaos_error_for("breaker_drill", || AppError::Injected);
    let real = Real::default();
    for _ in 0..3 {
        assert!(matches!(
            counted(real.clone()).await,
            Err(AppError::Injected)
        ));
    }
    assert_eq!(real.calls(), 0, "the injected error stood in for the call");
    match counted(real.clone()).await {
        Err(AppError::Refused(refusal)) => assert_eq!(refusal.kind(), RefusalKind::BreakerOpen),
        other => panic!("expected the open breaker's refusal, got {other:?}"),
    }
    assert_eq!(
        injected("breaker_drill", FaultKind::Error),
        3,
        "the refused call drew nothing: the breaker refused before the attempt"
    );
}

fn last_cause(function: &str) -> velocity_policy::OpenCause {
    Registry::global()
        .find_breaker(&format!("{}::{function}", module_path!()))
        .unwrap()
        .snapshot()
        .last_cause
        .unwrap()
}

#[velocity_policy::resilient(
    breaker(failures = 2, within = "30s", cooldown = "10s"),
    chaos = "marked_drill",
    deadline = "1s"
)]
async fn marked(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn an_opening_from_injected_failures_says_it_was_a_drill() {
    chaos::arm();
    Registry::global().chaos_error_for("marked_drill", || AppError::Injected);
    let real = Real::default();
    for _ in 0..2 {
        assert!(matches!(
            marked(real.clone()).await,
            Err(AppError::Injected)
        ));
    }
    let cause = last_cause("marked");
    assert_eq!(cause.injected_by(), Some("marked_drill"));
    assert_eq!(cause.code(), "failures", "the code is what was counted");
    assert_eq!(cause.counted(), Some((2, Duration::from_secs(30))));
    assert_eq!(
        cause.to_string(),
        "2 failures within 30s, the last one injected by chaos drill `marked_drill` (a drill, not an incident)"
    );
    let json = serde_json::to_value(&cause).unwrap();
    assert_eq!(json["cause"], "injected");
    assert_eq!(json["drill"], "marked_drill");
    assert_eq!(json["opened_by"]["cause"], "failures");
    // The refusal carries the same cause.
    match marked(real.clone()).await {
        Err(AppError::Refused(refusal)) => match refusal.reason() {
            RefusalReason::BreakerOpen { cause, .. } => {
                assert_eq!(cause.injected_by(), Some("marked_drill"));
            }
            other => panic!("expected the open breaker's reason, got {other:?}"),
        },
        other => panic!("expected the open breaker's refusal, got {other:?}"),
    }
}

#[velocity_policy::resilient(
    breaker(failures = 2, within = "30s", cooldown = "10s"),
    chaos = "mixed_drill",
    deadline = "1s"
)]
async fn mixed(real: Real, broken: bool) -> Result<u32, AppError> {
    let n = real.call(10).await;
    if broken { Err(AppError::Broken) } else { Ok(n) }
}

#[tokio::test(start_paused = true)]
async fn the_failure_that_opens_decides_whether_the_opening_was_a_drill() {
    chaos::arm();
    Registry::global().chaos_error_for("mixed_drill", || AppError::Injected);
    let drill = Registry::global().chaos("mixed_drill");
    let real = Real::default();
    drill.enable();
    assert!(matches!(
        mixed(real.clone(), false).await,
        Err(AppError::Injected)
    ));
    drill.disable();
    // The second (opening) failure is the dependency's own: an incident, not a drill.
    assert!(matches!(
        mixed(real.clone(), true).await,
        Err(AppError::Broken)
    ));
    let cause = last_cause("mixed");
    assert_eq!(cause.injected_by(), None, "{cause}");
    assert!(!cause.to_string().contains("injected"), "{cause}");
    // After the cooldown the first call is a probe; an injected failure reopens, and says so.
    tokio::time::advance(Duration::from_secs(10)).await;
    drill.enable();
    assert!(matches!(
        mixed(real.clone(), false).await,
        Err(AppError::Injected)
    ));
    drill.disable();
    let cause = last_cause("mixed");
    assert_eq!(cause.injected_by(), Some("mixed_drill"));
    assert_eq!(cause.code(), "probe_failed");
    assert_eq!(real.calls(), 1, "only the broken call was real");
}

#[velocity_policy::resilient(
    breaker(failures = 1, within = "30s", cooldown = "10s"),
    chaos = "slow_marked_drill",
    deadline = "1s"
)]
async fn slow_marked(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn an_expiry_from_injected_latency_opens_the_breaker_as_a_drill() {
    chaos::arm();
    let real = Real::default();
    assert!(matches!(
        slow_marked(real.clone()).await,
        Err(AppError::TimedOut)
    ));
    let cause = last_cause("slow_marked");
    assert_eq!(cause.injected_by(), Some("slow_marked_drill"), "{cause}");
    assert_eq!(cause.code(), "failures");
}

/// The injected mark is the failure's own, an argument of the call that records it
/// (`record_injected_failure`), never a mark kept beside the breaker: it names the drill on that
/// breaker's failure only, never on another breaker's, and never on the same breaker's next one.
#[test]
fn a_mark_is_for_one_breaker_and_one_failure() {
    chaos::arm();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let _in_runtime = runtime.enter();
    let open_after = |failures| {
        velocity_policy::Breaker::builder("mark")
            .open_after_failures(failures, Duration::from_secs(30))
            .build()
    };
    // `marked` opens at its second failure: the injected one first, then a real one.
    let (marked, other) = (open_after(2), open_after(1));
    marked.record_injected_failure(Arc::from("a_drill"));
    other.record_failure();
    let cause = other.snapshot().last_cause.unwrap();
    assert_eq!(cause.injected_by(), None, "another breaker's mark: {cause}");
    marked.record_failure();
    let cause = marked.snapshot().last_cause.unwrap();
    assert_eq!(cause.injected_by(), None, "the mark was dropped: {cause}");
    let next = open_after(1);
    next.record_injected_failure(Arc::from("a_drill"));
    assert_eq!(
        next.snapshot().last_cause.unwrap().injected_by(),
        Some("a_drill")
    );
}

#[velocity_policy::resilient(
    breaker(failures = 1, within = "30s", cooldown = "10s"),
    chaos = "stale_mark_drill",
    deadline = "1s"
)]
async fn stale_mark(real: Real, broken: bool) -> Result<u32, AppError> {
    let n = real.call(10).await;
    if broken { Err(AppError::Broken) } else { Ok(n) }
}

/// Injected latency cut short by the caller's own deadline is the caller's expiry, and leaves
/// nothing behind: the dependency's own failure on the next call, on the same thread with the
/// drill switched off, is an incident, not a drill. (A mark kept beside the
/// breaker, per thread, outlived that expiry and claimed the next failure.)
#[tokio::test(start_paused = true)]
async fn a_callers_expiry_in_injected_latency_leaves_no_mark_on_the_next_failure() {
    chaos::arm();
    let real = Real::default();
    assert_eq!(
        stale_mark(real.clone(), false).await.unwrap(),
        1,
        "declared off"
    );
    let drill = Registry::global().chaos("stale_mark_drill");
    drill.enable();
    let outcome = velocity_policy::Deadline::from_caller(Duration::from_millis(100))
        .scope(stale_mark(real.clone(), false))
        .await;
    assert!(matches!(outcome, Err(AppError::TimedOut)), "{outcome:?}");
    assert_eq!(injected("stale_mark_drill", FaultKind::Latency), 1);
    let breaker = Registry::global()
        .find_breaker(concat!(module_path!(), "::", "stale_mark"))
        .unwrap();
    assert!(breaker.check().is_ok(), "the caller's expiry is no failure");
    drill.disable();
    assert!(matches!(
        stale_mark(real.clone(), true).await,
        Err(AppError::Broken)
    ));
    let cause = last_cause("stale_mark");
    assert_eq!(cause.injected_by(), None, "{cause}");
    assert_eq!(cause.code(), "failures");
}

#[velocity_policy::critical(chaos = "always_slow", deadline = "1s")]
async fn bounded(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn the_deadline_bounds_injected_latency() {
    chaos::arm();
    let real = Real::default();
    let at = Instant::now();
    assert!(matches!(
        bounded(real.clone()).await,
        Err(AppError::TimedOut)
    ));
    assert_eq!(at.elapsed(), Duration::from_secs(1), "not the injected 5 s");
    assert_eq!(
        real.calls(),
        0,
        "the injected latency comes before the call"
    );
    assert_eq!(injected("always_slow", FaultKind::Latency), 1);
}

#[velocity_policy::critical(
    retry(attempts = 3, base = "1ms", cap = "2ms"),
    chaos = "always_fails",
    deadline = "1s"
)]
#[velocity_policy::idempotent]
async fn retried(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn retries_see_injected_errors() {
    chaos::arm();
    Registry::global().chaos_error_for("always_fails", || AppError::Injected);
    let real = Real::default();
    let before = injected("always_fails", FaultKind::Error);
    assert!(matches!(
        retried(real.clone()).await,
        Err(AppError::Injected)
    ));
    assert_eq!(
        injected("always_fails", FaultKind::Error) - before,
        3,
        "each of the three attempts drew its own fault"
    );
    assert_eq!(real.calls(), 0);
}

#[velocity_policy::critical(hedge(after = "50ms"), chaos = "first_slow", deadline = "2s")]
#[velocity_policy::idempotent]
async fn hedged(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn a_hedge_races_injected_latency() {
    chaos::arm();
    let real = Real::default();
    let at = Instant::now();
    // At 50% the first attempt of two is hit: it waits 1 s, its hedge starts after 50 ms and
    // is not hit.
    assert_eq!(hedged(real.clone()).await.unwrap(), 1);
    assert_eq!(
        at.elapsed(),
        Duration::from_millis(60),
        "50 ms, then the real 10 ms"
    );
    assert_eq!(
        real.calls(),
        1,
        "the slow attempt was dropped before its call"
    );
    assert_eq!(injected("first_slow", FaultKind::Latency), 1);
}

#[velocity_policy::resilient(
    breaker(failures = 1, within = "30s", cooldown = "10s"),
    chaos = "refuses",
    deadline = "1s"
)]
async fn refused(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn an_injected_refusal_never_runs_the_work_and_is_marked_injected() {
    chaos::arm();
    let real = Real::default();
    for _ in 0..2 {
        match refused(real.clone()).await {
            Err(AppError::Refused(refusal)) => {
                assert_eq!(refusal.kind(), RefusalKind::Injected);
                assert!(matches!(
                    refusal.reason(),
                    RefusalReason::Injected {
                        fault: "refuse",
                        ..
                    }
                ));
                assert!(refusal.to_string().contains("chaos drill"), "{refusal}");
            }
            other => panic!("expected an injected refusal, got {other:?}"),
        }
    }
    assert_eq!(real.calls(), 0);
    // A refusal is not a failure: the breaker (one failure opens it) stayed closed.
    let breaker = Registry::global()
        .find_breaker(concat!(module_path!(), "::", "refused"))
        .unwrap();
    assert!(breaker.check().is_ok());
}

#[velocity_policy::resilient(
    breaker(failures = 5, within = "30s", cooldown = "10s"),
    chaos = "backs_off",
    deadline = "1s"
)]
async fn told_to_back_off(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn an_injected_429_trips_the_breaker_for_its_retry_after() {
    chaos::arm();
    let real = Real::default();
    match told_to_back_off(real.clone()).await {
        Err(AppError::Refused(refusal)) => {
            assert_eq!(refusal.kind(), RefusalKind::RateLimited);
            assert_eq!(refusal.retry_after(), Some(Duration::from_secs(5)));
        }
        other => panic!("expected the injected 429, got {other:?}"),
    }
    // The breaker was told to back off: it refuses for the 5 s, without drawing again.
    match told_to_back_off(real.clone()).await {
        Err(AppError::Refused(refusal)) => assert_eq!(refusal.kind(), RefusalKind::BreakerOpen),
        other => panic!("expected the tripped breaker's refusal, got {other:?}"),
    }
    assert_eq!(injected("backs_off", FaultKind::TooManyRequests), 1);
    let breaker = Registry::global()
        .find_breaker(concat!(module_path!(), "::", "told_to_back_off"))
        .unwrap();
    let cause = breaker.snapshot().last_cause.unwrap();
    assert!(
        cause.to_string().contains("injected"),
        "the opening says it was a drill: {cause}"
    );
    // Switched off, the breaker's 5 s over: the real call runs.
    Registry::global().chaos("backs_off").disable();
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(told_to_back_off(real.clone()).await.unwrap(), 1);
}

#[velocity_policy::critical(chaos = "drill_window", deadline = "1s")]
async fn windowed(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn a_drill_keeps_to_its_window_on_tokios_clock() {
    chaos::arm();
    Registry::global().chaos_error_for("drill_window", || AppError::Injected);
    let real = Real::default();
    // The window is 1m to 2m after the drill was first declared (by the first call).
    assert_eq!(windowed(real.clone()).await.unwrap(), 1);
    tokio::time::advance(Duration::from_secs(61)).await;
    assert!(matches!(
        windowed(real.clone()).await,
        Err(AppError::Injected)
    ));
    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(windowed(real.clone()).await.unwrap(), 2);
    assert_eq!(injected("drill_window", FaultKind::Error), 1);
}

#[velocity_policy::critical(chaos = "declared_off", deadline = "1s")]
async fn switched(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn a_drill_is_switched_at_run_time_through_the_registry() {
    chaos::arm();
    Registry::global().chaos_error_for("declared_off", || AppError::Injected);
    let real = Real::default();
    // `enabled = false`: declared, off.
    assert_eq!(switched(real.clone()).await.unwrap(), 1);
    let drill = Registry::global().chaos("declared_off");
    assert!(!drill.is_on());
    drill.enable();
    assert!(matches!(
        switched(real.clone()).await,
        Err(AppError::Injected)
    ));
    // A rate of 0 keeps it on and injects nothing; 25% hits the first of every four calls.
    drill.set_rate(FaultKind::Error, 0.0);
    assert_eq!(switched(real.clone()).await.unwrap(), 2);
    drill.set_rate(FaultKind::Error, 0.25);
    let mut hit = 0;
    for _ in 0..8 {
        if switched(real.clone()).await.is_err() {
            hit += 1;
        }
    }
    assert_eq!(hit, 2, "exactly a quarter, spread");
    drill.disable();
    assert!(switched(real.clone()).await.is_ok());
    let snapshot = Registry::global()
        .chaos_snapshots()
        .into_iter()
        .find(|c| &*c.name == "declared_off")
        .unwrap();
    assert!(!snapshot.on);
    assert_eq!(snapshot.faults[0].rate, 0.25);
    assert_eq!(snapshot.faults[0].injected, 1 + 2);
}

#[velocity_policy::critical(chaos = "on_no_instance", deadline = "1s")]
async fn elsewhere(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn a_share_of_instances_is_decided_by_the_instance_id() {
    chaos::arm();
    let real = Real::default();
    assert_eq!(elsewhere(real.clone()).await.unwrap(), 1, "0% of instances");
    // The choice is a stable function of the drill's name and the instance id: 30% of a fleet
    // of 1000 ids is hit, and the same ones every time.
    let fleet: Vec<String> = (0..1000).map(|i| format!("instance-{i}")).collect();
    let hit = |share| {
        fleet
            .iter()
            .filter(|id| chaos::hits_instance("search_drill", id, share))
            .count()
    };
    let thirty = hit(0.3);
    assert!((250..=350).contains(&thirty), "{thirty} of 1000");
    assert_eq!(hit(0.3), thirty);
    assert_eq!(hit(0.0), 0);
    assert_eq!(hit(1.0), 1000);
}

/// Bound to the file's `operation filed_drill { chaos = always_fails }` by its name.
#[velocity_policy::critical]
async fn filed_drill(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn a_policy_operation_names_its_drill() {
    chaos::arm();
    Registry::global().chaos_error_for("always_fails", || AppError::Injected);
    let real = Real::default();
    assert!(matches!(
        filed_drill(real.clone()).await,
        Err(AppError::Injected)
    ));
    assert_eq!(real.calls(), 0);
}

#[cfg(feature = "metrics")]
#[test]
fn every_injected_fault_is_an_event_and_a_metric_marked_injected() {
    chaos::arm();
    use metrics_util::debugging::DebuggingRecorder;
    use velocity_policy_testkit::captured::Captured;
    use velocity_policy_testkit::recorder::{Recorded, with_recorder};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    // The process's subscriber, not this thread's: the other tests here run in parallel, and
    // a callsite one of them hit first while no subscriber was set could stay cached as
    // "never" for this thread's (seen: no line at all, 3 runs in 8). This is the only test of
    // the binary that installs one, and it reads only its own drill's lines.
    tracing::subscriber::set_global_default(subscriber).unwrap();
    with_recorder(&recorder, async {
        let real = Real::default();
        for _ in 0..2 {
            assert!(matches!(
                metered(real.clone()).await,
                Err(AppError::TimedOut)
            ));
        }
    });
    let lines = logs.lines_with(&[
        "kind=\"injected\"",
        "injected=true",
        "fault=\"latency\"",
        "name=\"metered_drill\"",
        "mechanism=\"chaos\"",
    ]);
    assert_eq!(lines.len(), 2, "{}", logs.text());
    // The opening the drill's error decided is logged as injected, with the drill.
    Registry::global().chaos_error_for("logged_open_drill", || AppError::Injected);
    with_recorder(&recorder, async {
        assert!(matches!(
            logged_open(Real::default()).await,
            Err(AppError::Injected)
        ));
    });
    let opened = logs.lines_with(&[
        "kind=\"breaker_opened\"",
        "injected=true",
        "drill=\"logged_open_drill\"",
        "reason=\"failures\"",
    ]);
    assert_eq!(opened.len(), 1, "{}", logs.text());
    let seen = Recorded::take(&snapshotter);
    assert_eq!(
        seen.counter(
            "policy_injected_faults_total",
            &[("name", "metered_drill"), ("fault", "latency")]
        ),
        2
    );
}

#[cfg(feature = "metrics")]
#[velocity_policy::resilient(
    breaker(failures = 1, within = "30s", cooldown = "10s"),
    chaos = "logged_open_drill",
    deadline = "1s"
)]
async fn logged_open(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[cfg(feature = "metrics")]
#[velocity_policy::critical(chaos = "metered_drill", deadline = "100ms")]
async fn metered(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[cfg(feature = "tower")]
mod layers {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use tokio::time::Instant;
    use tower::{Layer, Service, ServiceExt};
    use velocity_policy::chaos::{Fault, FaultKind, InjectedError};
    use velocity_policy::layer::BoxError;
    use velocity_policy::{RefusalKind, Registry, ResilienceError};

    /// The `.policy` operation's layer: its drill is the registry's (switched on here), drawn
    /// after the breaker's check, and the breaker counts what it injects.
    #[tokio::test(start_paused = true)]
    async fn an_operation_layer_applies_its_drill_inside_the_breaker() {
        velocity_policy::chaos::arm();
        let calls = Arc::new(AtomicU32::new(0));
        let service = {
            let calls = calls.clone();
            tower::service_fn(move |()| {
                let calls = calls.clone();
                async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Ok::<u32, BoxError>(7)
                }
            })
        };
        let mut layered = velocity_policy::operation_layer!("layered_lookup").layer(service);
        // Declared off: the real call.
        assert_eq!(layered.ready().await.unwrap().call(()).await.unwrap(), 7);
        Registry::global().chaos("layered_drill").enable();
        for _ in 0..2 {
            let error = layered.ready().await.unwrap().call(()).await.unwrap_err();
            assert!(error.is::<InjectedError>(), "{error}");
            assert!(error.to_string().contains("layered_drill"), "{error}");
        }
        let error = layered.ready().await.unwrap().call(()).await.unwrap_err();
        assert_eq!(
            error
                .downcast_ref::<ResilienceError>()
                .map(ResilienceError::kind),
            Some(RefusalKind::BreakerOpen),
            "two injected errors opened the breaker: {error}"
        );
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "only the first call was real"
        );
        let drill = Registry::global().find_chaos("layered_drill").unwrap();
        assert_eq!(drill.snapshot().faults[0].injected, 2);
        let cause = Registry::global()
            .find_breaker("layered_search")
            .unwrap()
            .snapshot()
            .last_cause
            .unwrap();
        assert_eq!(cause.injected_by(), Some("layered_drill"), "{cause}");
        drill.disable();
    }

    /// A standalone `ChaosLayer` below a deadline: injected latency is bounded by it.
    #[tokio::test(start_paused = true)]
    async fn a_chaos_layer_waits_inside_the_deadline() {
        velocity_policy::chaos::arm();
        let drill = velocity_policy::chaos::Chaos::builder("layer_latency")
            .fault(
                Fault::Latency(velocity_policy::chaos::Latency::Fixed {
                    delay: Duration::from_secs(3),
                }),
                1.0,
            )
            .build();
        let mut service = tower::ServiceBuilder::new()
            .layer(velocity_policy::layer::ChaosLayer::new(drill.clone()))
            .service_fn(|()| async { Ok::<u32, BoxError>(7) });
        let at = Instant::now();
        let ran = velocity_policy::Deadline::after(Duration::from_millis(200))
            .run(service.ready().await.unwrap().call(()))
            .await;
        assert!(ran.is_err(), "the deadline passed first");
        assert_eq!(at.elapsed(), Duration::from_millis(200));
        drill.set_rate(FaultKind::Latency, 0.0);
        assert_eq!(service.ready().await.unwrap().call(()).await.unwrap(), 7);
    }
}

#[velocity_policy::resilient(
    breaker(failures = 5, within = "30s", cooldown = "20s"),
    bulkhead(max_concurrent = 8),
    chaos = "idle_drill",
    deadline = "2s"
)]
async fn idle(id: u64) -> Result<u64, AppError> {
    Ok(id + 1)
}

#[test]
fn a_drill_that_is_off_allocates_nothing_per_call() {
    chaos::arm();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        for i in 0..100 {
            idle(i).await.unwrap();
        }
    });
    let calls = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                assert_eq!(idle(i).await.unwrap(), i + 1);
            }
        });
    });
    assert_eq!(calls.count_total, 0, "{calls:?}");
}

#[velocity_policy::critical(chaos = "early_switch", deadline = "1s")]
async fn early(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

#[tokio::test(start_paused = true)]
async fn a_switch_made_before_the_first_call_is_kept_and_the_declared_faults_fill_in() {
    chaos::arm();
    Registry::global().chaos_error_for("early_switch", || AppError::Injected);
    // On, before any function declared it: empty until the declaration fills in its fault.
    Registry::global().chaos("early_switch").enable();
    let real = Real::default();
    assert!(matches!(early(real.clone()).await, Err(AppError::Injected)));
    assert_eq!(
        real.calls(),
        0,
        "declared `enabled = false`, switched on first: on"
    );
}

#[cfg(feature = "overrides")]
#[velocity_policy::critical(chaos = "staging_drill", deadline = "1s")]
async fn staged(real: Real) -> Result<u32, AppError> {
    Ok(real.call(10).await)
}

/// An environment turns a drill on and sets its rate through the overrides (issue 23), checked
/// by the same validator, and turns it off again by a reload.
#[cfg(feature = "overrides")]
#[tokio::test(start_paused = true)]
async fn an_environments_overrides_switch_a_drill_and_its_rates() {
    chaos::arm();
    use velocity_policy::overrides::Overrides;
    Registry::global().chaos_error_for("staging_drill", || AppError::Injected);
    let staging = std::env::temp_dir().join(format!("policy-chaos-staging-{}", std::process::id()));
    std::fs::create_dir_all(&staging).unwrap();
    let file = staging.join("drills.policy");
    std::fs::write(
        &file,
        "chaos staging_drill { enabled = true; error at 100% }\n",
    )
    .unwrap();
    let compiled = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/policies");
    let overrides = Overrides::builder(&compiled)
        .environment("staging")
        .dir(&staging)
        .strict(true)
        .load()
        .unwrap();
    let real = Real::default();
    assert!(matches!(
        staged(real.clone()).await,
        Err(AppError::Injected)
    ));
    assert_eq!(real.calls(), 0);

    // Off again, by the environment's file: the real call.
    std::fs::write(&file, "chaos staging_drill { enabled = false }\n").unwrap();
    overrides.reload().unwrap();
    assert_eq!(staged(real.clone()).await.unwrap(), 1);

    // An unsafe rate is refused by the validator, the drill as it was.
    std::fs::write(
        &file,
        "chaos staging_drill { enabled = true; error at 150% }\n",
    )
    .unwrap();
    let refused = overrides.reload().unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("policy::chaos-rate-out-of-range")
            || format!("{refused:?}").contains("chaos-rate-out-of-range"),
        "{refused}"
    );
    assert_eq!(staged(real.clone()).await.unwrap(), 2);
    std::fs::remove_dir_all(&staging).unwrap();
}
