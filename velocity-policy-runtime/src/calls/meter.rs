//! The measure of each call of an annotated operation, for its metrics (feature `metrics`)
//! and the dashboard's history (feature `dashboard`): with either, this module; with neither,
//! `no_meter.rs`, whose items have the same names and do nothing. Within, the metrics'
//! handles and the history's counts are their own stand-ins when their feature is off
//! ([`instruments`](crate::instruments), [`calls::stats`](crate::calls::stats)).

use std::cell::Cell;
use std::sync::OnceLock;
use std::task::Poll;

use super::{CallOutput, Calls};
use crate::calls::stats::{CallStats, recording};
use crate::error::RefusalKind;
use crate::instruments::{self, CallMetrics, CallOutcome};

/// What the mechanisms said about the call being polled on this thread: how its error
/// was made (a refusal, an expiry), and how many retries it started.
#[derive(Clone, Copy, Default)]
pub(crate) struct Mark {
    pub(crate) outcome: Option<CallOutcome>,
    pub(crate) retries: u32,
}

thread_local! {
    static MARK: Cell<Mark> = const { Cell::new(Mark { outcome: None, retries: 0 }) };
}

pub(crate) fn refused(kind: RefusalKind) {
    MARK.with(|m| {
        m.set(Mark {
            outcome: Some(CallOutcome::Refused(kind)),
            ..m.get()
        });
    });
}

pub(crate) fn expired() {
    MARK.with(|m| {
        m.set(Mark {
            outcome: Some(CallOutcome::Expired),
            ..m.get()
        });
    });
}

/// A retry or a hedge started (the attempts per call are a metric; the history does not
/// read them).
pub(crate) fn retried() {
    MARK.with(|m| {
        let mark = m.get();
        m.set(Mark {
            retries: mark.retries.saturating_add(1),
            ..mark
        });
    });
}

/// What an operation's [`Calls`] keeps for its measure: its metric handles, registered at its
/// first call, and its counts for the history.
pub(crate) struct Measure {
    metrics: OnceLock<CallMetrics>,
    pub(crate) stats: CallStats,
}

impl Measure {
    pub(crate) const fn new() -> Self {
        Self {
            metrics: OnceLock::new(),
            stats: CallStats::new(),
        }
    }
}

/// The operation's metric handles, registered at its first call.
#[inline]
fn metrics(calls: &Calls) -> &CallMetrics {
    calls
        .measure
        .metrics
        .get_or_init(|| CallMetrics::new(calls.operation()))
}

/// Whether a call's clock is read: someone listens to its metrics, or the dashboard's
/// history records.
#[inline]
fn measured(calls: &Calls) -> bool {
    (instruments::ON && metrics(calls).live) || recording()
}

/// One call's measure, across its polls.
#[derive(Default)]
pub(crate) struct Meter {
    started: Option<tokio::time::Instant>,
    mark: Mark,
}

/// What a poll's measure keeps between [`Meter::before`] and [`Meter::after`].
pub(crate) struct Saved {
    measured: bool,
    outer: Mark,
}

impl Meter {
    /// Before a poll of a call of `calls`: its clock started at the first measured poll, and
    /// the enclosing call's mark put aside, whether or not anyone listens to this operation,
    /// so what the mechanisms note during this poll never reaches an enclosing call's measure.
    #[inline]
    pub(crate) fn before(&mut self, calls: &Calls) -> Saved {
        let measured = measured(calls);
        if measured && self.started.is_none() {
            self.started = Some(tokio::time::Instant::now());
        }
        Saved {
            measured,
            outer: MARK.with(|m| m.replace(Mark::default())),
        }
    }

    /// After the poll: the enclosing call's mark back, and, when the call ended, its outcome
    /// and duration recorded. Returns the span's `error.type` for a call that failed:
    /// OpenTelemetry's class of error with `metrics` (`_OTHER` when the function's own error),
    /// `_OTHER` without it.
    #[inline]
    pub(crate) fn after<O: CallOutput>(
        &mut self,
        calls: &Calls,
        saved: Saved,
        poll: &Poll<O>,
    ) -> &'static str {
        let mark = MARK.with(|m| m.replace(saved.outer));
        if saved.measured {
            if mark.outcome.is_some() {
                self.mark.outcome = mark.outcome;
            }
            self.mark.retries = self.mark.retries.saturating_add(mark.retries);
            if let Poll::Ready(output) = poll {
                let outcome = if output.succeeded() {
                    CallOutcome::Ok
                } else {
                    self.mark.outcome.unwrap_or(CallOutcome::Failed)
                };
                let took = self.started.map(|s| s.elapsed()).unwrap_or_default();
                if instruments::ON {
                    let metrics = metrics(calls);
                    if metrics.live {
                        metrics.ended(outcome, took, self.mark.retries.saturating_add(1));
                    }
                }
                if recording() {
                    calls.measure.stats.ended(outcome, took);
                }
            }
        }
        if !instruments::ON {
            return "_OTHER";
        }
        match mark.outcome.or(self.mark.outcome) {
            Some(CallOutcome::Refused(kind)) => kind.as_str(),
            Some(CallOutcome::Expired) => "deadline_exceeded",
            _ => "_OTHER",
        }
    }
}
