//! With the `metrics` feature, refusals, sheds, openings and retries are counters; and the
//! mechanisms' metrics as documented in `observe`: a bulkhead's occupancy and refusals, shed
//! decisions, and deferred and background tasks, recorded by `metrics-util`'s
//! `DebuggingRecorder` on this thread, each value checked against what the script did and
//! against the mechanism's own snapshot.
#![cfg(feature = "metrics")]
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::float_cmp,
    reason = "a test: a failed unwrap is a failed test, and the values compared are exact"
)]

use std::time::Duration;

use metrics_util::MetricKind;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use velocity_policy_runtime::defer::{AfterResponse, ImmediatePlatform, RequestId};
use velocity_policy_runtime::{BackgroundPool, Bulkhead, RefusalKind, WorkClass};
use velocity_policy_runtime::{Breaker, Deadline, Shedder};
use velocity_policy_testkit::recorder::{Recorded, with_recorder};

/// A counter's name, labels and value.
type Counter = (String, Vec<(String, String)>, u64);

#[test]
fn refusals_openings_and_sheds_are_counted_with_their_labels() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let b = Breaker::builder("metered")
                .open_after_failures(2, Duration::from_secs(10))
                .build();
            b.record_failure();
            b.record_failure();
            assert!(b.check().is_err());
            assert!(b.check().is_err());
            let shedder = Shedder::new("metered");
            let d = Deadline::after(Duration::from_secs(1));
            assert!(
                shedder
                    .admit(WorkClass::Background, 0.9, &d, Duration::ZERO)
                    .is_err()
            );
        });
    });
    let counters: Vec<Counter> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(n) => Some((
                key.key().name().to_owned(),
                key.key()
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect(),
                n,
            )),
            _ => None,
        })
        .collect();
    let find = |name: &str, label: (&str, &str)| {
        counters
            .iter()
            .find(|(n, labels, _)| {
                n == name && labels.iter().any(|(k, v)| k == label.0 && v == label.1)
            })
            .map(|(_, _, v)| *v)
    };
    assert_eq!(
        find("policy_breaker_openings_total", ("name", "metered")),
        Some(1)
    );
    assert_eq!(
        find("policy_refusals_total", ("kind", "breaker_open")),
        Some(2)
    );
    assert_eq!(find("policy_shed_total", ("class", "background")), Some(1));
}

#[test]
fn a_bulkhead_counts_its_slots_its_queue_and_its_refusals_by_reason() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let name = [("name", "metered-db")];
    with_recorder(&recorder, async {
        let bulkhead = Bulkhead::builder("metered-db")
            .max_concurrent(2)
            .max_queued(1)
            .build();
        let deadline = Deadline::after(Duration::from_millis(100));
        let a = bulkhead.acquire(&deadline).await.unwrap();
        let _b = bulkhead.acquire(&deadline).await.unwrap();
        // The third waits in the queue; the fourth finds the queue full.
        let mut queued = Box::pin(bulkhead.acquire(&deadline));
        assert!(futures_poll(queued.as_mut()).is_none());
        let full = bulkhead.acquire(&deadline).await.unwrap_err();
        assert_eq!(full.kind(), RefusalKind::BulkheadFull);
        let seen = Recorded::take(&snapshotter);
        assert_eq!(seen.gauge("policy_bulkhead_in_flight", &name), 2.0);
        assert_eq!(seen.gauge("policy_bulkhead_queued", &name), 1.0);
        let refused_full = refusals(&seen, "full");
        // The queued call times out at its deadline: a refusal of its own reason.
        let timed_out = queued.await.unwrap_err();
        assert_eq!(timed_out.kind(), RefusalKind::BulkheadFull);
        drop(a);
        let seen = Recorded::take(&snapshotter);
        let snapshot = bulkhead.snapshot();
        assert_eq!((refused_full, snapshot.refused_full), (1, 1));
        assert_eq!(refusals(&seen, "full"), 0, "none since");
        assert_eq!(
            (
                refusals(&seen, "queue_timeout"),
                snapshot.refused_queue_timeout
            ),
            (1, 1)
        );
        // The debugging recorder's gauges read as the change since the last snapshot: one slot
        // given back, the queue emptied.
        assert_eq!(seen.gauge("policy_bulkhead_in_flight", &name), -1.0);
        assert_eq!(seen.gauge("policy_bulkhead_queued", &name), -1.0);
    });
}

/// The bulkhead's refusals with `reason` in `seen`.
fn refusals(seen: &Recorded, reason: &str) -> u64 {
    seen.counter(
        "policy_refusals_total",
        &[
            ("mechanism", "bulkhead"),
            ("name", "metered-db"),
            ("kind", "bulkhead_full"),
            ("reason", reason),
        ],
    )
}

