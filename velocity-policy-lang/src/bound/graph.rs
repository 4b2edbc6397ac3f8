//! Which operation calls which: seen in the code, observed at run time, or both.

use std::collections::BTreeSet;
use std::fmt;

use crate::source::Loc;

/// How a call between two operations is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Seen {
    /// In the code: an annotated function's body calls another annotated function (by path
    /// or by name: what the syntax shows, not what the compiler resolved).
    Static,
    /// At run time: a running service saw the call (its parent operation was being polled
    /// when the child started), and the code does not show it (a call through a closure, a
    /// trait object, a function of another crate).
    Observed,
    /// Both in the code and at run time.
    Both,
}

impl Seen {
    /// `static`, `observed` or `both`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Static => "static",
            Self::Observed => "observed",
            Self::Both => "both",
        }
    }

    fn with(self, other: Seen) -> Seen {
        if self == other { self } else { Seen::Both }
    }
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One call: `parent`'s body calls `child`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Edge {
    /// The calling operation.
    pub parent: String,
    /// The called operation.
    pub child: String,
    /// How the call is known.
    pub seen: Seen,
    /// Its place among the parent's calls in the parent's body (0 first), when the code shows
    /// it; calls only observed have none and come after the others.
    pub order: Option<u32>,
    /// Where the code calls it, when the code shows it (a location in a source the caller
    /// added to its [`Sources`](crate::Sources)).
    pub site: Option<Loc>,
}

/// An operation a running service saw called with no annotated operation above it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Entry {
    /// The operation.
    pub operation: String,
    /// Whether a deadline (a `DeadlineLayer`'s, or one the caller put in scope) was in scope
    /// when it was called; an operation seen both ways counts as without.
    pub under_deadline: bool,
}

/// The calls between operations, and the operations the code or the run knows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Graph {
    operations: BTreeSet<String>,
    edges: Vec<Edge>,
    entries: Vec<Entry>,
}

impl Graph {
    /// No operations, no calls.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `operation` (an annotated function the code declares, or one a service ran),
    /// calling nothing yet.
    pub fn add_operation(&mut self, operation: &str) {
        if !self.operations.contains(operation) {
            self.operations.insert(operation.to_owned());
        }
    }

    fn add(
        &mut self,
        parent: &str,
        child: &str,
        seen: Seen,
        order: Option<u32>,
        site: Option<Loc>,
    ) {
        self.add_operation(parent);
        self.add_operation(child);
        if let Some(edge) = self
            .edges
            .iter_mut()
            .find(|edge| edge.parent == parent && edge.child == child)
        {
            edge.seen = edge.seen.with(seen);
            edge.order = match (edge.order, order) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            edge.site = edge.site.or(site);
            return;
        }
        self.edges.push(Edge {
            parent: parent.to_owned(),
            child: child.to_owned(),
            seen,
            order,
            site,
        });
    }

    /// `parent`'s body calls `child`, as its `order`th call (0 first), at `site`.
    pub fn add_static(&mut self, parent: &str, child: &str, order: u32, site: Option<Loc>) {
        self.add(parent, child, Seen::Static, Some(order), site);
    }

    /// A running service saw `parent` call `child`.
    pub fn add_observed(&mut self, parent: &str, child: &str) {
        self.add(parent, child, Seen::Observed, None, None);
    }

    /// A running service saw `operation` called with no annotated operation above it, with a
    /// deadline in scope or not.
    pub fn add_entry(&mut self, operation: &str, under_deadline: bool) {
        self.add_operation(operation);
        if let Some(entry) = self.entries.iter_mut().find(|e| e.operation == operation) {
            entry.under_deadline &= under_deadline;
            return;
        }
        self.entries.push(Entry {
            operation: operation.to_owned(),
            under_deadline,
        });
    }

    /// Every operation, by name.
    pub fn operations(&self) -> impl Iterator<Item = &str> {
        self.operations.iter().map(String::as_str)
    }

    /// Every call, in the order added.
    #[must_use]
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// The observed entry points, in the order added.
    #[must_use]
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether nothing is known: no operation, no call.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// `parent`'s calls, in call order: the ones the code shows by their place, then the ones
    /// only observed, by name.
    pub fn calls_of(&self, parent: &str) -> Vec<&Edge> {
        let mut calls: Vec<&Edge> = self.edges.iter().filter(|e| e.parent == parent).collect();
        calls.sort_by(|a, b| {
            (a.order.is_none(), a.order, &a.child).cmp(&(b.order.is_none(), b.order, &b.child))
        });
        calls
    }

    /// The operations that call `child`.
    pub fn callers_of<'a>(&'a self, child: &'a str) -> impl Iterator<Item = &'a Edge> + 'a {
        self.edges.iter().filter(move |e| e.child == child)
    }
}
