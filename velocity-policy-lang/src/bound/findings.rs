//! What the trees show that no single operation does, each with a code and its fix.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use miette::Severity;

use super::model::NOWHERE;
use super::{Builder, Graph, Model, Node, Seen, Tree};
use crate::diagnostic::{Label, Renderable, Rule};
use crate::source::{Loc, Sources};
use crate::spec::WorkClass;
use crate::units::format_duration;

/// Below this, a budget is "a fraction of a millisecond": too little to finish anything.
const SLIVER: Duration = Duration::from_millis(1);

/// The rule a finding comes from. Each has a stable code (`policy::explain::...`), a one-line
/// message and a help that says the fix; see the table in the [module docs](super).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FindingKind {
    /// A child asks for more than any parent that calls it can ever give it.
    #[error("`{child}`'s {what} never fits in `{parent}`, which can give it at most {capacity}")]
    ChildNeverFits {
        /// The child.
        child: String,
        /// The parent that can give it the most.
        parent: String,
        /// What does not fit: `deadline of 3s`, `3 attempts (3.15s in all)`.
        what: String,
        /// The most that parent can give it.
        capacity: String,
        /// The fix.
        help: String,
    },

    /// A retry whose attempts times its attempt timeout exceed its operation's deadline.
    #[error(
        "retry `{retry}` makes {attempts} attempts of up to {attempt_timeout} ({total}), more than `{operation}`'s deadline of {deadline}"
    )]
    AttemptsExceedDeadline {
        /// The operation.
        operation: String,
        /// Its retry policy.
        retry: String,
        /// Its attempts.
        attempts: u32,
        /// Each attempt's timeout.
        attempt_timeout: String,
        /// Attempts × attempt timeout.
        total: String,
        /// The operation's deadline (clamped by the request's for critical work).
        deadline: String,
    },

    /// An operation without a minimum useful budget, under a parent that can leave it almost
    /// nothing.
    #[error(
        "`{operation}` has no minimum useful budget, and {parent} can leave it a fraction of a millisecond: {why}"
    )]
    NoMinBudget {
        /// The operation.
        operation: String,
        /// `` `save_document` `` or `the request`.
        parent: String,
        /// How the parent can leave it almost nothing.
        why: String,
    },

    /// Critical work at an entry point with no request deadline above it.
    #[error("no request deadline above `{operation}`: {why}")]
    NoRequestDeadline {
        /// The entry point.
        operation: String,
        /// Why: no `request` stanza, or called with no deadline in scope.
        why: String,
        /// The fix.
        help: String,
    },

    /// An operation that calls itself, directly or through others.
    #[error("`{operation}` calls itself{through}")]
    CallCycle {
        /// The operation.
        operation: String,
        /// ` through `b``, or empty for a direct call.
        through: String,
    },
}

impl FindingKind {
    /// Each rule's code, severity and help, beside its message (the `#[error]` above); written
    /// out for the reason [`Kind`](crate::diagnostic::Kind)'s are.
    fn rule(&self) -> Rule {
        match self {
            FindingKind::ChildNeverFits { help, .. } => Rule::warning("policy::explain::child-never-fits", help.clone()),
            FindingKind::AttemptsExceedDeadline { attempt_timeout, deadline, .. } => Rule::warning("policy::explain::attempts-exceed-deadline", format!("the last attempts never get their full {attempt_timeout}: make attempts × attempt_timeout at most {deadline} (fewer attempts or a shorter `attempt_timeout`), or raise the deadline")),
            FindingKind::NoMinBudget { operation, .. } => Rule::warning("policy::explain::no-min-budget", format!("give `{operation}` a `min_budget` (the least time worth starting with, such as `10ms`): with less left it is refused at once, visibly, instead of starting work it cannot finish")),
            FindingKind::NoRequestDeadline { help, .. } => Rule::warning("policy::explain::no-request-deadline", help.clone()),
            FindingKind::CallCycle { .. } => Rule::warning("policy::explain::call-cycle", "with deadline propagation every round takes a child of the same deadline, so the bound holds; each timeout alone, the rounds add up without end: break the cycle, or make sure every round runs under the first one's deadline".to_owned()),
        }
    }
}

impl miette::Diagnostic for FindingKind {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new(self.rule().code))
    }

    fn severity(&self) -> Option<Severity> {
        Some(self.rule().severity)
    }

    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new(self.rule().help))
    }
}