/// Polls a future once, with a waker that does nothing.
fn futures_poll<F: std::future::Future>(future: std::pin::Pin<&mut F>) -> Option<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.poll(&mut cx) {
        std::task::Poll::Ready(out) => Some(out),
        std::task::Poll::Pending => None,
    }
}

#[test]
fn shed_decisions_are_counted_by_class_and_reason() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, async {
        let shedder = Shedder::new("metered-checkout");
        let d = Deadline::after(Duration::from_secs(1));
        for _ in 0..2 {
            assert!(
                shedder
                    .admit(WorkClass::Background, 0.9, &d, Duration::ZERO)
                    .is_err()
            );
        }
        assert!(
            shedder
                .admit(WorkClass::Critical, 0.0, &d, Duration::from_secs(2))
                .is_err()
        );
        assert!(
            shedder
                .admit(WorkClass::Deferred, 0.0, &d, Duration::ZERO)
                .is_ok()
        );
        let seen = Recorded::take(&snapshotter);
        let shed = |class, reason| {
            seen.counter(
                "policy_shed_total",
                &[
                    ("mechanism", "shedder"),
                    ("name", "metered-checkout"),
                    ("class", class),
                    ("reason", reason),
                ],
            )
        };
        assert_eq!(shed("background", "load"), 2);
        assert_eq!(shed("critical", "budget"), 1);
        assert_eq!(shed("deferred", "load"), 0, "admissions are not counted");
        // Critical work is never shed for load: no such series.
        assert!(
            seen.get(
                MetricKind::Counter,
                "policy_shed_total",
                &[
                    ("mechanism", "shedder"),
                    ("name", "metered-checkout"),
                    ("class", "critical"),
                    ("reason", "load"),
                ],
            )
            .is_none()
        );
        let snapshot = shedder.snapshot();
        assert_eq!(snapshot.shed_load.background, 2);
        assert_eq!(snapshot.shed_budget.critical, 1);
    });
}

#[derive(Debug)]
struct IndexError;

impl std::fmt::Display for IndexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("search index unavailable")
    }
}

#[test]
fn tasks_count_their_outcomes_their_queue_and_their_wait_to_start() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, async {
        let platform = ImmediatePlatform::new();
        let after = AfterResponse::with_platform(RequestId::new("req-9"), platform.clone());
        after.defer("index_document", async { Err::<(), _>(IndexError) });
        after.defer("record_analytics", async { Ok::<(), IndexError>(()) });
        let seen = Recorded::take(&snapshotter);
        let deferred = [("class", "deferred")];
        // Both wait for their response.
        assert_eq!(seen.gauge("policy_tasks_waiting", &deferred), 2.0);
        // The response ends 30 ms later; both start then, without waiting further.
        tokio::time::advance(Duration::from_millis(30)).await;
        after.release();
        // A pool of one slot and no queue: the first task holds the slot for a second, the
        // second submission is shed.
        let pool = BackgroundPool::builder("metered-media")
            .max_concurrent(1)
            .max_queued(0)
            .platform(platform.clone())
            .build();
        pool.submit("transcode-1", tokio::time::sleep(Duration::from_secs(1)))
            .unwrap();
        assert!(pool.submit("transcode-2", async {}).is_err());
        platform.settled().await;
        let seen = Recorded::take(&snapshotter);
        let outcome = |class, outcome| {
            seen.counter(
                "policy_tasks_total",
                &[("class", class), ("outcome", outcome)],
            )
        };
        assert_eq!(outcome("deferred", "failed"), 1);
        assert_eq!(outcome("deferred", "finished"), 1);
        assert_eq!(outcome("background", "finished"), 1);
        assert_eq!(outcome("background", "abandoned"), 0);
        // Waiting is measured from the response's end, not from the deferral.
        assert_eq!(
            seen.histogram("policy_task_start_delay_seconds", &deferred),
            [0.0, 0.0]
        );
        assert_eq!(
            seen.histogram(
                "policy_task_start_delay_seconds",
                &[("class", "background")]
            ),
            [0.0]
        );
        // Since the last snapshot, both deferred tasks left the queue; the background task
        // came and went.
        assert_eq!(seen.gauge("policy_tasks_waiting", &deferred), -2.0);
        assert_eq!(
            seen.gauge("policy_tasks_waiting", &[("class", "background")]),
            0.0
        );
        assert_eq!(
            seen.counter(
                "policy_shed_total",
                &[
                    ("mechanism", "background"),
                    ("name", "metered-media"),
                    ("class", "background"),
                    ("reason", "load"),
                ],
            ),
            1
        );
    });
}

