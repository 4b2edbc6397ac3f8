//! The observed tree's edges: each call of an annotated operation notes the operation polled
//! around it when it starts (its caller), or that there was none (an entry point, with a
//! deadline in scope or not); the registry keeps each edge once, and a call after the first
//! from a known caller allocates nothing.
//!
//! The calls here go through what the attribute expansion wraps every call in
//! (`__macro_support::traced` with a `static Calls`), with names of their own per test, since
//! the tests of this binary share the process's registry.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::future::Future;
use std::time::Duration;

use velocity_policy_runtime::__macro_support::{Calls, traced};
use velocity_policy_runtime::registry::EdgeSnapshot;
use velocity_policy_runtime::{Deadline, Registry};

type Done = Result<(), std::io::Error>;

fn call(calls: &'static Calls, body: impl Future<Output = Done>) -> impl Future<Output = Done> {
    traced(calls, tracing::Span::none(), body)
}

/// The edges to `child`, as (caller, operation, under a deadline), in the snapshot's order.
fn edges_of(child: &str) -> Vec<(Option<&'static str>, &'static str, Option<bool>)> {
    Registry::global()
        .snapshot()
        .calls
        .edges
        .into_iter()
        .filter(|e| e.child == child)
        .map(edge)
        .collect()
}

fn edge(e: EdgeSnapshot) -> (Option<&'static str>, &'static str, Option<bool>) {
    (e.parent, e.child, e.under_deadline)
}

static SAVE: Calls = Calls::new("calls_save");
static LOOKUP: Calls = Calls::new("calls_lookup");
static WRITE: Calls = Calls::new("calls_write");

async fn lookup() -> Done {
    call(&LOOKUP, async { Ok(()) }).await
}

async fn write() -> Done {
    call(&WRITE, async {
        tokio::task::yield_now().await;
        Ok(())
    })
    .await
}

async fn save() -> Done {
    call(&SAVE, async {
        lookup().await?;
        write().await?;
        lookup().await
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn a_call_notes_its_caller_once_and_an_entry_whether_a_deadline_was_in_scope() {
    Deadline::after(Duration::from_secs(5))
        .scope(save())
        .await
        .unwrap();
    Deadline::after(Duration::from_secs(5))
        .scope(save())
        .await
        .unwrap();
    // The same entry point called with no deadline in scope (a task, or a route without the
    // DeadlineLayer): an edge of its own.
    save().await.unwrap();

    assert_eq!(
        edges_of("calls_save"),
        [
            (None, "calls_save", Some(false)),
            (None, "calls_save", Some(true)),
        ]
    );
    // Twice per save, three saves: one edge each.
    assert_eq!(
        edges_of("calls_lookup"),
        [(Some("calls_save"), "calls_lookup", None)]
    );
    assert_eq!(
        edges_of("calls_write"),
        [(Some("calls_save"), "calls_write", None)]
    );
}

static OUTER: Calls = Calls::new("calls_outer");
static SPAWNED: Calls = Calls::new("calls_spawned");

#[tokio::test(start_paused = true)]
async fn a_task_spawned_inside_a_call_is_an_entry_point_of_its_own() {
    call(&OUTER, async {
        tokio::spawn(call(&SPAWNED, async { Ok(()) }))
            .await
            .unwrap()
    })
    .await
    .unwrap();
    // A spawned task is polled on its own, outside its spawner's poll (as a deadline is not
    // inherited by it either).
    assert_eq!(
        edges_of("calls_spawned"),
        [(None, "calls_spawned", Some(false))]
    );
}

static PING: Calls = Calls::new("calls_ping");
static PONG: Calls = Calls::new("calls_pong");

fn ping(depth: u32) -> std::pin::Pin<Box<dyn Future<Output = Done> + Send>> {
    Box::pin(call(&PING, async move {
        if depth > 0 {
            pong(depth - 1).await?;
        }
        Ok(())
    }))
}

fn pong(depth: u32) -> std::pin::Pin<Box<dyn Future<Output = Done> + Send>> {
    Box::pin(call(&PONG, async move {
        if depth > 0 {
            ping(depth - 1).await?;
        }
        Ok(())
    }))
}

#[tokio::test(start_paused = true)]
async fn a_cycle_at_run_time_is_two_edges_not_a_growing_list() {
    Deadline::after(Duration::from_secs(1))
        .scope(ping(40))
        .await
        .unwrap();
    let edges: Vec<_> = Registry::global()
        .snapshot()
        .calls
        .edges
        .into_iter()
        .filter(|e| e.child.starts_with("calls_p"))
        .map(edge)
        .collect();
    // Forty calls deep, three edges: by caller, then operation.
    assert_eq!(
        edges,
        [
            (None, "calls_ping", Some(true)),
            (Some("calls_ping"), "calls_pong", None),
            (Some("calls_pong"), "calls_ping", None),
        ]
    );
}

/// Callers past the slots an operation keeps: the edges still recorded, each once.
static SHARED: Calls = Calls::new("calls_shared");
static CALLERS: [Calls; 12] = [
    Calls::new("calls_caller_0"),
    Calls::new("calls_caller_1"),
    Calls::new("calls_caller_2"),
    Calls::new("calls_caller_3"),
    Calls::new("calls_caller_4"),
    Calls::new("calls_caller_5"),
    Calls::new("calls_caller_6"),
    Calls::new("calls_caller_7"),
    Calls::new("calls_caller_8"),
    Calls::new("calls_caller_9"),
    Calls::new("calls_caller_10"),
    Calls::new("calls_caller_11"),
];

async fn from_every_caller() {
    for caller in &CALLERS {
        call(caller, call(&SHARED, async { Ok(()) })).await.unwrap();
    }
}

#[test]
fn a_call_from_a_known_caller_allocates_nothing_even_past_the_slots() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    // The first calls record the edges (and tokio's thread-locals settle).
    runtime.block_on(async {
        Deadline::after(Duration::from_secs(5))
            .scope(async {
                from_every_caller().await;
                save().await
            })
            .await
            .unwrap();
    });
    let counted = allocation_counter::measure(|| {
        runtime.block_on(async {
            Deadline::after(Duration::from_secs(5))
                .scope(async {
                    for _ in 0..50 {
                        from_every_caller().await;
                        save().await.unwrap();
                    }
                })
                .await;
        });
    });
    let bare = allocation_counter::measure(|| {
        runtime.block_on(async {
            Deadline::after(Duration::from_secs(5))
                .scope(async {
                    for _ in 0..50 {
                        tokio::task::yield_now().await;
                    }
                })
                .await;
        });
    });
    assert_eq!(
        counted.count_total,
        bare.count_total,
        "calls from known callers allocated {} more times than the bare loop",
        counted.count_total - bare.count_total
    );
    let callers = edges_of("calls_shared");
    assert_eq!(callers.len(), CALLERS.len(), "{callers:?}");
}
