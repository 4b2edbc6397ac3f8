//! A registry per test: two tests of this binary call the same `#[resilient(breaker =
//! "shared_search")]` function at the same moment; the one that opens the breaker does not open the
//! other's. And the default build of `policy` has none of it.
#![allow(
    clippy::panic,
    reason = "test helpers: an unexpected outcome fails the test"
)]

use std::sync::{Barrier, Condvar, Mutex};
use std::time::Duration;

use velocity_policy::breaker::BreakerState;
use velocity_policy::{DeadlineExceeded, RefusalKind, Registry, ResilienceError};
use velocity_policy_testkit::isolation::{self, isolate};

#[derive(Debug)]
enum AppError {
    Refused(ResilienceError),
    TimedOut,
    Search,
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

/// `breaker search`: 3 failures within 30 s (velocity-policy-testkit/policies/kit.policy).
#[velocity_policy::resilient(breaker = "shared_search")]
async fn query_search(fail: bool) -> Result<u32, AppError> {
    if fail { Err(AppError::Search) } else { Ok(7) }
}

fn refused(result: Result<u32, AppError>) -> bool {
    matches!(result, Err(AppError::Refused(r)) if r.kind() == RefusalKind::BreakerOpen)
}

async fn open_the_breaker() {
    for _ in 0..3 {
        assert!(matches!(query_search(true).await, Err(AppError::Search)));
    }
    assert!(
        refused(query_search(false).await),
        "the test's own breaker opened"
    );
}

/// Where the two parallel tests meet: each step is reached once; a test waits (boundedly) for
/// the other's step, so under `--test-threads=1` they still pass, one after the other, and
/// still prove that the first's opening did not reach the second.
static STEPS: (Mutex<u32>, Condvar) = (Mutex::new(0), Condvar::new());

fn reach(step: u32) {
    let (lock, changed) = &STEPS;
    let mut at = lock.lock().unwrap_or_else(|p| p.into_inner());
    *at = (*at).max(step);
    changed.notify_all();
}

fn wait_for(step: u32) {
    let (lock, changed) = &STEPS;
    let at = lock.lock().unwrap_or_else(|p| p.into_inner());
    let _ = changed
        .wait_timeout_while(at, Duration::from_secs(5), |at| *at < step)
        .unwrap_or_else(|p| p.into_inner());
}

#[tokio::test(start_paused = true)]
async fn parallel_test_one_opens_the_breaker() {
    let test = isolate();
    open_the_breaker().await;
    reach(1); // opened
    wait_for(2); // the other test looked at its own breaker meanwhile
    assert_eq!(
        test.registry()
            .find_breaker("shared_search")
            .map(|b| b.state()),
        Some(BreakerState::Open)
    );
}

#[tokio::test(start_paused = true)]
async fn parallel_test_two_still_sees_it_closed() {
    let test = isolate();
    wait_for(1); // the other test's breaker `search` is open now
    assert_eq!(query_search(false).await.ok(), Some(7));
    let search = test
        .registry()
        .find_breaker("shared_search")
        .expect("built here");
    assert_eq!(search.state(), BreakerState::Closed);
    assert_eq!(search.snapshot().openings, 0);
    reach(2);
}

#[test]
fn two_threads_at_once_each_with_its_own_breaker() {
    // The same proof without the harness's scheduling: two threads, one moment.
    let barrier = Barrier::new(2);
    let run = |fail: bool| {
        let barrier = &barrier;
        move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                let test = isolate();
                barrier.wait();
                if fail {
                    open_the_breaker().await;
                }
                barrier.wait();
                let state = test
                    .registry()
                    .find_breaker("shared_search")
                    .map(|b| b.state())
                    .unwrap_or(BreakerState::Closed);
                barrier.wait();
                let answered = query_search(false).await.ok();
                (state, answered)
            })
        }
    };
    let (opened, closed) = std::thread::scope(|s| {
        let a = s.spawn(run(true));
        let b = s.spawn(run(false));
        (a.join().expect("thread a"), b.join().expect("thread b"))
    });
    assert_eq!(opened, (BreakerState::Open, None));
    assert_eq!(closed, (BreakerState::Closed, Some(7)));
}

#[tokio::test(start_paused = true)]
async fn tasks_spawned_by_an_isolated_test_share_its_registry() {
    let test = isolate();
    // A current-thread runtime: the task runs on the test's thread, inside its scope.
    tokio::spawn(open_the_breaker()).await.expect("the task");
    assert_eq!(
        test.registry()
            .find_breaker("shared_search")
            .map(|b| b.state()),
        Some(BreakerState::Open)
    );
    assert!(refused(query_search(false).await));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_multi_thread_runtime_spawn_carries_the_scope_and_a_bare_spawn_does_not() {
    let test = isolate();
    let scoped = isolation::spawn(async { std::ptr::from_ref(Registry::global()) as usize });
    let bare = tokio::spawn(async { std::ptr::from_ref(Registry::global()) as usize });
    let ours = std::ptr::from_ref(test.registry()) as usize;
    assert_eq!(scoped.await.expect("scoped"), ours);
    assert_ne!(
        bare.await.expect("bare"),
        ours,
        "a bare tokio::spawn runs on a worker thread, outside the test's scope (documented)"
    );
}

#[tokio::test(start_paused = true)]
async fn an_isolated_future_keeps_its_registry_to_itself() {
    let opened = isolation::isolated(async {
        open_the_breaker().await;
        Registry::global()
            .find_breaker("shared_search")
            .map(|b| b.state())
    })
    .await;
    assert_eq!(opened, Some(BreakerState::Open));
    let _test = isolate();
    assert_eq!(query_search(false).await.ok(), Some(7));
}

#[tokio::test(start_paused = true)]
async fn reset_closes_the_breakers_and_forgets_their_counts() {
    let test = isolate();
    open_the_breaker().await;
    isolation::reset();
    let search = test
        .registry()
        .find_breaker("shared_search")
        .expect("built");
    assert_eq!(search.state(), BreakerState::Closed);
    let snapshot = search.snapshot();
    assert_eq!(
        (snapshot.openings, snapshot.failures, snapshot.refusals),
        (0, 0, 0)
    );
    assert_eq!(snapshot.last_cause, None);
    // Counting starts afresh: two failures do not reopen it, the third does.
    for _ in 0..2 {
        assert!(matches!(query_search(true).await, Err(AppError::Search)));
    }
    assert_eq!(query_search(false).await.ok(), Some(7));
    assert!(matches!(query_search(true).await, Err(AppError::Search)));
    assert!(refused(query_search(false).await));
}

/// `cargo tree` of the facade's build with `features`, without dev-dependencies: what a
/// service's build resolves, inverted to what turns `velocity-policy-runtime`'s features on.
fn runtime_features_in_the_build_of_policy(features: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-p", "velocity-policy"])
        .args(features)
        .args([
            "-e",
            "normal,build,features",
            "-i",
            "velocity-policy-runtime",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("cargo tree: {e}"));
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_default_build_of_policy_has_no_test_registry() {
    // The feature reaches `velocity-policy-runtime` only through `velocity-policy-testkit`, a dev-dependency.
    let tree = runtime_features_in_the_build_of_policy(&[]);
    assert!(tree.contains("velocity-policy-runtime v"), "{tree}");
    assert!(
        !tree.contains("test-registry"),
        "the default build of `policy` turns on velocity-policy-runtime's `test-registry`:\n{tree}"
    );
    // And with every feature of the facade: none of them is a way in.
    let tree = runtime_features_in_the_build_of_policy(&["--all-features"]);
    assert!(!tree.contains("test-registry"), "{tree}");
}
