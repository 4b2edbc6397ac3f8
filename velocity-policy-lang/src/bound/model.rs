//! The numbers of each operation, as the composition uses them.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::source::{Loc, Located};
use crate::spec::{HedgeDelay, OperationSpec, Spec, WorkClass};

/// A location for numbers that come from no text (a running registry's).
pub const NOWHERE: Loc = Loc::External(u32::MAX);

/// One operation's numbers: its class, deadline, minimum budget, retry and hedge.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Budget {
    /// The operation.
    pub operation: String,
    /// Its class.
    pub class: WorkClass,
    /// Its own deadline (not clamped), where it was set.
    pub deadline: Option<Located<Duration>>,
    /// The least remaining budget it starts with, where it was set.
    pub min_budget: Option<Located<Duration>>,
    /// Its retry, if it retries.
    pub retry: Option<RetryBudget>,
    /// Its hedge, if it hedges.
    pub hedge: Option<HedgeBudget>,
    /// Isolated CPU work: no deadline of its own, waited for within its caller's.
    pub isolated: bool,
    /// The stanza or attribute that declares it.
    pub loc: Loc,
}

impl Budget {
    /// An operation of `class` with no numbers yet, declared at `loc` ([`NOWHERE`] when no
    /// text declares it).
    #[must_use]
    pub fn new(operation: impl Into<String>, class: WorkClass, loc: Loc) -> Self {
        Self {
            operation: operation.into(),
            class,
            deadline: None,
            min_budget: None,
            retry: None,
            hedge: None,
            isolated: false,
            loc,
        }
    }

    /// With its own deadline.
    #[must_use]
    pub fn deadline(mut self, deadline: Duration, loc: Loc) -> Self {
        self.deadline = Some(Located::new(deadline, loc));
        self
    }

    /// With a minimum budget.
    #[must_use]
    pub fn min_budget(mut self, min_budget: Duration, loc: Loc) -> Self {
        self.min_budget = Some(Located::new(min_budget, loc));
        self
    }

    /// With a retry.
    #[must_use]
    pub fn retry(mut self, retry: RetryBudget) -> Self {
        self.retry = Some(retry);
        self
    }

    /// With a hedge.
    #[must_use]
    pub fn hedge(mut self, hedge: HedgeBudget) -> Self {
        self.hedge = Some(hedge);
        self
    }

    /// The numbers of `operation` in `spec` (its retry and hedge resolved by name; a name that
    /// does not resolve is left out, as the validator reports it).
    #[must_use]
    pub fn of(spec: &Spec, operation: &OperationSpec) -> Self {
        let retry = operation
            .retry
            .as_ref()
            .and_then(|reference| {
                spec.retries
                    .get(&reference.value)
                    .map(|retry| (reference, retry))
            })
            .map(|(reference, retry)| RetryBudget {
                name: retry.name.value.clone(),
                attempts: retry.config.attempts,
                attempt_timeout: retry.config.attempt_timeout,
                backoffs: (1..retry.config.attempts)
                    .map(|k| retry.config.backoff.max_delay_after(k))
                    .collect(),
                loc: reference.loc,
                attempts_loc: retry.at.attempts,
            });
        let hedge = operation
            .hedge
            .as_ref()
            .and_then(|name| spec.hedges.get(&name.value))
            .map(|hedge| HedgeBudget {
                name: hedge.name.value.clone(),
                max: hedge.config.max,
                after: match hedge.config.after {
                    HedgeDelay::After(after) => Some(after),
                    HedgeDelay::Percentile(_) => None,
                },
            });
        Self {
            operation: operation.name.value.clone(),
            class: operation.class.value,
            deadline: operation.deadline.clone(),
            min_budget: operation.min_budget.clone(),
            retry,
            hedge,
            isolated: operation.isolate.is_some(),
            loc: operation.name.loc,
        }
    }
}

