//! The request's bound: each entry point's tree of operations, and its worst case composed.
//!
//! [`explain`](crate::explain) says what one operation does and how long it can take alone.
//! This module puts the operations together the way the code calls them: a [`Graph`] of calls
//! (what the code says, seen [statically](Seen::Static) in the annotated functions' bodies, and
//! what a running service [observed](Seen::Observed)), numbers for each operation (a [`Model`],
//! from the compiled policy with the overrides in force, or from a running registry), and
//! [`compose`] gives one [`Tree`] per entry point with both worst cases, per path, and the
//! [`Finding`]s that the tree shows and no single operation does.
//!
//! # Reading a tree
//!
//! An **entry point** is an operation no other operation calls within its budget: a route's
//! handler behind the `DeadlineLayer`, a task, or deferred and background work (which runs after
//! the response, on a deadline of its own). Its tree holds every operation it runs, nested as
//! they call each other. A deferred or background operation a tree hands work to is listed
//! under it, marked *after the response*, and is the entry point of a tree of its own: it is
//! never part of the request's bound.
//!
//! Each tree has two worst cases:
//!
//! * **with deadline propagation**: every operation takes a child of its parent's deadline (the
//!   clamp: a child is granted the smaller of what it asks and what its parent has left), so
//!   the whole tree is bounded by its entry point's bound: the request's deadline for critical
//!   work, or the tightest parent. A node's bound is the smaller of its own (its deadline, or its
//!   attempts' sum when that is smaller) and what its parent can give it: the parent's bound, or
//!   the parent's attempt timeout when the parent retries.
//! * **if each timeout stood alone**: every operation waits out its own window, and the windows
//!   add up. An operation's window is its attempt timeout, else its deadline, else (critical
//!   work) the request's; the operations it calls add to each of its attempts, and an attempt
//!   runs once more per retry and is stretched by its hedges, as in [`explain`](crate::explain):
//!   `N × (t + children + (M - 1) × H) + backoffs`. The request's own deadline is not part of
//!   the sum: it is what propagation enforces. A cycle makes it unbounded.
//!
//! Both are also given per **path**, from the entry point to each operation that calls no other:
//! the path's bound with propagation is its tightest deadline, and its sum nests the attempts of
//! every operation above. The difference between the two is what propagation saves.
//!
//! # Findings
//!
//! | code | what it means | the fix |
//! |---|---|---|
//! | `policy::explain::child-never-fits` (warning) | an operation's deadline, or its attempts' sum, is longer than every parent that calls it can ever give it: clamped at run time in silence | lower the child's deadline or attempts to what the parent gives, or raise the parent's |
//! | `policy::explain::attempts-exceed-deadline` (warning) | a retry's attempts × its attempt timeout exceed its operation's deadline: the last attempts never get their full timeout | fewer attempts, a shorter attempt timeout, or a longer deadline |
//! | `policy::explain::no-min-budget` (warning) | an operation without a minimum useful budget, under a parent that can leave it a fraction of a millisecond (the parent retries, calls something before it, or may itself start with almost nothing) | give it a `min_budget` |
//! | `policy::explain::no-request-deadline` (warning) | an entry point of critical work with no request deadline above it: no `request` stanza, or a call observed with no deadline in scope | declare `request { deadline = ... }` and put the `DeadlineLayer` on the routes |
//! | `policy::explain::call-cycle` (warning) | an operation calls itself, directly or through others: with propagation the cycle stays within its deadline; each timeout alone, it has no bound | break the cycle, or keep every round under one deadline |
//!
//! ```
//! use std::time::Duration;
//! use velocity_policy_lang::PolicySet;
//! use velocity_policy_lang::bound::{Graph, Model, compose};
//!
//! let mut set = PolicySet::new();
//! set.add_source(
//!     "shop.policy",
//!     b"request { deadline = 5s; min_budget = 20ms }
//! operation checkout: critical { deadline = 2s; min_budget = 50ms }
//! operation charge: critical { deadline = 1s; min_budget = 10ms }
//! ",
//! );
//! let model = Model::from_spec(set.spec());
//! let mut graph = Graph::new();
//! graph.add_static("checkout", "charge", 0, None);
//! let composed = compose(&model, &graph);
//! let tree = &composed.trees[0];
//! assert_eq!(tree.entry(), "checkout");
//! assert_eq!(tree.bound, Some(Duration::from_secs(2)));
//! assert_eq!(tree.alone, Some(Duration::from_secs(3)));
//! assert!(composed.findings.is_empty());
//! ```