/// One finding: the rule, the operation it concerns, and labels on every place involved that
/// has one (a `.policy` file's setting, or an attribute in a source the caller added).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Finding {
    /// The rule.
    pub kind: FindingKind,
    /// The operation it concerns.
    pub operation: String,
    /// The places involved, primary first.
    pub labels: Vec<Label>,
}

impl Finding {
    fn new(kind: FindingKind, operation: &str) -> Self {
        Self {
            kind,
            operation: operation.to_owned(),
            labels: Vec::new(),
        }
    }

    fn at(mut self, loc: Option<Loc>, text: impl Into<String>) -> Self {
        if let Some(loc) = loc.filter(|loc| *loc != NOWHERE) {
            self.labels.push(Label {
                loc,
                text: text.into(),
            });
        }
        self
    }

    /// The stable code: `policy::explain::child-never-fits`, ...
    #[must_use]
    pub fn code(&self) -> String {
        miette::Diagnostic::code(&self.kind)
            .map(|code| code.to_string())
            .unwrap_or_default()
    }

    /// The one-line message.
    #[must_use]
    pub fn message(&self) -> String {
        self.kind.to_string()
    }

    /// The fix.
    #[must_use]
    pub fn help(&self) -> Option<String> {
        miette::Diagnostic::help(&self.kind).map(|help| help.to_string())
    }

    /// Error or warning (every finding is a warning: the policy is valid, and the runtime
    /// enforces the bound whatever it says).
    #[must_use]
    pub fn severity(&self) -> Severity {
        miette::Diagnostic::severity(&self.kind).unwrap_or(Severity::Warning)
    }

    /// Ready for a miette handler, with the snippets of `sources`.
    #[must_use]
    pub fn renderable<'a>(&'a self, sources: &'a Sources) -> Renderable<'a> {
        Renderable::new(&self.kind, &self.labels, sources)
    }
}

fn ms(d: Duration) -> String {
    format_duration(d)
}

