//! The admitted path allocates nothing: measured with a counting global allocator
//! (`allocation-counter`, which counts per thread, so parallel tests do not disturb it).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::time::Duration;

use velocity_policy_runtime::WorkClass;
use velocity_policy_runtime::{
    Breaker, Bulkhead, CallError, Deadline, Idempotent, RetryPolicy, Shedder, retry_within,
};

async fn trivial(x: u64) -> Result<u64, std::io::Error> {
    Ok(x + 1)
}

async fn pending_once(x: u64) -> Result<u64, std::io::Error> {
    tokio::task::yield_now().await;
    Ok(x + 1)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Every mechanism built, and warmed once so lazily initialised thread-locals (the random
/// number generator, tokio's context) are not counted against the call.
struct Stack {
    breaker: Breaker,
    bulkhead: Bulkhead,
    retry: RetryPolicy,
    shedder: Shedder,
}

impl Stack {
    fn new() -> Self {
        Self {
            breaker: Breaker::builder("alloc").build(),
            bulkhead: Bulkhead::builder("alloc").max_concurrent(8).build(),
            retry: RetryPolicy::builder("alloc")
                .attempt_timeout(Duration::from_secs(1))
                .build(),
            shedder: Shedder::new("alloc"),
        }
    }

    /// The sequence the `#[resilient]` expansion runs.
    async fn call(
        &self,
        request: Deadline,
        x: u64,
        wait: bool,
    ) -> Result<u64, CallError<std::io::Error>> {
        request
            .scope(async {
                let deadline = Deadline::child_of_current(Duration::from_secs(2));
                deadline.require(Duration::from_millis(10), "alloc")?;
                self.shedder.admit(
                    WorkClass::Critical,
                    self.bulkhead.load(),
                    &deadline,
                    Duration::ZERO,
                )?;
                retry_within(
                    &deadline,
                    &self.retry,
                    Idempotent::claim(|attempt| async move {
                        self.breaker.check()?;
                        let _slot = self.bulkhead.acquire(&attempt.deadline).await?;
                        let work = async {
                            if wait {
                                pending_once(x).await
                            } else {
                                trivial(x).await
                            }
                        };
                        match attempt.deadline.run(work).await {
                            Ok(Ok(v)) => {
                                self.breaker.record_success();
                                Ok(v)
                            }
                            Ok(Err(e)) => {
                                self.breaker.record_failure();
                                Err(CallError::Failed(e))
                            }
                            Err(expired) => {
                                self.breaker.record_failure();
                                Err(expired.into())
                            }
                        }
                    }),
                )
                .await
            })
            .await
    }
}

#[test]
fn breaker_check_bulkhead_permit_and_deadline_child_allocate_nothing() {
    let rt = runtime();
    let breaker = Breaker::builder("alloc").build();
    let bulkhead = Bulkhead::builder("alloc").max_concurrent(4).build();
    let request = rt.block_on(async { Deadline::after(Duration::from_secs(1)) });
    let (breaker, bulkhead) = (&breaker, &bulkhead);
    let once = |i: u64| async move {
        breaker.check().unwrap();
        let _slot = bulkhead.acquire(&request).await.unwrap();
        let out = request
            .child(Duration::from_millis(500))
            .run(trivial(i))
            .await;
        breaker.record_success();
        out.unwrap().unwrap()
    };
    rt.block_on(once(0));
    let counted = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                assert_eq!(once(i).await, i + 1);
            }
        })
    });
    assert_eq!(counted.count_total, 0, "{counted:?}");
}

#[test]
fn the_full_resilient_sequence_allocates_nothing_when_admitted() {
    let rt = runtime();
    let stack = Stack::new();
    let request = rt.block_on(async { Deadline::after(Duration::from_secs(10)) });
    rt.block_on(async {
        stack.call(request, 0, false).await.unwrap();
        stack.call(request, 0, true).await.unwrap();
    });
    let counted = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                assert_eq!(stack.call(request, i, false).await.unwrap(), i + 1);
            }
        })
    });
    assert_eq!(counted.count_total, 0, "ready at once: {counted:?}");
}

#[test]
fn an_operation_that_waits_once_allocates_nothing_either() {
    let rt = runtime();
    let stack = Stack::new();
    let request = rt.block_on(async { Deadline::after(Duration::from_secs(10)) });
    // Warm up as many calls as are measured: tokio's scheduler grows its deferred-wake list
    // once, on the first pendings.
    rt.block_on(async {
        for i in 0..1_000u64 {
            stack.call(request, i, true).await.unwrap();
        }
    });
    // The bare operation, with no mechanism around it: tokio's `block_on` allocates once when
    // its future first goes pending, whatever the future.
    let bare = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                assert_eq!(pending_once(i).await.unwrap(), i + 1);
            }
        })
    });
    let counted = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                assert_eq!(stack.call(request, i, true).await.unwrap(), i + 1);
            }
        })
    });
    assert!(bare.count_total <= 1, "{bare:?}");
    // Arming tokio's timer for a pending operation registers an intrusive timer entry: the
    // whole stack adds no allocation to the bare operation's.
    assert_eq!(
        counted.count_total, bare.count_total,
        "pending once: {counted:?}"
    );
}

