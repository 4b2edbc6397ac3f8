//! A dependency of limited capacity, for tests and scenarios of concurrency limits.
//!
//! [`Capacity`] serves at most `slots` calls at once, each in a fixed service time; calls past
//! that wait inside it, first come first served, as a connection pool or a thread pool does.
//! So `L > slots` concurrent callers each see `service × L / slots`: the latency an adaptive
//! limit reads. [`Capacity::set_slots`] changes what it serves mid-run (a node lost): a drop
//! takes effect as the calls it is serving end.
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_testkit::capacity::Capacity;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let dependency = Capacity::new(2, Duration::from_millis(10));
//! let start = tokio::time::Instant::now();
//! let calls = (0..4).map(|_| dependency.call());
//! futures_join(calls).await;
//! // Four calls, two at a time: two rounds of 10 ms.
//! assert_eq!(start.elapsed(), Duration::from_millis(20));
//! # }
//! # async fn futures_join(calls: impl Iterator<Item = impl std::future::Future<Output = Duration> + Send + 'static>) {
//! #     let tasks: Vec<_> = calls.map(tokio::spawn).collect();
//! #     for task in tasks { task.await.unwrap(); }
//! # }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

/// A dependency that serves at most so many calls at once; cloning shares it.
#[derive(Debug, Clone)]
pub struct Capacity {
    slots: Arc<Semaphore>,
    size: Arc<AtomicU32>,
    service: Duration,
}

impl Capacity {
    /// Serves `slots` calls at once, each in `service`.
    pub fn new(slots: u32, service: Duration) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(slots as usize)),
            size: Arc::new(AtomicU32::new(slots)),
            service,
        }
    }

    /// One call: waits for a slot inside the dependency, then for the service time. Returns
    /// how long it took.
    pub fn call(&self) -> impl Future<Output = Duration> + Send + use<> {
        let (slots, service) = (self.slots.clone(), self.service);
        async move {
            let start = Instant::now();
            let _slot = slots.acquire_owned().await.expect("never closed");
            tokio::time::sleep(service).await;
            start.elapsed()
        }
    }

    /// Serves `slots` calls at once from now on. Raising it serves waiting calls at once;
    /// lowering it takes slots away as the calls holding them end (the calls already waiting
    /// inside are served first, as a queue is).
    pub fn set_slots(&self, slots: u32) {
        let before = self.size.swap(slots, Ordering::SeqCst);
        if slots > before {
            self.slots.add_permits((slots - before) as usize);
        } else if slots < before {
            let taken = self.slots.clone();
            tokio::spawn(async move {
                taken
                    .acquire_many_owned(before - slots)
                    .await
                    .expect("never closed")
                    .forget();
            });
        }
    }

    /// The calls it serves at once.
    pub fn slots(&self) -> u32 {
        self.size.load(Ordering::SeqCst)
    }

    /// More load than it serves: `clients` tasks, each asking `admit` (a concurrency limit)
    /// and calling the dependency while holding what it returned, again as soon as the call
    /// ends, or 2 ms after `admit` refused. They stop when the returned [`Load`] is dropped.
    pub fn saturate<G, A>(&self, clients: usize, admit: A) -> Load
    where
        G: Send + 'static,
        A: Fn() -> Option<G> + Clone + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..clients {
            let (dependency, admit, stop) = (self.clone(), admit.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match admit() {
                        Some(slot) => {
                            dependency.call().await;
                            drop(slot);
                        }
                        None => tokio::time::sleep(Duration::from_millis(2)).await,
                    }
                }
            });
        }
        Load(stop)
    }
}

/// The clients of [`Capacity::saturate`]; they stop when this is dropped.
#[derive(Debug)]
#[must_use = "the clients stop when this is dropped"]
pub struct Load(Arc<AtomicBool>);

impl Drop for Load {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