mod findings;
mod graph;
mod model;
mod render;

use std::collections::BTreeMap;
use std::time::Duration;

pub use findings::{Finding, FindingKind};
pub use graph::{Edge, Entry, Graph, Seen};
pub use model::{Budget, HedgeBudget, Model, NOWHERE, RequestBudget, RetryBudget};

use crate::spec::WorkClass;
use crate::units::format_duration;

/// Nodes one tree may hold: a graph whose paths multiply past this is cut, and the cut node
/// says so ([`Node::truncated`]).
pub const MAX_TREE_NODES: usize = 4096;

/// Paths listed per tree; the rest are counted ([`Tree::paths_left_out`]).
pub const MAX_PATHS: usize = 256;

/// One operation in a tree, where its parent calls it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Node {
    /// The operation.
    pub operation: String,
    /// How the call from its parent was seen (`None` for the entry point).
    pub seen: Option<Seen>,
    /// Its class, if the model knows the operation.
    pub class: Option<WorkClass>,
    /// Its own deadline, if any (not clamped).
    pub deadline: Option<Duration>,
    /// Its attempts (1 without retry).
    pub attempts: u32,
    /// Its bound with deadline propagation, here: the smaller of its own and what its parent
    /// can give it (`None`: unbounded).
    pub bound: Option<Duration>,
    /// What its subtree can take if each timeout stood alone (`None`: unbounded).
    pub alone: Option<Duration>,
    /// Deferred or background work it hands over: runs after the response, outside this
    /// tree's bound (its own tree has it).
    pub after_response: bool,
    /// Called again on its own path: a cycle, not expanded again.
    pub cycle: bool,
    /// Isolated CPU work: waited for within its caller's deadline, no window of its own.
    pub isolated: bool,
    /// The model has no numbers for it.
    pub unknown: bool,
    /// Not expanded: the tree reached [`MAX_TREE_NODES`].
    pub truncated: bool,
    /// What it calls, in call order where known.
    pub children: Vec<Node>,
}

/// One path from an entry point down to an operation that calls no other.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Path {
    /// The operations, the entry point first.
    pub operations: Vec<String>,
    /// Its bound with deadline propagation: the tightest deadline on it (`None`: unbounded).
    pub bound: Option<Duration>,
    /// What sets that bound: `request`, or an operation of the path.
    pub tightest: Option<String>,
    /// Its worst case if each timeout stood alone (`None`: unbounded).
    pub alone: Option<Duration>,
    /// How that sum adds up.
    pub sum: String,
}

impl Path {
    /// What propagation saves on this path: the sum less the bound (`None` when either is
    /// unbounded).
    #[must_use]
    pub fn difference(&self) -> Option<Duration> {
        Some(self.alone?.saturating_sub(self.bound?))
    }
}

