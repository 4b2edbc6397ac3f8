//! The drain report's totals since start: after thousands of tasks that all finished long
//! before the shutdown, the report still accounts for every one of them, by how it ended.
//!
//! The totals are the process's, so this binary holds one test: nothing else counts into them.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::time::Duration;

use velocity_policy_runtime::defer::{
    self, AfterResponse, ContainerPlatform, RequestId, Scheduled, TaskTotals,
};
use velocity_policy_runtime::shedding::ShedReason;
use velocity_policy_runtime::{
    BackgroundPool, CallError, RefusalReason, ResilienceError, WorkClass,
};

const MS: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct ProviderDown;

impl std::fmt::Display for ProviderDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the provider is down")
    }
}

fn refusal() -> ResilienceError {
    ResilienceError::new(
        "search",
        RefusalReason::Shed(ShedReason::Budget {
            remaining: MS,
            expected_cost: 10 * MS,
        }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_report_accounts_for_every_task_since_start() {
    // 100 caught panics below: keep their messages out of the test's output (and the
    // test's own failures in it).
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.to_string().contains("index out of bounds") {
            default_hook(info);
        }
    }));
    let platform = ContainerPlatform::new();

    // 10,000 requests, each deferring one task, all ended long before the shutdown: 7,400
    // succeed, 2,000 fail, 100 panic, 500 are refused by a mechanism inside the work.
    for i in 0..10_000u32 {
        let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
        match i % 100 {
            0..=19 => after.defer("index", async { Err::<(), _>(ProviderDown) }),
            20 => after.defer("notify", async {
                let followers: Vec<u32> = Vec::new();
                let _ = followers[0];
            }),
            21..=25 => after.defer("embed", async {
                Scheduled::<ProviderDown>(Err(CallError::Refused(refusal())))
            }),
            _ => after.defer("count_view", async {}),
        }
        after.release();
        // In rounds of 1,000, each waited out: the process's bound of deferred work (512
        // running, 4,096 waiting) would refuse the rest of a burst of 10,000 that the two
        // workers had not caught up with, as it did on a loaded machine.
        if i % 1_000 == 999 {
            while platform.in_flight() > 0 {
                tokio::time::sleep(MS).await;
            }
        }
    }
    let quiet = defer::totals(WorkClass::Deferred);
    assert_eq!(quiet.scheduled, 10_000);
    assert_eq!(quiet.finished, 10_000);
    assert_eq!(
        (quiet.failed, quiet.panicked, quiet.refused),
        (2_000, 100, 500)
    );
    assert_eq!(quiet.succeeded(), 7_400);
    assert_eq!((quiet.abandoned, quiet.in_flight, quiet.shed), (0, 0, 0));
    assert!(quiet.accounted_for());

    // Background work: a pool of one slot and no queue sheds what it has no room for.
    let pool = BackgroundPool::builder("embedding")
        .max_concurrent(1)
        .max_queued(0)
        .platform(platform.clone())
        .build();
    // Its one task is refused by a mechanism inside it: counted as refused, not failed.
    pool.submit("embed", async {
        tokio::time::sleep(20 * MS).await;
        Scheduled::<ProviderDown>(Err(CallError::Refused(refusal())))
    })
    .unwrap();
    assert!(pool.submit("embed", async {}).is_err(), "shed: no room");
    assert!(pool.submit("embed", async {}).is_err(), "shed: no room");

    // At the shutdown: one task that finishes during the drain, one that outlives it, and one
    // still waiting for a response that never finishes (its request's queue is held).
    let after = AfterResponse::with_platform(RequestId::next(), platform.clone());
    after.defer("quick", tokio::time::sleep(10 * MS));
    after.defer("stuck", tokio::time::sleep(Duration::from_secs(60)));
    after.release();
    let streaming = AfterResponse::with_platform(RequestId::next(), platform.clone());
    streaming.defer("after_the_stream", async {});

    let report = platform.shutdown(500 * MS).await;
    // The drain's own counts keep their meaning: what was in flight when it began.
    assert_eq!(
        (report.finished, report.abandoned),
        (2, 1),
        "quick and the embedding; stuck"
    );
    // The totals: every task since start.
    assert_eq!(
        (
            report.deferred.scheduled,
            report.deferred.finished,
            report.deferred.abandoned,
            report.deferred.in_flight
        ),
        (10_003, 10_001, 1, 1),
        "{}",
        report.deferred
    );
    assert_eq!(
        (
            report.deferred.failed,
            report.deferred.panicked,
            report.deferred.refused
        ),
        (2_000, 100, 500)
    );
    assert_eq!(
        (
            report.background.scheduled,
            report.background.finished,
            report.background.shed,
            report.background.in_flight
        ),
        (3, 1, 2, 0),
        "{}",
        report.background
    );
    assert_eq!(
        (report.background.refused, report.background.failed),
        (1, 0)
    );
    assert!(report.accounted_for(), "{report:?}");
    assert_eq!(
        report.deferred.to_string(),
        "10003 scheduled: 10001 finished (2000 failed, 100 panicked, 500 refused), 0 shed, 1 abandoned, 1 in flight"
    );

    // The held queue is released after the drain: its task is abandoned, and accounted for.
    drop(streaming);
    let after_all = defer::totals(WorkClass::Deferred);
    assert_eq!((after_all.abandoned, after_all.in_flight), (2, 0));
    assert!(after_all.accounted_for());
    assert_eq!(defer::totals(WorkClass::Critical), TaskTotals::default());
}
