//! The calls a running service saw between annotated operations: the observed tree's edges,
//! recorded once per (caller, operation) and bounded.
//!
//! Each [`Traced`](crate::__macro_support::Traced) call notes, at its first poll, the operation being
//! polled on its thread (its caller), or that there was none (an entry point, with a deadline in
//! scope or not). Its operation's [`Calls`] remembers the first callers in slots of its own,
//! so only the first call from each caller reaches here; the table holds at most
//! [`MAX_EDGES`] edges, and an edge past that is counted in
//! [`CallsSnapshot::dropped`](CallsSnapshot::dropped) and logged (once at WARN, then DEBUG),
//! never stored.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::calls::Calls;

/// Edges the table holds at most (a program's operations are few; a table past this is a
/// program calling operations through names it makes up, which the registry never stores).
pub const MAX_EDGES: usize = 1024;

/// The caller of an entry point with a deadline in scope (a `DeadlineLayer`'s, or one the
/// caller scoped): no annotated operation above it.
const ENTRY_UNDER_DEADLINE: &str = "(entry, under a deadline)";
/// The caller of an entry point with no deadline in scope.
const ENTRY: &str = "(entry, no deadline)";

/// The caller an entry point is noted with.
pub(crate) fn entry_caller(under_deadline: bool) -> &'static str {
    if under_deadline {
        ENTRY_UNDER_DEADLINE
    } else {
        ENTRY
    }
}

/// What an edge's caller is: an operation, or none (an entry point).
fn caller_of(parent: &'static str) -> (Option<&'static str>, Option<bool>) {
    if std::ptr::eq(parent, ENTRY_UNDER_DEADLINE) || parent == ENTRY_UNDER_DEADLINE {
        (None, Some(true))
    } else if std::ptr::eq(parent, ENTRY) || parent == ENTRY {
        (None, Some(false))
    } else {
        (Some(parent), None)
    }
}

/// The table: edges by (caller, operation), and each operation's calls seen.
#[derive(Default)]
pub(crate) struct CallTable {
    edges: BTreeMap<(&'static str, &'static str), ()>,
    operations: Vec<&'static Calls>,
    dropped: u64,
    /// The request's budget and minimum, as the `DeadlineLayer`s built say (the largest
    /// budget, the smallest minimum: the worst case over the routes).
    request: Option<(Duration, Duration)>,
}

impl CallTable {
    /// Whether the edge is known.
    pub(crate) fn knows(&self, parent: &'static str, child: &'static str) -> bool {
        self.edges.contains_key(&(parent, child))
    }

    /// Records the edge, or counts it when the table is full; true when it was dropped.
    pub(crate) fn insert(&mut self, parent: &'static str, calls: &'static Calls) -> bool {
        let child = calls.operation();
        if !self.operations.iter().any(|c| std::ptr::eq(*c, calls)) {
            self.operations.push(calls);
        }
        if self.edges.contains_key(&(parent, child)) {
            return false;
        }
        if self.edges.len() >= MAX_EDGES {
            self.dropped = self.dropped.saturating_add(1);
            return true;
        }
        self.edges.insert((parent, child), ());
        false
    }

    /// Edges counted past [`MAX_EDGES`].
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Every operation's calls seen.
    #[cfg_attr(
        not(feature = "dashboard"),
        expect(dead_code, reason = "the dashboard's history reads them")
    )]
    pub(crate) fn operations(&self) -> &[&'static Calls] {
        &self.operations
    }

    pub(crate) fn note_request(&mut self, budget: Duration) {
        self.request = Some(match self.request {
            Some((known, min)) => (known.max(budget), min),
            None => (budget, Duration::ZERO),
        });
    }

    pub(crate) fn note_request_min_budget(&mut self, min_budget: Duration) {
        if let Some((budget, min)) = &mut self.request {
            *min = if min.is_zero() {
                min_budget
            } else {
                (*min).min(min_budget)
            };
            let _ = budget;
        }
    }

    pub(crate) fn snapshot(&self) -> CallsSnapshot {
        CallsSnapshot {
            edges: self
                .edges
                .keys()
                .map(|(parent, child)| {
                    let (caller, under_deadline) = caller_of(parent);
                    EdgeSnapshot {
                        parent: caller,
                        child,
                        under_deadline,
                    }
                })
                .collect(),
            dropped: self.dropped,
            request_budget: self.request.map(|(budget, _)| budget),
            request_min_budget: self.request.map(|(_, min)| min),
        }
    }
}

/// The calls between annotated operations a running service saw: the observed tree.
///
/// Serialised as `calls` in the [`Snapshot`](crate::Snapshot): `edges` (each `parent`, the
/// calling operation or `null` for an entry point, `child`, and for an entry point
/// `under_deadline`: whether a deadline was in scope), `dropped` (edges past [`MAX_EDGES`],
/// counted, not stored), and `request_budget_ms` and `request_min_budget_ms` (the largest
/// budget and the smallest minimum of the `DeadlineLayer`s built, `null` with none).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CallsSnapshot {
    /// Each edge seen, by caller then operation.
    pub edges: Vec<EdgeSnapshot>,
    /// Edges seen past [`MAX_EDGES`]: counted, never stored.
    pub dropped: u64,
    /// The largest budget of the `DeadlineLayer`s built in this process (`None`: none).
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "request_budget_ms",
            serialize_with = "crate::json::millis_opt"
        )
    )]
    pub request_budget: Option<Duration>,
    /// The smallest minimum budget of those layers (`None`: none).
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "request_min_budget_ms",
            serialize_with = "crate::json::millis_opt"
        )
    )]
    pub request_min_budget: Option<Duration>,
}

/// One edge of the observed tree.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct EdgeSnapshot {
    /// The operation polled around the call when it started (`None`: an entry point).
    pub parent: Option<&'static str>,
    /// The operation called.
    pub child: &'static str,
    /// For an entry point, whether a deadline was in scope (`None` for a call by an
    /// operation).
    pub under_deadline: Option<bool>,
}

/// The one WARN for a full table, then DEBUG.
pub(crate) fn dropped(parent: &'static str, child: &'static str, count: u64) {
    let (caller, _) = caller_of(parent);
    if count == 1 {
        tracing::warn!(
            target: "policy",
            operation = child,
            mechanism = "calls",
            name = child,
            kind = "edge_dropped",
            reason = "table_full",
            parent = caller,
            max_edges = MAX_EDGES,
            count,
            "the table of calls between operations is full: this call is counted, not stored (said once; the rest at DEBUG)"
        );
    } else {
        tracing::debug!(
            target: "policy",
            operation = child,
            mechanism = "calls",
            name = child,
            kind = "edge_dropped",
            reason = "table_full",
            parent = caller,
            max_edges = MAX_EDGES,
            count,
            "a call between operations not stored: the table is full"
        );
    }
}
