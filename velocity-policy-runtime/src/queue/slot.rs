//! Where a `#[background(queue = "...")]` function finds its queue (feature `redis`): among the
//! [installed](super::install) queues, until one is found, then kept. Without the feature,
//! `no_slot.rs` has the same items and never finds one.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::TaskQueue;

/// One function's lookup of its queue.
#[derive(Debug)]
pub(crate) struct Lookup {
    found: OnceLock<TaskQueue>,
    /// One more than the install count at the last lookup that found nothing (0: none yet), so
    /// that the embedded default (no queue installed) takes no lock per call.
    missed: AtomicU64,
}

impl Lookup {
    pub(crate) const fn new() -> Self {
        Self {
            found: OnceLock::new(),
            missed: AtomicU64::new(0),
        }
    }

    /// Enqueues `args` as a task of `operation` on the queue `name` when it is installed (a
    /// refusal is counted and logged by the queue), and gives them back when it is not. Only
    /// their encoding is needed here: the expansion's `QueueSlot` asks for the whole of
    /// `QueueArgs`, with its message, so this module names nothing of the expansion's.
    pub(crate) fn enqueue<A: serde_core::Serialize>(
        &'static self,
        name: &'static str,
        operation: &'static str,
        args: A,
    ) -> Option<A> {
        let queue = match self.found.get() {
            Some(queue) => Some(queue),
            None => {
                let installs = super::installs();
                if self.missed.load(Ordering::Acquire) == installs + 1 {
                    None
                } else {
                    let found = super::installed(name);
                    if found.is_none() {
                        self.missed.store(installs + 1, Ordering::Release);
                    }
                    found.map(|q| self.found.get_or_init(|| q))
                }
            }
        };
        match queue {
            Some(queue) => {
                queue.enqueue_detached(operation, &args);
                None
            }
            None => Some(args),
        }
    }
}