/// One entry point's tree, with both worst cases.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Tree {
    /// The entry point and everything it runs.
    pub root: Node,
    /// The request's deadline above it (critical work with a `request` stanza or a model that
    /// knows one; `None` otherwise).
    pub request: Option<Duration>,
    /// Whether a running service called the entry point with a deadline in scope (`None`: not
    /// observed).
    pub under_deadline: Option<bool>,
    /// The worst case with deadline propagation (`None`: unbounded).
    pub bound: Option<Duration>,
    /// What sets it: `request`, or the entry point.
    pub tightest: Option<String>,
    /// The worst case if each timeout stood alone (`None`: unbounded).
    pub alone: Option<Duration>,
    /// How that sum adds up: `2s + 100ms + 1s`.
    pub sum: String,
    /// Every path, in call order (at most [`MAX_PATHS`]).
    pub paths: Vec<Path>,
    /// Paths beyond [`MAX_PATHS`], not listed.
    pub paths_left_out: usize,
}

impl Tree {
    /// The entry point's operation.
    #[must_use]
    pub fn entry(&self) -> &str {
        &self.root.operation
    }

    /// What propagation saves on the whole tree.
    #[must_use]
    pub fn difference(&self) -> Option<Duration> {
        Some(self.alone?.saturating_sub(self.bound?))
    }

    /// The node of `operation`, the first met in call order.
    #[must_use]
    pub fn find(&self, operation: &str) -> Option<&Node> {
        fn walk<'a>(node: &'a Node, operation: &str) -> Option<&'a Node> {
            if node.operation == operation {
                return Some(node);
            }
            node.children.iter().find_map(|c| walk(c, operation))
        }
        walk(&self.root, operation)
    }
}

/// What [`compose`] found: one tree per entry point, and what is wrong in them.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Composition {
    /// One tree per entry point: observed entry points first, then the rest by name.
    pub trees: Vec<Tree>,
    /// What the trees show, each with a code and its fix, in the order found.
    pub findings: Vec<Finding>,
}

impl Composition {
    /// The tree whose entry point is `operation`.
    #[must_use]
    pub fn tree(&self, operation: &str) -> Option<&Tree> {
        self.trees.iter().find(|tree| tree.entry() == operation)
    }
}

/// One operation's numbers as the composition uses them.
#[derive(Debug, Clone, Copy)]
struct Window {
    attempts: u32,
    /// One attempt's own window alone: attempt timeout, else deadline, else the request's
    /// (critical work).
    t: Option<Duration>,
    /// The attempt timeout, if the operation retries with one.
    attempt_timeout: Option<Duration>,
    backoffs: Duration,
    /// Extra attempts in flight, and the fixed delay before each (`None`: a percentile, taken
    /// as the attempt itself).
    hedge: Option<(u32, Option<Duration>)>,
    /// Its own bound with propagation: the smaller of its deadline and its attempts' sum.
    own: Option<Duration>,
}

impl Window {
    fn of(budget: &Budget, request: Option<Duration>) -> Self {
        let (attempts, attempt_timeout, backoffs) =
            budget
                .retry
                .as_ref()
                .map_or((1, None, Duration::ZERO), |retry| {
                    (
                        retry.attempts.max(1),
                        retry.attempt_timeout,
                        retry
                            .backoffs
                            .iter()
                            .fold(Duration::ZERO, |sum, b| sum.saturating_add(*b)),
                    )
                });
        let deadline = budget.deadline.as_ref().map(|d| d.value);
        let request = match budget.class {
            WorkClass::Critical => request,
            WorkClass::Deferred | WorkClass::Background => None,
        };
        let t = attempt_timeout.or(deadline).or(request);
        let hedge = budget
            .hedge
            .as_ref()
            .filter(|hedge| hedge.max > 1)
            .map(|hedge| (hedge.max - 1, hedge.after));
        let mut window = Self {
            attempts,
            t,
            attempt_timeout,
            backoffs,
            hedge,
            own: None,
        };
        let sum = window.alone_with(Some(Duration::ZERO));
        window.own = min_opt(deadline, sum);
        window
    }

