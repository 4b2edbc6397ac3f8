//! The dashboard's history of a registry (feature `dashboard`): the methods the feature adds
//! to the [`Registry`], over the [`History`](crate::history::History) it keeps there (its
//! [`parts`](super::parts)). Here rather than in [`history`](crate::history), so that the
//! registry names the history's module and that module names nothing of the registry.

use super::{Registry, read};
use crate::breaker::Breaker;
use crate::bulkhead::Bulkhead;
use crate::calls::Calls;
use crate::history::{HistorySnapshot, Mechanisms};

/// The dashboard's history: what `dashboard` adds to [`Registry`].
impl Registry {
    /// The breakers', bulkheads', shedders' and operation deadlines' snapshots, for the
    /// history (feature `dashboard`).
    fn mechanism_snapshots(&self) -> Mechanisms {
        (
            read(&self.breakers)
                .values()
                .map(Breaker::snapshot)
                .collect(),
            read(&self.bulkheads)
                .values()
                .map(Bulkhead::snapshot)
                .collect(),
            read(&self.shedders)
                .values()
                .map(|s| s.snapshot())
                .collect(),
            read(&self.operations)
                .values()
                .map(|o| o.snapshot())
                .collect(),
        )
    }

    /// The calls seen of every operation (feature `dashboard`: their counts and latencies).
    fn calls_seen(&self) -> Vec<&'static Calls> {
        read(&self.calls).operations().to_vec()
    }

    /// Takes one sample of the dashboard's history now (feature `dashboard`): the dashboard's
    /// sampler does every two seconds; a test, or a service with a cadence of its own, may too.
    pub fn record_history(&self) {
        self.history
            .sample(self.mechanism_snapshots(), &self.calls_seen());
    }

    /// Starts the dashboard's sampler for this registry on the current tokio runtime, once
    /// (again if the runtime that ran it ended); without a runtime, nothing.
    pub(crate) fn sample_history_from(&'static self) {
        self.history.start(move || self.record_history());
    }

    /// The last few minutes of every breaker, bulkhead, shedder and operation, one point per
    /// sample: the dashboard serves it as its JSON's `history`.
    pub fn history(&self) -> HistorySnapshot {
        self.history.snapshot()
    }
}