/// A retry's numbers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RetryBudget {
    /// The retry policy's name.
    pub name: String,
    /// Total attempts, the first included.
    pub attempts: u32,
    /// Each attempt's timeout, if any.
    pub attempt_timeout: Option<Duration>,
    /// The longest backoff after each attempt but the last.
    pub backoffs: Vec<Duration>,
    /// Where the operation names it.
    pub loc: Loc,
    /// Where its attempts are set.
    pub attempts_loc: Loc,
}

impl RetryBudget {
    /// `attempts` attempts of at most `attempt_timeout` each, with `backoffs` between them.
    #[must_use]
    pub fn new(
        name: impl Into<String>,
        attempts: u32,
        attempt_timeout: Option<Duration>,
        backoffs: Vec<Duration>,
    ) -> Self {
        Self {
            name: name.into(),
            attempts,
            attempt_timeout,
            backoffs,
            loc: NOWHERE,
            attempts_loc: NOWHERE,
        }
    }

    /// Named at `loc`, its attempts set at `attempts_loc`.
    #[must_use]
    pub fn at(mut self, loc: Loc, attempts_loc: Loc) -> Self {
        self.loc = loc;
        self.attempts_loc = attempts_loc;
        self
    }
}

/// A hedge's numbers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HedgeBudget {
    /// The hedging policy's name.
    pub name: String,
    /// Attempts in flight at most, the first included.
    pub max: u32,
    /// The fixed delay before each hedge (`None`: a percentile, which has no fixed value and
    /// counts as the attempt itself).
    pub after: Option<Duration>,
}

impl HedgeBudget {
    /// Up to `max` attempts in flight, each hedge `after` the last (`None`: a percentile).
    #[must_use]
    pub fn new(name: impl Into<String>, max: u32, after: Option<Duration>) -> Self {
        Self {
            name: name.into(),
            max,
            after,
        }
    }
}

/// The request's deadline and minimum budget, above every critical entry point.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct RequestBudget {
    /// The request's deadline, if one is declared.
    pub deadline: Option<Located<Duration>>,
    /// The least a request starts with, if declared.
    pub min_budget: Option<Located<Duration>>,
}

/// Every operation's numbers, by name, and the request's.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Model {
    budgets: BTreeMap<String, Budget>,
    /// The request's deadline and minimum budget.
    pub request: RequestBudget,
}

impl Model {
    /// A model with no operations and no request deadline.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The numbers of every operation of `spec`, and its request's.
    #[must_use]
    pub fn from_spec(spec: &Spec) -> Self {
        let mut model = Self::new();
        for operation in &spec.operations {
            model.insert(Budget::of(spec, operation));
        }
        if let Some(request) = &spec.request {
            model.request = RequestBudget {
                deadline: request.deadline.clone(),
                min_budget: request.min_budget.clone(),
            };
        }
        model
    }

    /// Adds `budget`, or replaces the operation's.
    pub fn insert(&mut self, budget: Budget) {
        self.budgets.insert(budget.operation.clone(), budget);
    }

    /// Sets the request's deadline.
    pub fn set_request_deadline(&mut self, deadline: Duration, loc: Loc) {
        self.request.deadline = Some(Located::new(deadline, loc));
    }

    /// Sets the request's minimum budget.
    pub fn set_request_min_budget(&mut self, min_budget: Duration, loc: Loc) {
        self.request.min_budget = Some(Located::new(min_budget, loc));
    }

    /// The numbers of `operation`.
    #[must_use]
    pub fn get(&self, operation: &str) -> Option<&Budget> {
        self.budgets.get(operation)
    }

    /// The numbers of `operation`, to change.
    pub fn get_mut(&mut self, operation: &str) -> Option<&mut Budget> {
        self.budgets.get_mut(operation)
    }

    /// Every operation's numbers, by name.
    pub fn budgets(&self) -> impl Iterator<Item = &Budget> {
        self.budgets.values()
    }
}
