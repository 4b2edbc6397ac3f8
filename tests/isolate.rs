//! Compute isolation, proved by the poll monitor's counts and by ordering, not by wall-clock
//! thresholds: CPU work inline stalls its worker; the same work under `#[isolate]` does not.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test, and the isolated work panics on purpose"
)]

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use velocity_policy::isolate::IsolateError;
use velocity_policy::{
    CallError, Deadline, DeadlineExceeded, RefusalKind, Registry, ResilienceError,
};

#[derive(Debug)]
enum AppError {
    Refused(#[expect(dead_code, reason = "carried for the caller")] ResilienceError),
    TimedOut,
    Isolated(#[expect(dead_code, reason = "carried for the caller")] IsolateError),
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

impl From<IsolateError> for AppError {
    fn from(e: IsolateError) -> Self {
        Self::Isolated(e)
    }
}

/// 50 ms of real CPU work.
fn spin(ms: u64) -> u64 {
    let started = Instant::now();
    let mut x = 0u64;
    while started.elapsed() < Duration::from_millis(ms) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    x
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

fn next() -> u64 {
    SEQUENCE.fetch_add(1, Ordering::SeqCst)
}

#[velocity_policy::critical(deadline = "5s", poll_budget = "20ms")]
async fn handler_inline(done: Arc<AtomicU64>) -> Result<u64, AppError> {
    let out = spin(50);
    done.store(next(), Ordering::SeqCst);
    Ok(out)
}

#[velocity_policy::isolate(max_concurrent = 2)]
fn crunch(ms: u64) -> u64 {
    spin(ms)
}

#[velocity_policy::critical(deadline = "5s", poll_budget = "20ms")]
async fn handler_isolated(done: Arc<AtomicU64>) -> Result<u64, AppError> {
    let out = crunch(50).await?;
    done.store(next(), Ordering::SeqCst);
    Ok(out)
}

fn monitor(suffix: &str) -> velocity_policy::isolate::PollMonitorSnapshot {
    Registry::global()
        .snapshot()
        .polls
        .into_iter()
        .find(|p| p.name.ends_with(suffix))
        .unwrap()
}

fn single_worker() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn cpu_work_inline_stalls_a_concurrent_cheap_request_and_isolated_it_does_not() {
    let rt = single_worker();
    rt.block_on(async {
        // Inline: the heavy handler's one poll computes for 50 ms; the cheap request, spawned
        // right after it on the same (only) worker, can run only once that poll is over.
        let done = Arc::new(AtomicU64::new(0));
        let heavy = tokio::spawn(handler_inline(done.clone()));
        let cheap = tokio::spawn(async { next() });
        heavy.await.unwrap().unwrap();
        let cheap_ran = cheap.await.unwrap();
        assert!(
            cheap_ran > done.load(Ordering::SeqCst),
            "inline: the cheap request ran only after the heavy work"
        );
        let inline = monitor("::handler_inline");
        assert_eq!(inline.over_budget, 1, "{inline:?}");
        assert!(inline.longest >= Duration::from_millis(50));

        // Isolated: the heavy handler hands the work to the pool and yields; the cheap request
        // runs while the work is still computing.
        let done = Arc::new(AtomicU64::new(0));
        let heavy = tokio::spawn(handler_isolated(done.clone()));
        let cheap = tokio::spawn(async { next() });
        let cheap_ran = cheap.await.unwrap();
        heavy.await.unwrap().unwrap();
        assert!(
            cheap_ran < done.load(Ordering::SeqCst),
            "isolated: the cheap request ran while the heavy work computed"
        );
        let isolated = monitor("::handler_isolated");
        assert_eq!(isolated.over_budget, 0, "{isolated:?}");
        assert!(
            isolated.polls >= 2,
            "it yielded while the pool computed: {isolated:?}"
        );
    });
}

/// Captures every event of this test binary (the pool's threads log too).
fn global_logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || SharedWriter(sink.clone()))
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        logs
    })
}

struct SharedWriter(Arc<Mutex<Vec<u8>>>);

impl Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged(needle: &str) -> bool {
    String::from_utf8_lossy(&global_logs().lock().unwrap()).contains(needle)
}

#[velocity_policy::isolate(max_concurrent = 1, max_queued = 0)]
fn hold(release: std::sync::mpsc::Receiver<()>) -> u8 {
    let _ = release.recv();
    1
}

#[test]
fn a_full_isolated_pool_refuses() {
    let rt = single_worker();
    rt.block_on(async {
        let (tx, rx) = std::sync::mpsc::channel();
        let first = tokio::spawn(hold(rx));
        tokio::task::yield_now().await;
        let (_tx2, rx2) = std::sync::mpsc::channel();
        match hold(rx2).await {
            Err(CallError::Refused(refusal)) => {
                assert_eq!(refusal.kind(), RefusalKind::BulkheadFull)
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        tx.send(()).unwrap();
        assert_eq!(first.await.unwrap().unwrap(), 1);
    });
}

#[velocity_policy::isolate(max_concurrent = 4, max_queued = 4)]
fn slow_then(ms: u64, panic_at_end: bool) -> u64 {
    std::thread::sleep(Duration::from_millis(ms));
    if panic_at_end {
        panic!("the isolated work broke after its caller left");
    }
    ms
}

#[test]
fn a_deadline_bounds_the_wait_and_the_later_outcome_is_logged_not_lost() {
    let _ = global_logs();
    let rt = single_worker();
    rt.block_on(async {
        for panic_at_end in [false, true] {
            let waited = Deadline::after(Duration::from_millis(30))
                .scope(slow_then(200, panic_at_end))
                .await;
            assert!(
                matches!(waited, Err(CallError::DeadlineExceeded(_))),
                "{waited:?}"
            );
        }
        // The work ran on behind the expiry; both outcomes are counted and logged.
        let started = Instant::now();
        loop {
            let pool = Registry::global()
                .snapshot()
                .isolated
                .into_iter()
                .find(|p| p.name.ends_with("::slow_then"))
                .unwrap();
            if pool.unwaited == 2 {
                assert_eq!((pool.finished, pool.panicked), (1, 1));
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "{pool:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(logged("kind=\"isolated_unwaited\""));
        assert!(logged("the isolated work broke after its caller left"));
    });
}

#[velocity_policy::isolate]
fn breaks() -> u64 {
    panic!("the isolated work broke while its caller waited");
}

#[test]
fn a_panic_reaches_a_waiting_caller_as_an_error() {
    let rt = single_worker();
    rt.block_on(async {
        match breaks().await {
            Err(CallError::Failed(panicked)) => {
                assert!(panicked.message().contains("broke"));
            }
            other => panic!("expected the panic as an error, got {other:?}"),
        }
    });
    let _ = AppError::TimedOut;
}
