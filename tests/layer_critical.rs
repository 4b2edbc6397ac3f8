//! Real `#[critical]` functions behind the `DeadlineLayer` on a real axum server: sibling calls
//! in a handler that is not itself annotated take children of the one request deadline, so
//! when the first uses most of it, the second is refused before it runs (or, with a smaller
//! minimum, clamped to what is left), never given its own fresh budget. Feature `http`.
#![cfg(feature = "http")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use velocity_policy::layer::DeadlineLayer;
use velocity_policy::{Deadline, DeadlineExceeded, RefusalKind, ResilienceError};
use velocity_policy_testkit::http::{Server, client, get as fetch};

#[derive(Debug)]
enum StepError {
    Refused(ResilienceError),
    TimedOut(#[expect(dead_code, reason = "the test matches on the variant")] DeadlineExceeded),
}

impl From<ResilienceError> for StepError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for StepError {
    fn from(e: DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

/// Left of the request's deadline when the first step returns.
const LEFT_AFTER_FIRST: Duration = Duration::from_millis(40);

static SECOND_RAN: AtomicU32 = AtomicU32::new(0);

/// Uses most of what it is given: works until only [`LEFT_AFTER_FIRST`] is left. Its own cap is
/// 10 s; the budget it reports is the one it really had.
#[velocity_policy::critical(deadline = "10s", min_budget = "10ms")]
async fn layered_first_step() -> Result<u128, StepError> {
    let deadline = Deadline::current().expect("a critical function runs in a deadline scope");
    tokio::time::sleep(deadline.remaining().saturating_sub(LEFT_AFTER_FIRST)).await;
    Ok(deadline.budget().as_millis())
}

/// Not worth starting with under 100 ms.
#[velocity_policy::critical(deadline = "10s", min_budget = "100ms")]
async fn layered_second_step() -> Result<u128, StepError> {
    SECOND_RAN.fetch_add(1, Ordering::SeqCst);
    Ok(Deadline::current().unwrap().budget().as_millis())
}

/// Content with 5 ms.
#[velocity_policy::critical(deadline = "10s", min_budget = "5ms")]
async fn layered_small_step() -> Result<u128, StepError> {
    Ok(Deadline::current().unwrap().budget().as_millis())
}

fn said(result: Result<u128, StepError>) -> String {
    match result {
        Ok(budget) => format!("ran:{budget}"),
        Err(StepError::Refused(refusal)) => format!("refused:{}", refusal.kind()),
        Err(StepError::TimedOut(_)) => "timed_out".to_owned(),
    }
}

/// The handler: not annotated, three sibling calls.
async fn siblings() -> String {
    let first = said(layered_first_step().await);
    let second = said(layered_second_step().await);
    let small = said(layered_small_step().await);
    format!("{first} {second} {small}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibling_critical_functions_share_the_request_deadline() {
    let app = Router::new()
        .route("/", get(siblings))
        .layer(DeadlineLayer::new(Duration::from_millis(300)));
    let server = Server::start(app).await;
    let (status, body) = fetch(&client(), &server.url("/")).await;
    assert_eq!(status, 200, "{body}");
    let fields: Vec<&str> = body.split(' ').collect();
    let budget = |field: &str| -> u128 {
        field
            .strip_prefix("ran:")
            .unwrap_or_else(|| panic!("ran: {body}"))
            .parse()
            .unwrap()
    };
    // The first got a child of the request's 300 ms, not its own 10 s.
    assert!(budget(fields[0]) <= 300, "{body}");
    // The second is refused before its body runs: about 40 ms left, 100 ms needed.
    assert_eq!(
        fields[1],
        format!("refused:{}", RefusalKind::InsufficientBudget.as_str()),
        "{body}"
    );
    assert_eq!(SECOND_RAN.load(Ordering::SeqCst), 0);
    // A sibling with a smaller minimum runs, clamped to what was left.
    assert!(budget(fields[2]) <= LEFT_AFTER_FIRST.as_millis(), "{body}");
    server.stop().await;
}