/// Every finding of `trees`, composed from `model` and `graph`.
pub(super) fn find(
    model: &Model,
    graph: &Graph,
    builder: &Builder<'_>,
    trees: &[Tree],
) -> Vec<Finding> {
    let mut out = Vec::new();
    attempts_exceed_deadline(model, &mut out);
    let mut walk = Walk {
        model,
        builder,
        fits: BTreeMap::new(),
        slivers: Vec::new(),
        cycles: Vec::new(),
    };
    for tree in trees {
        let root_sliver = walk.root_sliver(tree);
        let mut path = Vec::new();
        walk.node(&tree.root, root_sliver, &mut path);
    }
    child_never_fits(model, graph, builder, &walk.fits, &mut out);
    for (operation, (parent, why)) in &walk.slivers {
        let budget = model.get(operation);
        out.push(
            Finding::new(
                FindingKind::NoMinBudget {
                    operation: operation.clone(),
                    parent: parent.clone(),
                    why: why.clone(),
                },
                operation,
            )
            .at(budget.map(|b| b.loc), "no `min_budget`")
            .at(
                budget.and_then(|b| b.deadline.as_ref().map(|d| d.loc)),
                "its deadline",
            ),
        );
    }
    no_request_deadline(model, graph, trees, &mut out);
    for (operation, through) in &walk.cycles {
        let through = if through.is_empty() {
            String::new()
        } else {
            format!(
                " through {}",
                through
                    .iter()
                    .map(|op| format!("`{op}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        out.push(
            Finding::new(
                FindingKind::CallCycle {
                    operation: operation.clone(),
                    through,
                },
                operation,
            )
            .at(
                model.get(operation).map(|b| b.loc),
                "called again below itself",
            ),
        );
    }
    out
}

/// `policy::explain::attempts-exceed-deadline`: attempts × attempt timeout past the
/// operation's deadline (clamped by the request's for critical work).
fn attempts_exceed_deadline(model: &Model, out: &mut Vec<Finding>) {
    let request = model.request.deadline.as_ref();
    for budget in model.budgets() {
        let Some(retry) = &budget.retry else { continue };
        let Some(timeout) = retry.attempt_timeout else {
            continue;
        };
        if retry.attempts < 2 {
            continue;
        }
        let own = budget.deadline.as_ref();
        let deadline = match (own, request.filter(|_| budget.class == WorkClass::Critical)) {
            (Some(own), Some(request)) if request.value < own.value => Some(request),
            (own, request) => own.or(request),
        };
        let Some(deadline) = deadline else { continue };
        let total = timeout.saturating_mul(retry.attempts);
        if total <= deadline.value {
            continue;
        }
        out.push(
            Finding::new(
                FindingKind::AttemptsExceedDeadline {
                    operation: budget.operation.clone(),
                    retry: retry.name.clone(),
                    attempts: retry.attempts,
                    attempt_timeout: ms(timeout),
                    total: ms(total),
                    deadline: ms(deadline.value),
                },
                &budget.operation,
            )
            .at(Some(retry.attempts_loc), "attempts")
            .at(Some(retry.loc), "the retry")
            .at(Some(deadline.loc), "the deadline"),
        );
    }
}

/// Where one operation is called: the most any of its parents can give it.
struct Fit {
    /// The most, and the parent that gives it (`None`: a parent with no bound).
    most: Option<(Duration, String)>,
    unbounded: bool,
}

struct Walk<'m, 'b> {
    model: &'m Model,
    builder: &'b Builder<'m>,
    fits: BTreeMap<String, Fit>,
    /// Operations left a sliver, in the order found, with the first parent that can, and how.
    slivers: Vec<(String, (String, String))>,
    /// Operations called again on their own path, in the order found, with the operations in
    /// between.
    cycles: Vec<(String, Vec<String>)>,
}

impl Walk<'_, '_> {
    /// Records that `parent` can leave `operation` a sliver (the first such parent is kept).
    fn starved(&mut self, operation: &str, parent: String, why: String) {
        if !self.slivers.iter().any(|(op, _)| op == operation) {
            self.slivers.push((operation.to_owned(), (parent, why)));
        }
    }

    fn min_budget(&self, operation: &str) -> Duration {
        self.model
            .get(operation)
            .and_then(|b| b.min_budget.as_ref().map(|m| m.value))
            .unwrap_or_default()
    }

    /// Whether the entry point can start with almost nothing: critical work under a request
    /// deadline when neither the request nor the operation has a minimum budget (a caller's
    /// header may leave it any sliver). Recorded as a finding when so.
    fn root_sliver(&mut self, tree: &Tree) -> bool {
        let root = &tree.root;
        let critical = !matches!(
            root.class,
            Some(WorkClass::Deferred | WorkClass::Background)
        );
        let under = tree.request.is_some() || tree.under_deadline == Some(true);
        let request_min = self
            .model
            .request
            .min_budget
            .as_ref()
            .map(|m| m.value)
            .unwrap_or_default();
        let sliver = critical
            && under
            && !root.isolated
            && request_min < SLIVER
            && self.min_budget(&root.operation) < SLIVER;
        if sliver && !root.unknown {
            self.starved(
                &root.operation,
                "the request".to_owned(),
                "the request has no `min_budget`, so a caller's deadline header can leave it any sliver".to_owned(),
            );
        }
        sliver
    }

    fn node(&mut self, node: &Node, starts_sliver: bool, path: &mut Vec<String>) {
        if node.cycle || node.after_response || node.truncated {
            return;
        }
        path.push(node.operation.clone());
        let children: Vec<&Node> = node.children.iter().filter(|c| !c.after_response).collect();
        let capacity = self.builder.capacity_of(&node.operation, node.bound);
        let retries = node.attempts > 1;
        for (index, child) in children.iter().enumerate() {
            if child.cycle {
                let from = path
                    .iter()
                    .position(|op| op == &child.operation)
                    .unwrap_or(0);
                if !self.cycles.iter().any(|(op, _)| op == &child.operation) {
                    self.cycles
                        .push((child.operation.clone(), path[from + 1..].to_vec()));
                }
                continue;
            }
            // What this parent can give it, for `child-never-fits`.
            let fit = self.fits.entry(child.operation.clone()).or_insert(Fit {
                most: None,
                unbounded: false,
            });
            match capacity {
                None => fit.unbounded = true,
                Some(c) => {
                    if fit.most.as_ref().is_none_or(|(most, _)| c > *most) {
                        fit.most = Some((c, node.operation.clone()));
                    }
                }
            }
            // Whether this parent can leave it almost nothing.
            let unordered = child.seen == Some(Seen::Observed) && children.len() > 1;
            let why = if starts_sliver {
                Some(format!(
                    "`{}` may itself start with almost nothing",
                    node.operation
                ))
            } else if retries {
                Some(format!(
                    "`{}` retries, and a later attempt runs on what the earlier ones left",
                    node.operation
                ))
            } else if index > 0 {
                Some(format!(
                    "`{}` calls `{}` before it, on the same budget",
                    node.operation,
                    children[index - 1].operation
                ))
            } else if unordered {
                Some(format!(
                    "`{}` calls others on the same budget, in an order the code does not show",
                    node.operation
                ))
            } else {
                None
            };
            let no_min = self.min_budget(&child.operation) < SLIVER;
            let sliver = no_min && why.is_some() && !child.isolated;
            if let Some(why) = why.filter(|_| sliver && !child.unknown) {
                self.starved(&child.operation, format!("`{}`", node.operation), why);
            }
            self.node(child, sliver, path);
        }
        path.pop();
    }
}

/// `policy::explain::child-never-fits`: a child whose own bound is longer than the most any
/// parent can give it.
fn child_never_fits(
    model: &Model,
    graph: &Graph,
    builder: &Builder<'_>,
    fits: &BTreeMap<String, Fit>,
    out: &mut Vec<Finding>,
) {
    for (child, fit) in fits {
        if fit.unbounded {
            continue;
        }
        let Some((capacity, parent)) = &fit.most else {
            continue;
        };
        let Some(budget) = model.get(child) else {
            continue;
        };
        if budget.isolated {
            continue;
        }
        let Some(need) = builder.window_own(child) else {
            continue;
        };
        if need <= *capacity {
            continue;
        }
        let parent_budget = model.get(parent);
        let (what, help, at) = match &budget.deadline {
            Some(deadline) if deadline.value > *capacity => (
                format!("deadline of {}", ms(deadline.value)),
                format!(
                    "it is clamped to {} at run time, in silence: lower `{child}`'s deadline to at most {}, or give `{parent}` more time",
                    ms(*capacity),
                    ms(*capacity)
                ),
                (Some(deadline.loc), "its deadline"),
            ),
            _ => {
                let attempts = budget.retry.as_ref().map_or(1, |r| r.attempts);
                (
                    format!(
                        "{} ({} in all)",
                        if attempts == 1 {
                            "attempt".to_owned()
                        } else {
                            format!("{attempts} attempts")
                        },
                        ms(need)
                    ),
                    format!(
                        "its later attempts never run in full: make its attempts fit in {} (fewer, or a shorter `attempt_timeout`), or give `{parent}` more time",
                        ms(*capacity)
                    ),
                    (budget.retry.as_ref().map(|r| r.attempts_loc), "attempts"),
                )
            }
        };
        out.push(
            Finding::new(
                FindingKind::ChildNeverFits {
                    child: child.clone(),
                    parent: parent.clone(),
                    what,
                    capacity: ms(*capacity),
                    help,
                },
                child,
            )
            .at(at.0, at.1)
            .at(
                parent_budget.and_then(|b| b.deadline.as_ref().map(|d| d.loc)),
                "the parent's deadline",
            )
            .at(
                graph
                    .callers_of(child)
                    .find(|edge| &edge.parent == parent)
                    .and_then(|edge| edge.site),
                "called here",
            ),
        );
    }
}

/// `policy::explain::no-request-deadline`: critical entry points with no request deadline
/// above them.
fn no_request_deadline(model: &Model, graph: &Graph, trees: &[Tree], out: &mut Vec<Finding>) {
    if graph.is_empty() {
        return;
    }
    let mut seen = BTreeSet::new();
    for tree in trees {
        let root = &tree.root;
        let critical = !matches!(
            root.class,
            Some(WorkClass::Deferred | WorkClass::Background)
        );
        if !critical || root.isolated || !seen.insert(root.operation.clone()) {
            continue;
        }
        let (why, help) = if tree.under_deadline == Some(false) {
            (
                "a running service called it with no deadline in scope".to_owned(),
                "if it serves a route, put the `DeadlineLayer` on the router (`.layer(DeadlineLayer::new(budget))`), so every request gets one budget its operations share".to_owned(),
            )
        } else if model.request.deadline.is_none() && tree.under_deadline.is_none() {
            (
                "no `request` stanza declares one".to_owned(),
                "declare `request { deadline = 5s }` and put the `DeadlineLayer` on the routes, so every request gets one budget its operations share".to_owned(),
            )
        } else {
            continue;
        };
        out.push(
            Finding::new(
                FindingKind::NoRequestDeadline {
                    operation: root.operation.clone(),
                    why,
                    help,
                },
                &root.operation,
            )
            .at(model.get(&root.operation).map(|b| b.loc), "an entry point"),
        );
    }
}