#[cfg(feature = "redis")]
#[test]
fn a_fleet_limiter_counts_its_refusals() {
    use velocity_policy_runtime::limiter::FailMode;
    use velocity_policy_runtime::redis_store::RedisStore;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    // Sockets, and real time: the store's connection attempts are real.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // Port 1 on loopback: nothing listens, so the limiter decides without Redis, closed.
        let store = RedisStore::builder()
            .timeout(Duration::from_millis(100))
            .connect("redis://127.0.0.1:1/")
            .await
            .unwrap();
        let limiter = store
            .rate_limiter("metered_exports", 5, Duration::from_secs(60))
            .on_error(FailMode::Closed)
            .on_timeout(FailMode::Closed)
            .build();
        for _ in 0..2 {
            let refusal = limiter.acquire().await.unwrap_err();
            assert_eq!(refusal.kind(), RefusalKind::RateLimited);
        }
        let seen = Recorded::take(&snapshotter);
        let refused = seen.counter(
            "policy_refusals_total",
            &[
                ("mechanism", "rate_limiter"),
                ("name", "metered_exports"),
                ("kind", "rate_limited"),
                ("reason", "rate"),
            ],
        );
        assert_eq!(refused, 2);
        assert_eq!(limiter.snapshot().failed_closed, 2);
    });
}

#[test]
fn an_in_process_limiter_counts_its_refusals() {
    use velocity_policy_runtime::limiter::RateLimiter;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let limiter = RateLimiter::builder("metered_signups", 2, Duration::from_secs(60)).build();
        limiter.acquire().await.unwrap();
        limiter.acquire().await.unwrap();
        for _ in 0..3 {
            let refusal = limiter.acquire().await.unwrap_err();
            assert_eq!(refusal.kind(), RefusalKind::RateLimited);
        }
        let seen = Recorded::take(&snapshotter);
        let refused = seen.counter(
            "policy_refusals_total",
            &[
                ("mechanism", "rate_limiter"),
                ("name", "metered_signups"),
                ("kind", "rate_limited"),
                ("reason", "rate"),
            ],
        );
        assert_eq!(refused, 3);
        assert_eq!(limiter.snapshot().refused, 3);
    });
}

#[test]
fn hedges_are_counted_started_won_lost_and_stopped() {
    use std::sync::Arc;
    use velocity_policy_runtime::hedge::{Hedge, hedge_within};
    use velocity_policy_runtime::{CallError, Idempotent, RetryAllowance};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, async {
        // Two hedges allowed in the window, then none.
        let allowance = Arc::new(RetryAllowance::new(Duration::from_secs(1), 2, 0.0));
        let hedge = Hedge::builder("metered-hedge")
            .after(Duration::from_millis(10))
            .allowance(allowance)
            .build();
        let deadline = Deadline::after(Duration::from_secs(1));
        // First attempt 100 ms, the hedge 5 ms (won); then first 20 ms, the hedge 50 ms (lost);
        // then no allowance left (stopped).
        for (first, second) in [(100, 5), (20, 50), (30, 1)] {
            let _: Result<u32, CallError<std::io::Error>> = hedge_within(
                &deadline,
                &hedge,
                Idempotent::claim(
                    |attempt: velocity_policy_runtime::retry::Attempt| async move {
                        let ms = if attempt.number == 1 { first } else { second };
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        Ok(attempt.number)
                    },
                ),
            )
            .await;
        }
        let seen = Recorded::take(&snapshotter);
        let hedges = |outcome| {
            seen.counter(
                "policy_hedges_total",
                &[("name", "metered-hedge"), ("outcome", outcome)],
            )
        };
        assert_eq!(hedges("started"), 2);
        assert_eq!(hedges("won"), 1);
        assert_eq!(hedges("lost"), 1);
        let stopped = |reason| {
            seen.counter(
                "policy_hedge_stopped_total",
                &[("name", "metered-hedge"), ("reason", reason)],
            )
        };
        assert_eq!(stopped("budget"), 1);
        assert_eq!(stopped("deadline"), 0, "registered at zero");
        let s = hedge.snapshot();
        assert_eq!(
            (s.started, s.won, s.lost, s.stopped_by_budget),
            (2, 1, 1, 1)
        );
    });
}

#[test]
fn a_bulkhead_sets_its_limit_gauge_when_built_and_when_resized() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let name = [("name", "metered-limit")];
    with_recorder(&recorder, async {
        let bulkhead = Bulkhead::builder("metered-limit").max_concurrent(6).build();
        let seen = Recorded::take(&snapshotter);
        assert_eq!(seen.gauge("policy_bulkhead_limit", &name), 6.0);
        bulkhead.set_max_concurrent(3);
        let seen = Recorded::take(&snapshotter);
        assert_eq!(seen.gauge("policy_bulkhead_limit", &name), 3.0);
    });
}