    /// `N × (t + children, hedged) + backoffs`, `None` when anything in it is unbounded.
    fn alone_with(&self, children: Option<Duration>) -> Option<Duration> {
        let attempt = self.t?.saturating_add(children?);
        let hedged = match self.hedge {
            Some((extra, after)) => {
                attempt.saturating_add(after.unwrap_or(attempt).saturating_mul(extra))
            }
            None => attempt,
        };
        Some(
            hedged
                .saturating_mul(self.attempts)
                .saturating_add(self.backoffs),
        )
    }

    /// What a child can be given at most inside one of this operation's attempts, when the
    /// operation itself has `bound`.
    fn capacity(&self, bound: Option<Duration>) -> Option<Duration> {
        min_opt(bound, self.attempt_timeout)
    }

    /// `N × (t + children)` as text.
    fn sum_text(&self, children: &[String]) -> String {
        let Some(t) = self.t else {
            return "no timeout".to_owned();
        };
        let mut inner = std::iter::once(format_duration(t))
            .chain(children.iter().cloned())
            .collect::<Vec<_>>()
            .join(" + ");
        if let Some((extra, after)) = self.hedge {
            let h = after.map_or_else(|| "the attempt".to_owned(), format_duration);
            let hedges = if extra == 1 {
                h
            } else {
                format!("{extra} × {h}")
            };
            inner = format!("{} + {hedges} hedged", parenthesised(&inner));
        }
        let mut text = if self.attempts > 1 {
            format!("{} × {}", self.attempts, parenthesised(&inner))
        } else {
            inner
        };
        if !self.backoffs.is_zero() {
            text.push_str(&format!(" + {}", format_duration(self.backoffs)));
        }
        text
    }
}

/// `text` in parentheses when it is a sum not already in them (`a + b` becomes `(a + b)`).
fn parenthesised(text: &str) -> String {
    let mut depth = 0usize;
    let mut top_level_sum = false;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '+' if depth == 0 && text[..i].ends_with(' ') => top_level_sum = true,
            _ => {}
        }
    }
    if top_level_sum {
        format!("({text})")
    } else {
        text.to_owned()
    }
}

fn min_opt(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Composes the trees of `graph` with the numbers of `model`, and finds what is wrong in them.
#[must_use]
pub fn compose(model: &Model, graph: &Graph) -> Composition {
    let builder = Builder::new(model, graph);
    let mut trees = Vec::new();
    for (entry, under_deadline) in builder.entries() {
        trees.push(builder.tree(&entry, under_deadline));
    }
    let findings = findings::find(model, graph, &builder, &trees);
    Composition { trees, findings }
}

/// What composing needs at hand: the numbers, and each operation's calls.
pub(crate) struct Builder<'a> {
    model: &'a Model,
    graph: &'a Graph,
    windows: BTreeMap<&'a str, Window>,
}

impl<'a> Builder<'a> {
    fn new(model: &'a Model, graph: &'a Graph) -> Self {
        let request = model.request.deadline.as_ref().map(|d| d.value);
        let windows = model
            .budgets()
            .map(|budget| (budget.operation.as_str(), Window::of(budget, request)))
            .collect();
        Self {
            model,
            graph,
            windows,
        }
    }

    fn class(&self, operation: &str) -> Option<WorkClass> {
        self.model.get(operation).map(|budget| budget.class)
    }

    /// Whether calling `child` hands work over (deferred, background) instead of waiting.
    pub(crate) fn hands_over(&self, child: &str) -> bool {
        matches!(
            self.class(child),
            Some(WorkClass::Deferred | WorkClass::Background)
        )
    }

    /// Every entry point: the observed ones, then every operation of the graph that no
    /// operation calls within its budget, and every deferred or background one, by name.
    fn entries(&self) -> Vec<(String, Option<bool>)> {
        let mut entries: Vec<(String, Option<bool>)> = Vec::new();
        for entry in self.graph.entries() {
            if !entries.iter().any(|(name, _)| name == &entry.operation) {
                entries.push((entry.operation.clone(), Some(entry.under_deadline)));
            }
        }
        for operation in self.graph.operations() {
            if entries.iter().any(|(name, _)| name == operation) {
                continue;
            }
            let called = self
                .graph
                .edges()
                .iter()
                .any(|edge| edge.child == operation && !self.hands_over(&edge.child));
            if !called || self.hands_over(operation) {
                entries.push((operation.to_owned(), None));
            }
        }
        entries
    }

