//! Admission by criticality: a sheddable request is turned away only when admitting it would
//! take a slot the levels above it are measured to need; while there is room for everyone,
//! everyone is admitted; sheddable requests never wait in the queue; a bulkhead whose calls
//! are all `critical` behaves as before.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::time::Duration;

use velocity_policy_runtime::criticality::{self, Criticality};
use velocity_policy_runtime::shedding::ShedReason;
use velocity_policy_runtime::{Bulkhead, Deadline, RefusalKind, RefusalReason};

fn sheddable<T>(f: impl FnOnce() -> T) -> T {
    criticality::sync_scope(Criticality::Sheddable, f)
}

#[tokio::test(start_paused = true)]
async fn while_there_is_room_for_everyone_every_level_is_admitted() {
    let b = Bulkhead::builder("room").max_concurrent(10).build();
    started_mixing(&b);
    // Four critical calls in flight, then released: their peak is 4.
    let held: Vec<_> = (0..4).map(|_| b.try_acquire_owned().unwrap()).collect();
    // Six free slots, four kept at most for critical: two sheddable calls fit.
    let shed: Vec<_> = (0..2)
        .map(|_| sheddable(|| b.try_acquire_owned()).unwrap())
        .collect();
    assert_eq!(b.running(), 6);
    drop((held, shed));
    // With nothing in flight, critical's recent peak (4) is what is kept: 6 of 10 for sheddable.
    let shed: Vec<_> = (0..6)
        .map(|_| sheddable(|| b.try_acquire_owned()).unwrap())
        .collect();
    let refusal = sheddable(|| b.try_acquire()).unwrap_err();
    assert_eq!(refusal.kind(), RefusalKind::Shed);
    assert_eq!(
        refusal.reason(),
        &RefusalReason::Shed(ShedReason::Criticality {
            level: Criticality::Sheddable,
            free: 4,
            kept: 4
        })
    );
    assert_eq!(
        refusal.to_string(),
        "bulkhead `room` refused the call: a sheddable request found its 4 free slots kept for more important requests (4 needed)"
    );
    // Critical work reaches the kept slots.
    let critical: Vec<_> = (0..4).map(|_| b.try_acquire_owned().unwrap()).collect();
    assert_eq!(b.running(), 10);
    assert_eq!(b.snapshot().refused_kept, 1);
    drop((shed, critical));
}

#[tokio::test(start_paused = true)]
async fn sheddable_plus_is_kept_room_from_sheddable_and_critical_plus_from_both() {
    let b = Bulkhead::builder("levels").max_concurrent(6).build();
    started_mixing(&b);
    let plus: Vec<_> = (0..2)
        .map(|_| {
            criticality::sync_scope(Criticality::SheddablePlus, || b.try_acquire_owned()).unwrap()
        })
        .collect();
    drop(plus);
    // Sheddable leaves sheddable_plus's peak of 2: 4 of 6.
    let shed: Vec<_> = (0..4)
        .map(|_| sheddable(|| b.try_acquire_owned()).unwrap())
        .collect();
    assert!(sheddable(|| b.try_acquire()).is_err());
    // sheddable_plus takes the two kept for it; critical_plus is never kept out.
    let plus =
        criticality::sync_scope(Criticality::SheddablePlus, || b.try_acquire_owned()).unwrap();
    let top = criticality::sync_scope(Criticality::CriticalPlus, || b.try_acquire_owned()).unwrap();
    assert_eq!(b.running(), 6);
    drop((shed, plus, top));
}

#[tokio::test(start_paused = true)]
async fn a_sheddable_request_never_waits_in_the_queue() {
    let b = Bulkhead::builder("queue")
        .max_concurrent(1)
        .max_queued(4)
        .build();
    let held = b.try_acquire_owned().unwrap();
    let deadline = Deadline::after(Duration::from_secs(1));
    // The level is read when `acquire` is called: inside the scope.
    let refused =
        criticality::scope(Criticality::Sheddable, async { b.acquire(&deadline).await }).await;
    assert_eq!(refused.unwrap_err().kind(), RefusalKind::BulkheadFull);
    assert_eq!(b.queued(), 0);
    // A critical caller does queue, and gets the slot when it frees.
    let waiting = tokio::spawn({
        let b = b.clone();
        async move { b.acquire_owned(&deadline).await.map(|_| ()) }
    });
    while b.queued() == 0 {
        tokio::task::yield_now().await;
    }
    drop(held);
    assert!(waiting.await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_peak_fades_when_its_level_stops_so_sheddable_work_gets_the_room_back() {
    let b = Bulkhead::builder("fade").max_concurrent(10).build();
    started_mixing(&b);
    let held: Vec<_> = (0..8).map(|_| b.try_acquire_owned().unwrap()).collect();
    drop(held);
    // Critical's peak of 8 keeps 8 slots: 2 for sheddable.
    assert_eq!(admitted_sheddable(&b), 2);
    // Sheddable traffic goes on with no critical calls: the peak fades, the room comes back.
    for _ in 0..5_000 {
        drop(sheddable(|| b.try_acquire()));
    }
    assert_eq!(admitted_sheddable(&b), 10);
}

/// A bulkhead counts levels from the first call that is not `critical` on (one whose calls
/// are all `critical` counts nothing): one sheddable call, admitted and done.
fn started_mixing(b: &Bulkhead) {
    drop(sheddable(|| b.try_acquire()).unwrap());
}

fn admitted_sheddable(b: &Bulkhead) -> usize {
    let held: Vec<_> = std::iter::from_fn(|| sheddable(|| b.try_acquire_owned()).ok()).collect();
    held.len()
}

#[tokio::test(start_paused = true)]
async fn with_every_call_critical_nothing_changes() {
    let b = Bulkhead::builder("plain").max_concurrent(2).build();
    let a = b.try_acquire().unwrap();
    let c = b.try_acquire().unwrap();
    assert_eq!(
        b.try_acquire().unwrap_err().kind(),
        RefusalKind::BulkheadFull
    );
    drop((a, c));
    assert_eq!(b.snapshot().refused_kept, 0);
}

#[tokio::test(start_paused = true)]
async fn with_a_queue_sheddable_work_uses_the_idle_slots_and_critical_work_waits_ahead_of_it() {
    let b = Bulkhead::builder("line")
        .max_concurrent(4)
        .max_queued(4)
        .build();
    started_mixing(&b);
    // Critical's recent peak is 3; with no queue, three slots would be kept free.
    drop(
        (0..3)
            .map(|_| b.try_acquire_owned().unwrap())
            .collect::<Vec<_>>(),
    );
    // The four queue places can hold critical work that finds the slots busy: nothing is kept.
    let shed: Vec<_> = (0..4)
        .map(|_| sheddable(|| b.try_acquire_owned()).unwrap())
        .collect();
    assert_eq!(b.running(), 4);
    let deadline = Deadline::after(Duration::from_secs(1));
    let critical = tokio::spawn({
        let b = b.clone();
        async move { b.acquire_owned(&deadline).await }
    });
    while b.queued() == 0 {
        tokio::task::yield_now().await;
    }
    let mut shed = shed.into_iter();
    drop(shed.next());
    // The freed slot went to the critical caller in line, not to a sheddable newcomer.
    let held = critical.await.unwrap().unwrap();
    assert_eq!(
        sheddable(|| b.try_acquire()).unwrap_err().kind(),
        RefusalKind::BulkheadFull
    );
    assert_eq!(b.snapshot().refused_kept, 0);
    drop((held, shed));
}
