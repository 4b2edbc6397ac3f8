//! One span per annotated call, named after the operation with its work class, and the
//! mechanisms' events inside it carrying the same `operation`.
#![allow(
    clippy::unwrap_used,
    reason = "a test: a poisoned lock is a failed test"
)]

use velocity_policy::{DeadlineExceeded, ResilienceError};

#[derive(Debug)]
enum AppError {
    Refused(#[expect(dead_code, reason = "the test reads the logs")] ResilienceError),
    TimedOut(#[expect(dead_code, reason = "the test reads the logs")] DeadlineExceeded),
    Search,
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

#[velocity_policy::resilient(breaker = "search")]
async fn find_documents(fail: bool) -> Result<u32, AppError> {
    if fail { Err(AppError::Search) } else { Ok(1) }
}

#[test]
fn an_annotated_call_is_one_span_named_after_its_operation() {
    let logs = velocity_policy_testkit::captured::Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .without_time()
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..3 {
                assert!(matches!(find_documents(true).await, Err(AppError::Search)));
            }
            assert!(matches!(
                find_documents(false).await,
                Err(AppError::Refused(_))
            ));
        });
    });
    let text = logs.text();
    // fmt prints the span's name and fields before the event: `find_documents{operation=..}:`.
    let span = "find_documents{operation=\"find_documents\" class=\"critical\"}:";
    let opened: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("kind=\"breaker_opened\""))
        .collect();
    assert_eq!(opened.len(), 1, "{text}");
    assert!(opened[0].contains(span), "{text}");
    assert!(
        opened[0].contains("operation=\"find_documents\" mechanism=\"breaker\" name=\"search\""),
        "{text}"
    );
    let refused: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("kind=\"breaker_open\""))
        .collect();
    assert_eq!(refused.len(), 1, "{text}");
    assert!(refused[0].contains(span), "{text}");
    assert!(refused[0].contains("reason=\"failures\""), "{text}");
}