    fn tree(&self, entry: &str, under_deadline: Option<bool>) -> Tree {
        let request = match self.class(entry) {
            Some(WorkClass::Critical) | None => {
                self.model.request.deadline.as_ref().map(|d| d.value)
            }
            Some(_) => None,
        };
        let mut budget_left = MAX_TREE_NODES;
        let mut path = Vec::new();
        let root = self.node(entry, None, request, &mut path, &mut budget_left);
        let tightest = match (request, self.windows.get(entry).and_then(|w| w.own)) {
            (Some(r), Some(own)) if r < own => Some("request".to_owned()),
            (Some(_), None) => Some("request".to_owned()),
            (_, Some(_)) => Some(entry.to_owned()),
            (None, None) => None,
        };
        let mut paths = Vec::new();
        let mut left_out = 0;
        self.paths(&root, request, &mut Vec::new(), &mut paths, &mut left_out);
        Tree {
            bound: root.bound,
            tightest: root.bound.and(tightest),
            alone: root.alone,
            sum: self.sum(&root),
            request,
            under_deadline,
            root,
            paths,
            paths_left_out: left_out,
        }
    }

    /// The node of `operation` called with `capacity` at most (its parent's), on `path`.
    fn node(
        &self,
        operation: &str,
        seen: Option<Seen>,
        capacity: Option<Duration>,
        path: &mut Vec<String>,
        budget_left: &mut usize,
    ) -> Node {
        *budget_left = budget_left.saturating_sub(1);
        let budget = self.model.get(operation);
        let window = self.windows.get(operation).copied();
        let mut node = Node {
            operation: operation.to_owned(),
            seen,
            class: budget.map(|b| b.class),
            deadline: budget.and_then(|b| b.deadline.as_ref().map(|d| d.value)),
            attempts: window.map_or(1, |w| w.attempts),
            bound: None,
            alone: None,
            after_response: seen.is_some() && self.hands_over(operation),
            cycle: path.iter().any(|p| p == operation),
            isolated: budget.is_some_and(|b| b.isolated),
            unknown: budget.is_none(),
            truncated: false,
            children: Vec::new(),
        };
        if node.after_response {
            node.bound = window.and_then(|w| w.own);
            return node;
        }
        node.bound = match window {
            Some(w) if !node.isolated => min_opt(capacity, w.own),
            _ => capacity,
        };
        if node.cycle {
            return node;
        }
        if *budget_left == 0 {
            node.truncated = true;
            return node;
        }
        let inner = window.map_or(node.bound, |w| w.capacity(node.bound));
        path.push(operation.to_owned());
        for edge in self.graph.calls_of(operation) {
            if *budget_left == 0 {
                node.truncated = true;
                break;
            }
            let child = self.node(&edge.child, Some(edge.seen), inner, path, budget_left);
            node.children.push(child);
        }
        path.pop();
        node.alone = self.alone(&node, window);
        node
    }

    /// What `node`'s subtree takes if each timeout stood alone.
    fn alone(&self, node: &Node, window: Option<Window>) -> Option<Duration> {
        if node.cycle || node.truncated {
            return None;
        }
        let children = node
            .children
            .iter()
            .filter(|c| !c.after_response)
            .try_fold(Duration::ZERO, |sum, c| Some(sum.saturating_add(c.alone?)));
        if node.isolated {
            // Waited for within the caller's window: nothing of its own to add.
            return children;
        }
        window?.alone_with(children)
    }

