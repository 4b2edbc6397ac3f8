//! The observed tree, composed: the calls a running service saw between its annotated
//! operations, with the numbers in force in its registry, through `velocity-policy-lang`'s
//! [`bound`](velocity_policy_lang::bound) (the one place the composition lives).
//!
//! Each operation's numbers come from the registry: its deadline and minimum budget in force
//! (overrides included), the retry and hedge its function declared (with their numbers in
//! force), and the request's budget from the `DeadlineLayer`s built. What only the code shows
//! (deferred work handed over, calls not yet made) is `policy explain`'s: a tree here has the
//! calls this instance made.

use std::time::Duration;

use serde_json::{Value, json};
use velocity_policy_lang::bound::{
    Budget, Composition, Finding, Graph, HedgeBudget, Model, NOWHERE, Node, RetryBudget, Tree,
    compose,
};
use velocity_policy_model::WorkClass;

use crate::Deadline;
use crate::registry::{Registry, Snapshot};

/// The calls `snapshot` saw, as a graph of observed calls and entry points, and the numbers in
/// force in `registry` for each operation of it (its deadline, minimum budget, retry and
/// hedge; the request's budget from the `DeadlineLayer`s built): what the dashboard composes
/// its trees from. A service with its compiled model at hand may compose the same graph with
/// that model instead ([`velocity_policy_lang::bound::compose`]), as the demo's report does.
///
/// ```
/// use velocity_policy_runtime::Registry;
/// use velocity_policy_runtime::dashboard::observed;
///
/// let registry = Registry::new();
/// let (model, graph) = observed(&registry.snapshot(), &registry);
/// assert!(graph.is_empty());
/// assert!(model.budgets().next().is_none());
/// ```
pub fn observed(snapshot: &Snapshot, registry: &Registry) -> (Model, Graph) {
    let mut graph = Graph::new();
    for edge in &snapshot.calls.edges {
        match edge.parent {
            Some(parent) => graph.add_observed(parent, edge.child),
            None => graph.add_entry(edge.child, edge.under_deadline.unwrap_or(false)),
        }
    }
    let mut model = Model::new();
    if let Some(budget) = snapshot.calls.request_budget {
        model.set_request_deadline(budget, NOWHERE);
    }
    if let Some(min) = snapshot.calls.request_min_budget.filter(|m| !m.is_zero()) {
        model.set_request_min_budget(min, NOWHERE);
    }
    let operations: Vec<String> = graph.operations().map(str::to_owned).collect();
    for operation in operations {
        model.insert(budget_of(&operation, snapshot, registry));
    }
    (model, graph)
}

/// One operation's numbers in force: its deadline and minimum budget, and the retry and hedge
/// its function declared.
fn budget_of(operation: &str, snapshot: &Snapshot, registry: &Registry) -> Budget {
    let mut budget = Budget::new(operation, WorkClass::Critical, NOWHERE);
    let deadlines = snapshot
        .operations
        .iter()
        .filter(|o| &*o.display_name == operation);
    let deadline = deadlines
        .clone()
        .map(|o| o.deadline)
        .filter(|d| *d < Deadline::MAX_BUDGET)
        .max();
    if let Some(deadline) = deadline {
        budget = budget.deadline(deadline, NOWHERE);
    }
    if let Some(min) = deadlines
        .map(|o| o.min_budget)
        .filter(|m| !m.is_zero())
        .min()
    {
        budget = budget.min_budget(min, NOWHERE);
    }
    for origin in registry.declaring(operation) {
        if let Some(retry) = registry
            .used_by(&origin, "retry policy")
            .first()
            .and_then(|name| registry.find_retry(name))
        {
            let numbers = retry.numbers();
            let backoff = numbers.backoff;
            budget = budget.retry(RetryBudget::new(
                retry.name(),
                numbers.attempts,
                numbers.attempt_timeout,
                (1..numbers.attempts)
                    .map(|k| backoff.max_delay_after(k))
                    .collect(),
            ));
        }
        if let Some(hedge) = registry
            .used_by(&origin, "hedge")
            .first()
            .and_then(|name| registry.find_hedge(name))
        {
            let after = hedge.configured_delay().fixed();
            budget = budget.hedge(HedgeBudget::new(hedge.name(), hedge.max(), after));
        }
    }
    budget
}

fn millis(duration: Option<Duration>) -> Value {
    duration.map_or(Value::Null, |d| json!(d.as_secs_f64() * 1000.0))
}

fn node_json(node: &Node) -> Value {
    json!({
        "operation": node.operation,
        "seen": node.seen.map(|s| s.as_str()),
        "deadline_ms": millis(node.deadline),
        "attempts": node.attempts,
        "bound_ms": millis(node.bound),
        "alone_ms": millis(node.alone),
        "cycle": node.cycle,
        "unknown": node.unknown,
        "truncated": node.truncated,
        "children": node.children.iter().map(node_json).collect::<Vec<_>>(),
    })
}

fn tree_json(tree: &Tree) -> Value {
    json!({
        "entry": tree.entry(),
        "request_ms": millis(tree.request),
        "under_deadline": tree.under_deadline,
        "bound_ms": millis(tree.bound),
        "tightest": tree.tightest,
        "alone_ms": millis(tree.alone),
        "sum": tree.sum,
        "difference_ms": millis(tree.difference()),
        "root": node_json(&tree.root),
        "paths": tree.paths.iter().map(|path| json!({
            "operations": path.operations,
            "bound_ms": millis(path.bound),
            "tightest": path.tightest,
            "alone_ms": millis(path.alone),
            "sum": path.sum,
            "difference_ms": millis(path.difference()),
        })).collect::<Vec<_>>(),
    })
}

fn finding_json(finding: &Finding) -> Value {
    json!({
        "code": finding.code(),
        "operation": finding.operation,
        "message": finding.message(),
        "help": finding.help(),
    })
}

/// The `tree` field of the dashboard's JSON: every observed tree with both worst cases, and
/// the findings.
pub(crate) fn json(snapshot: &Snapshot, registry: &Registry) -> Value {
    let (model, graph) = observed(snapshot, registry);
    let composition: Composition = compose(&model, &graph);
    json!({
        "trees": composition.trees.iter().map(tree_json).collect::<Vec<_>>(),
        "findings": composition.findings.iter().map(finding_json).collect::<Vec<_>>(),
    })
}
