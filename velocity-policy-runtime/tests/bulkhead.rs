//! The bulkhead's invariants (its module docs state them), one test each.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::{Instant, advance};
use velocity_policy_runtime::{Bulkhead, Deadline, RefusalKind, RefusalReason};

const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_refuses_without_queueing() {
    let b = Bulkhead::builder("search").max_concurrent(2).build();
    let deadline = Deadline::after(Duration::from_secs(10));
    let _a = b.acquire(&deadline).await.unwrap();
    let _b = b.acquire(&deadline).await.unwrap();
    let start = Instant::now();
    let refusal = b.acquire(&deadline).await.unwrap_err();
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "refused at once, not after waiting"
    );
    assert_eq!(refusal.kind(), RefusalKind::BulkheadFull);
    assert_eq!(
        refusal.reason(),
        &RefusalReason::BulkheadFull {
            max_concurrent: 2,
            max_queued: 0
        }
    );
    assert_eq!(b.snapshot().refused_full, 1);
}

#[tokio::test(start_paused = true)]
async fn past_slots_and_queue_callers_are_refused_at_once() {
    let b = Bulkhead::builder("search")
        .max_concurrent(1)
        .max_queued(1)
        .build();
    let deadline = Deadline::after(Duration::from_secs(10));
    let held = b.acquire(&deadline).await.unwrap();
    let queued = {
        let b = b.clone();
        tokio::spawn(async move { b.acquire(&deadline).await.map(|_| ()) })
    };
    tokio::task::yield_now().await;
    assert_eq!(b.queued(), 1);
    let start = Instant::now();
    assert!(b.acquire(&deadline).await.is_err(), "queue full: refused");
    assert_eq!(start.elapsed(), Duration::ZERO);
    drop(held);
    assert!(
        queued.await.unwrap().is_ok(),
        "the queued caller got the freed slot"
    );
    assert_eq!(b.running(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_queued_caller_waits_at_most_until_its_deadline() {
    let b = Bulkhead::builder("search")
        .max_concurrent(1)
        .max_queued(4)
        .build();
    let _held = b
        .acquire(&Deadline::after(Duration::from_secs(60)))
        .await
        .unwrap();
    let start = Instant::now();
    let refusal = b.acquire(&Deadline::after(300 * MS)).await.unwrap_err();
    assert_eq!(start.elapsed(), 300 * MS);
    assert_eq!(refusal.kind(), RefusalKind::BulkheadFull);
    assert_eq!(
        refusal.reason(),
        &RefusalReason::BulkheadQueueTimeout { waited: 300 * MS }
    );
    assert_eq!(b.queued(), 0, "it left the queue");
    assert_eq!(b.snapshot().refused_queue_timeout, 1);
}

#[tokio::test(start_paused = true)]
async fn newcomers_do_not_jump_the_queue() {
    let b = Bulkhead::builder("search")
        .max_concurrent(1)
        .max_queued(1)
        .build();
    let deadline = Deadline::after(Duration::from_secs(10));
    let held = b.try_acquire().unwrap();
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move {
            let _slot = b.acquire(&deadline).await.unwrap();
            tokio::time::sleep(100 * MS).await;
        })
    };
    tokio::task::yield_now().await;
    drop(held);
    // The slot is promised to the queued caller, even before it runs.
    assert!(b.try_acquire().is_err());
    waiter.await.unwrap();
    assert!(b.try_acquire().is_ok());
}

#[tokio::test]
async fn a_permit_is_released_on_panic() {
    let b = Bulkhead::builder("search").max_concurrent(1).build();
    let task = {
        let b = b.clone();
        tokio::spawn(async move {
            let _slot = b.try_acquire().unwrap();
            panic!("the work panicked while holding the slot");
        })
    };
    assert!(task.await.unwrap_err().is_panic());
    assert_eq!(b.running(), 0);
    assert!(b.try_acquire().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_permit_is_released_on_cancellation() {
    let b = Bulkhead::builder("search")
        .max_concurrent(1)
        .max_queued(1)
        .build();
    let deadline = Deadline::after(Duration::from_secs(10));
    let work = async {
        let _slot = b.acquire(&deadline).await.unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
    };
    // The caller stops waiting after 50ms and drops the future holding the slot.
    assert!(Deadline::after(50 * MS).run(work).await.is_err());
    assert_eq!(b.running(), 0);
    // A queued caller that is cancelled leaves the queue too.
    let _held = b.try_acquire().unwrap();
    let queued = Deadline::after(10 * MS).run(b.acquire(&deadline)).await;
    assert!(queued.is_err());
    advance(MS).await;
    assert_eq!(b.queued(), 0);
}

#[tokio::test(start_paused = true)]
async fn load_reports_how_full_the_compartment_is() {
    let b = Bulkhead::builder("search").max_concurrent(4).build();
    assert_eq!(b.load(), 0.0);
    let a = b.try_acquire().unwrap();
    let c = b.try_acquire().unwrap();
    assert_eq!(b.load(), 0.5);
    drop((a, c));
    assert_eq!(b.load(), 0.0);
}

#[test]
fn hammering_from_many_tasks_never_exceeds_the_slots_and_counts_stay_exact() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let b = Bulkhead::builder("hammered")
            .max_concurrent(3)
            .max_queued(2)
            .build();
        let inside = Arc::new(AtomicU32::new(0));
        let peak = Arc::new(AtomicU32::new(0));
        let admitted = Arc::new(AtomicU64::new(0));
        let refused = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (b, inside, peak, admitted, refused) = (
                    b.clone(),
                    inside.clone(),
                    peak.clone(),
                    admitted.clone(),
                    refused.clone(),
                );
                tokio::spawn(async move {
                    for _ in 0..300 {
                        let deadline = Deadline::after(Duration::from_millis(50));
                        match b.acquire(&deadline).await {
                            Ok(_slot) => {
                                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                                peak.fetch_max(now, Ordering::SeqCst);
                                tokio::task::yield_now().await;
                                inside.fetch_sub(1, Ordering::SeqCst);
                                admitted.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(_) => {
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let snap = b.snapshot();
        assert!(peak.load(Ordering::SeqCst) <= 3);
        assert_eq!(
            admitted.load(Ordering::Relaxed) + refused.load(Ordering::Relaxed),
            32 * 300
        );
        assert_eq!(
            refused.load(Ordering::Relaxed),
            snap.refused_full + snap.refused_queue_timeout
        );
        assert!(admitted.load(Ordering::Relaxed) > 0);
        assert_eq!((snap.running, snap.queued), (0, 0));
    });
}

#[tokio::test(start_paused = true)]
async fn raising_the_slot_count_wakes_queued_callers_at_once() {
    let b = Bulkhead::builder("search")
        .max_concurrent(1)
        .max_queued(3)
        .build();
    let deadline = Deadline::after(Duration::from_secs(10));
    let _held = b.try_acquire().unwrap();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                let _slot = b.acquire(&deadline).await.unwrap();
                let waited = start.elapsed();
                tokio::time::sleep(Duration::from_secs(1)).await;
                waited
            })
        })
        .collect();
    tokio::task::yield_now().await;
    assert_eq!((b.running(), b.queued()), (1, 3));

    advance(20 * MS).await;
    assert_eq!(b.set_max_concurrent(4), 1);
    tokio::task::yield_now().await;
    assert_eq!(
        (b.running(), b.queued()),
        (4, 0),
        "all three took a new slot"
    );
    assert_eq!(b.max_concurrent(), 4);
    for waiter in waiters {
        assert_eq!(
            waiter.await.unwrap(),
            20 * MS,
            "woken by the resize, not later"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn lowering_the_slot_count_drains_in_flight_calls_and_revokes_none() {
    let b = Bulkhead::builder("search").max_concurrent(3).build();
    let held: Vec<_> = (0..3).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(b.set_max_concurrent(1), 3);
    assert_eq!(b.running(), 3, "no slot is taken back");
    assert_eq!(b.load(), 1.0);
    let snap = b.snapshot();
    assert_eq!((snap.max_concurrent, snap.running), (1, 3));

    let mut held = held.into_iter();
    drop(held.next());
    assert_eq!(b.running(), 2);
    let refusal = b.try_acquire().unwrap_err();
    assert_eq!(
        refusal.reason(),
        &RefusalReason::BulkheadFull {
            max_concurrent: 1,
            max_queued: 0
        },
        "the refusal names the new count"
    );
    drop(held.next());
    assert!(
        b.try_acquire().is_err(),
        "one call in flight is the new count"
    );
    drop(held.next());
    let _slot = b.try_acquire().unwrap();
    assert!(b.try_acquire().is_err());
}

#[tokio::test(start_paused = true)]
async fn after_lowering_a_queued_caller_waits_until_calls_drain_below_the_new_count() {
    let b = Bulkhead::builder("search")
        .max_concurrent(2)
        .max_queued(1)
        .build();
    let deadline = Deadline::after(Duration::from_secs(10));
    let first = b.try_acquire().unwrap();
    let second = b.try_acquire().unwrap();
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.acquire(&deadline).await.map(|_| Instant::now()) })
    };
    tokio::task::yield_now().await;
    assert_eq!(b.set_max_concurrent(1), 2);

    advance(10 * MS).await;
    drop(first);
    tokio::task::yield_now().await;
    assert_eq!(
        (b.running(), b.queued()),
        (1, 1),
        "still at the new count: it waits"
    );

    advance(10 * MS).await;
    let freed_at = Instant::now();
    drop(second);
    assert_eq!(waiter.await.unwrap().unwrap(), freed_at);
    assert_eq!((b.running(), b.queued()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn the_slot_count_is_at_least_one() {
    let b = Bulkhead::builder("search").max_concurrent(2).build();
    b.set_max_concurrent(0);
    assert_eq!(b.max_concurrent(), 1);
    assert!(b.try_acquire().is_ok());
}

#[test]
fn resizing_while_many_tasks_hammer_never_exceeds_the_largest_count_and_ends_empty() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let b = Bulkhead::builder("resized")
            .max_concurrent(2)
            .max_queued(4)
            .build();
        let inside = Arc::new(AtomicU32::new(0));
        let peak = Arc::new(AtomicU32::new(0));
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (b, inside, peak) = (b.clone(), inside.clone(), peak.clone());
                tokio::spawn(async move {
                    for _ in 0..300 {
                        let deadline = Deadline::after(Duration::from_millis(50));
                        if let Ok(_slot) = b.acquire(&deadline).await {
                            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            tokio::task::yield_now().await;
                            inside.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        let resizer = {
            let b = b.clone();
            tokio::spawn(async move {
                for round in 0..200u32 {
                    b.set_max_concurrent(1 + round % 5);
                    tokio::task::yield_now().await;
                }
            })
        };
        resizer.await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        assert!(peak.load(Ordering::SeqCst) <= 5);
        assert_eq!((b.running(), b.queued()), (0, 0));
    });
}

/// A freed slot goes to the caller at the head of the queue, never to one that arrived after
/// it: on a multi-threaded runtime, a slot is freed while a newcomer asks for one at the same
/// moment, two hundred times, and the caller that waited first always gets it (issue 41).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freed_slot_goes_to_the_head_of_the_queue_not_to_a_newcomer() {
    let deadline = || Deadline::after(Duration::from_secs(10));
    for round in 0..200 {
        let bulkhead = Bulkhead::builder("fair")
            .max_concurrent(1)
            .max_queued(2)
            .build();
        let held = bulkhead.try_acquire_owned().unwrap();
        let first_served = Arc::new(AtomicU32::new(0));
        let head = {
            let (bulkhead, first_served) = (bulkhead.clone(), first_served.clone());
            tokio::spawn(async move {
                let _permit = bulkhead.acquire_owned(&deadline()).await.unwrap();
                let _ = first_served.compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst);
            })
        };
        while bulkhead.queued() == 0 {
            tokio::task::yield_now().await;
        }
        // The slot frees as a newcomer arrives.
        drop(held);
        let newcomer = bulkhead.acquire_owned(&deadline()).await.unwrap();
        let _ = first_served.compare_exchange(0, 2, Ordering::SeqCst, Ordering::SeqCst);
        drop(newcomer);
        head.await.unwrap();
        assert_eq!(
            first_served.load(Ordering::SeqCst),
            1,
            "round {round}: the newcomer overtook the caller at the head of the queue"
        );
    }
}