    /// How `node`'s alone sum adds up.
    fn sum(&self, node: &Node) -> String {
        if node.cycle {
            return format!("`{}` again: no bound", node.operation);
        }
        if node.truncated {
            return "too many calls to add up".to_owned();
        }
        // Isolated work that calls nothing adds nothing of its own: left out of the text.
        let children: Vec<String> = node
            .children
            .iter()
            .filter(|c| !(c.after_response || (c.isolated && c.children.is_empty())))
            .map(|c| parenthesised(&self.sum(c)))
            .collect();
        if node.isolated {
            return if children.is_empty() {
                "0s".to_owned()
            } else {
                children.join(" + ")
            };
        }
        match self.windows.get(node.operation.as_str()) {
            Some(window) => window.sum_text(&children),
            None => format!("`{}`: no numbers", node.operation),
        }
    }

    /// Every path under `node`, which `above` leads to.
    fn paths(
        &self,
        node: &Node,
        request: Option<Duration>,
        above: &mut Vec<String>,
        out: &mut Vec<Path>,
        left_out: &mut usize,
    ) {
        let children: Vec<&Node> = node.children.iter().filter(|c| !c.after_response).collect();
        if children.is_empty() {
            if out.len() >= MAX_PATHS {
                *left_out += 1;
                return;
            }
            let mut operations = above.clone();
            operations.push(node.operation.clone());
            out.push(self.path(operations, node, request));
            return;
        }
        above.push(node.operation.clone());
        for child in children {
            self.paths(child, request, above, out, left_out);
        }
        above.pop();
    }

    fn path(&self, operations: Vec<String>, leaf: &Node, request: Option<Duration>) -> Path {
        // Its bound: the leaf's bound, which already holds every clamp above it; what sets it
        // is the request, an operation's own bound, or a parent's attempt timeout.
        let bound = leaf.bound;
        let tightest = bound.and_then(|bound| {
            if request == Some(bound) {
                return Some("request".to_owned());
            }
            let own = operations.iter().find(|op| {
                !self.model.get(op).is_some_and(|b| b.isolated)
                    && self.window_own(op) == Some(bound)
            });
            let attempt = || {
                operations[..operations.len().saturating_sub(1)]
                    .iter()
                    .find(|op| {
                        self.windows
                            .get(op.as_str())
                            .and_then(|w| w.attempt_timeout)
                            == Some(bound)
                    })
            };
            own.or_else(attempt).cloned()
        });
        // Its sum: innermost first, each operation's attempts around what is below it.
        let mut alone = Some(Duration::ZERO);
        let mut sum = String::new();
        for (i, op) in operations.iter().enumerate().rev() {
            let is_leaf = i + 1 == operations.len();
            if is_leaf && (leaf.cycle || leaf.truncated) {
                alone = None;
                sum = format!("`{op}` again: no bound");
                continue;
            }
            if self.model.get(op).is_some_and(|b| b.isolated) {
                continue;
            }
            match self.windows.get(op.as_str()) {
                Some(window) => {
                    alone = alone.and_then(|below| window.alone_with(Some(below)));
                    let below: Vec<String> = if sum.is_empty() {
                        Vec::new()
                    } else {
                        vec![parenthesised(&sum)]
                    };
                    sum = window.sum_text(&below);
                }
                None => {
                    alone = None;
                    sum = format!("`{op}`: no numbers");
                }
            }
        }
        Path {
            operations,
            bound,
            tightest,
            alone,
            sum,
        }
    }

    /// The window of `operation`, if the model knows it.
    pub(crate) fn window_own(&self, operation: &str) -> Option<Duration> {
        self.windows.get(operation).and_then(|w| w.own)
    }

    /// What `operation`, with `bound` of its own here, can give each child.
    pub(crate) fn capacity_of(&self, operation: &str, bound: Option<Duration>) -> Option<Duration> {
        match self.windows.get(operation) {
            Some(window) => window.capacity(bound),
            None => bound,
        }
    }
}

#[cfg(test)]
mod tests;