#[test]
fn an_adaptive_bulkhead_allocates_nothing_when_admitted_nor_when_its_limit_moves() {
    use velocity_policy_runtime::bulkhead::AdaptiveLimit;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let bulkhead = Bulkhead::builder("alloc-adaptive")
        .adaptive(AdaptiveLimit::new(4, 64).window(Duration::from_millis(1)))
        .build();
    let request = rt.block_on(async { Deadline::after(Duration::from_secs(60)) });
    let bulkhead = &bulkhead;
    // Four calls at once, each 2 ms: the slots are used and latency is flat, so the limit
    // grows; windows of a millisecond close on releases, so deciding is measured too.
    let round = || async move {
        let a = bulkhead.acquire(&request).await.unwrap();
        let b = bulkhead.acquire(&request).await.unwrap();
        let c = bulkhead.try_acquire().unwrap();
        let d = bulkhead.try_acquire_owned().unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
        drop((a, b, c, d));
    };
    rt.block_on(round());
    let counted = allocation_counter::measure(|| {
        rt.block_on(async {
            for _ in 0..100 {
                round().await;
            }
        })
    });
    let adaptive = bulkhead.snapshot().adaptive.unwrap();
    assert!(adaptive.windows >= 30, "{adaptive:?}");
    assert!(bulkhead.max_concurrent() > 4, "the limit moved");
    assert_eq!(counted.count_total, 0, "{counted:?}");
}

static ALLOC_ROUTE: velocity_policy_runtime::__macro_support::Calls =
    velocity_policy_runtime::__macro_support::Calls::new("alloc_route");
static ALLOC_OP: velocity_policy_runtime::__macro_support::Calls =
    velocity_policy_runtime::__macro_support::Calls::new("alloc_op");

/// What the expansion wraps every call in, around the whole sequence: each call notes its
/// caller at its first poll (here an annotated operation inside another, under a request
/// deadline), and with the `dashboard` feature, once a sampler runs, is measured for the
/// history. Neither allocates once the callers are known.
#[test]
fn an_annotated_call_noting_its_caller_allocates_nothing_when_admitted() {
    use velocity_policy_runtime::__macro_support::traced;

    // With the `dashboard` feature, a sampler on a runtime of its own (another thread: the
    // counter counts this thread's allocations only), so every call below is measured.
    #[cfg(feature = "dashboard")]
    let sampler = {
        let sampler = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap();
        sampler.block_on(async {
            let _ = velocity_policy_runtime::dashboard::router::<()>();
        });
        sampler
    };
    let rt = runtime();
    let stack = Stack::new();
    let request = rt.block_on(async { Deadline::after(Duration::from_secs(10)) });
    let stack = &stack;
    let once = |i: u64| {
        traced(&ALLOC_ROUTE, tracing::Span::none(), async move {
            traced(
                &ALLOC_OP,
                tracing::Span::none(),
                stack.call(request, i, false),
            )
            .await
        })
    };
    rt.block_on(async {
        request.scope(once(0)).await.unwrap();
        once(0).await.unwrap();
    });
    let counted = allocation_counter::measure(|| {
        rt.block_on(async {
            for i in 0..1_000u64 {
                assert_eq!(request.scope(once(i)).await.unwrap(), i + 1);
                assert_eq!(once(i).await.unwrap(), i + 1);
            }
        })
    });
    assert_eq!(counted.count_total, 0, "{counted:?}");
    // The callers were noted: the route under a deadline and not, the operation by the route.
    let calls = velocity_policy_runtime::Registry::global().snapshot().calls;
    let edges: Vec<(Option<&str>, &str)> = calls
        .edges
        .iter()
        .filter(|e| e.child.starts_with("alloc_"))
        .map(|e| (e.parent, e.child))
        .collect();
    assert!(
        edges.contains(&(Some("alloc_route"), "alloc_op")),
        "{edges:?}"
    );
    assert_eq!(
        edges
            .iter()
            .filter(|(p, c)| p.is_none() && *c == "alloc_route")
            .count(),
        2,
        "{edges:?}"
    );
    // And measured for the history: every call of the operation is in its points.
    #[cfg(feature = "dashboard")]
    {
        let registry = velocity_policy_runtime::Registry::global();
        registry.record_history();
        let history = registry.history();
        let op = history
            .operations
            .iter()
            .find(|s| &*s.name == "alloc_op")
            .unwrap();
        let calls: f64 = op.column("calls").unwrap().iter().flatten().sum();
        assert_eq!(calls, 2002.0, "every call measured");
        drop(sampler);
    }
}
