//! The last few minutes of every breaker, bulkhead, shedder and operation, in a bounded
//! in-process ring (feature `dashboard`): what the dashboard's sparklines draw.
//!
//! A sampler the dashboard starts (one task per registry, on the runtime that serves it) takes
//! a point every [`SAMPLE_EVERY`] and keeps the last [`POINTS`] (five minutes): for each
//! breaker its state, refusals, failures and openings in the interval; for each bulkhead its
//! calls in flight and queued, and its refusals; for each shedder what it shed, for load and
//! for budget; for each annotated operation its calls, how they ended (refusals by kind), the
//! p99 of their latency in the interval and its deadline in force (the bound the p99 is drawn
//! against). Nothing is sent anywhere: the points live in the registry, and `/policy` serves
//! them.
//!
//! # What it costs
//!
//! Until a dashboard starts its sampler, an annotated call pays one atomic load more (whether
//! the history records). Once it does, each call reads tokio's clock twice (as the `metrics`
//! feature does with a recorder) and adds to three counters of its operation: its calls, its
//! outcome, its latency's bucket; nothing is allocated, nothing locked. A sample takes each
//! mechanism's snapshot and one lock on the ring.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::breaker::BreakerSnapshot;
use crate::bulkhead::BulkheadSnapshot;
use crate::calls::Calls;
use crate::calls::stats::{BUCKETS, CallCounts, REFUSAL_KINDS, bucket_upper_ms};
use crate::deadline::OperationSnapshot;
use crate::shedding::ShedderSnapshot;

/// How often a point is taken.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(2);

/// Points kept per series: five minutes at [`SAMPLE_EVERY`].
pub const POINTS: usize = 150;

/// What a point is taken of: the snapshots of a registry's breakers, bulkheads, shedders and
/// operation deadlines.
pub(crate) type Mechanisms = (
    Vec<BreakerSnapshot>,
    Vec<BulkheadSnapshot>,
    Vec<ShedderSnapshot>,
    Vec<OperationSnapshot>,
);

/// The p99 of the calls counted in `latency`, as its bucket's upper bound (`None`: no call).
fn p99(latency: &[u64; BUCKETS]) -> Option<f64> {
    let total: u64 = latency.iter().sum();
    if total == 0 {
        return None;
    }
    // The smallest bucket with at least 99% of the calls at or below it.
    let wanted = total.saturating_mul(99).div_ceil(100);
    let mut seen = 0;
    for (i, count) in latency.iter().enumerate() {
        seen += count;
        if seen >= wanted {
            return Some(round(bucket_upper_ms(i)));
        }
    }
    Some(round(bucket_upper_ms(BUCKETS - 1)))
}

fn round(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// One series: its columns, aligned with the ring's times, and the counters it last saw.
#[derive(Default)]
struct Series {
    display_name: Option<Arc<str>>,
    columns: BTreeMap<&'static str, VecDeque<Option<f64>>>,
    last: BTreeMap<&'static str, u64>,
    last_latency: Option<[u64; BUCKETS]>,
}

/// A value of one point.
enum Value {
    /// A level now (calls in flight).
    Level(f64),
    /// A counter since start: the point is its growth since the last point (`None` at the
    /// first point, when there is no last).
    Count(u64),
    /// A counter that counts only while the history records (an operation's calls): the
    /// first point is its growth since zero, so the calls before an operation's first point
    /// are in it, not lost.
    Recorded(u64),
    /// A value computed for the interval, or none.
    Direct(Option<f64>),
}

impl Series {
    fn push(&mut self, len: usize, values: &[(&'static str, Value)]) {
        for (column, value) in values {
            let point = match value {
                Value::Level(level) => Some(*level),
                Value::Direct(direct) => *direct,
                Value::Count(now) => {
                    let before = self.last.insert(column, *now);
                    // A counter that went down was rebuilt: its growth is what it holds now.
                    before.map(|before| now.checked_sub(before).unwrap_or(*now) as f64)
                }
                Value::Recorded(now) => {
                    let before = self.last.insert(column, *now).unwrap_or(0);
                    Some(now.checked_sub(before).unwrap_or(*now) as f64)
                }
            };
            let series = self.columns.entry(column).or_default();
            // A column new in this series starts with gaps for the points before it.
            while series.len() + 1 < len {
                series.push_back(None);
            }
            series.push_back(point);
        }
    }

    fn trim(&mut self) {
        for column in self.columns.values_mut() {
            while column.len() > POINTS {
                column.pop_front();
            }
        }
    }
}

#[derive(Default)]
struct State {
    at: VecDeque<u64>,
    breakers: BTreeMap<Arc<str>, Series>,
    bulkheads: BTreeMap<Arc<str>, Series>,
    shedders: BTreeMap<Arc<str>, Series>,
    operations: BTreeMap<&'static str, Series>,
}

/// The ring of one registry.
#[derive(Default)]
pub(crate) struct History {
    state: Mutex<State>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("points", &lock(&self.state).at.len())
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl History {
    /// Starts the sampler on the current runtime, unless one runs: `take` takes each point
    /// (its registry's [`record_history`](crate::Registry::record_history)).
    pub(crate) fn start(&self, take: impl Fn() + Send + 'static) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut task = lock(&self.task);
        if task.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        crate::calls::stats::record();
        *task = Some(runtime.spawn(async move {
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                take();
            }
        }));
    }

    /// One point for every series: the `mechanisms`' snapshots and the `calls` seen of every
    /// operation.
    pub(crate) fn sample(&self, mechanisms: Mechanisms, calls: &[&'static Calls]) {
        let (breakers, bulkheads, shedders, deadlines) = mechanisms;
        let calls: Vec<(&'static str, CallCounts)> = calls
            .iter()
            .map(|c| (c.operation(), c.measure.stats.counts()))
            .collect();
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        state.at.push_back(unix_ms());
        let len = state.at.len();
        for b in breakers {
            let level = match b.state {
                crate::breaker::BreakerState::Closed => 0.0,
                crate::breaker::BreakerState::Probation => 1.0,
                crate::breaker::BreakerState::Open => 2.0,
            };
            state.breakers.entry(b.name.clone()).or_default().push(
                len,
                &[
                    ("state", Value::Level(level)),
                    ("refusals", Value::Count(b.refusals)),
                    ("failures", Value::Count(b.failures)),
                    ("openings", Value::Count(b.openings)),
                ],
            );
        }
        for b in bulkheads {
            state.bulkheads.entry(b.name.clone()).or_default().push(
                len,
                &[
                    ("running", Value::Level(f64::from(b.running))),
                    ("queued", Value::Level(f64::from(b.queued))),
                    ("refused_full", Value::Count(b.refused_full)),
                    (
                        "refused_queue_timeout",
                        Value::Count(b.refused_queue_timeout),
                    ),
                ],
            );
        }
        for s in shedders {
            let series = state.shedders.entry(s.name.clone()).or_default();
            series.display_name = Some(s.display_name.clone());
            series.push(
                len,
                &[
                    ("shed_load", Value::Count(total(&s.shed_load))),
                    ("shed_budget", Value::Count(total(&s.shed_budget))),
                ],
            );
        }
        for (operation, counts) in calls {
            let bound = deadlines
                .iter()
                .filter(|d| &*d.display_name == operation)
                .map(|d| d.deadline)
                .filter(|d| *d < crate::Deadline::MAX_BUDGET)
                .max()
                .map(|d| round(d.as_secs_f64() * 1000.0));
            let series = state.operations.entry(operation).or_default();
            // Counted only while the history records: the first point's interval starts at
            // zero.
            let last = series.last_latency.unwrap_or([0; BUCKETS]);
            let interval: [u64; BUCKETS] =
                std::array::from_fn(|i| counts.latency[i].saturating_sub(last[i]));
            series.last_latency = Some(counts.latency);
            let mut values = vec![
                ("calls", Value::Recorded(counts.calls)),
                ("ok", Value::Recorded(counts.ok)),
                ("failed", Value::Recorded(counts.failed)),
                ("expired", Value::Recorded(counts.expired)),
                ("p99_ms", Value::Direct(p99(&interval))),
                ("bound_ms", Value::Direct(bound)),
            ];
            for (i, kind) in REFUSAL_KINDS.iter().enumerate() {
                values.push((refused_column(*kind), Value::Recorded(counts.refused[i])));
            }
            series.push(len, &values);
        }
        // Every series one point longer, then the ring back to its length.
        for series in state
            .breakers
            .values_mut()
            .chain(state.bulkheads.values_mut())
            .chain(state.shedders.values_mut())
        {
            pad(series, len);
        }
        for series in state.operations.values_mut() {
            pad(series, len);
        }
        while state.at.len() > POINTS {
            state.at.pop_front();
        }
        for series in state
            .breakers
            .values_mut()
            .chain(state.bulkheads.values_mut())
            .chain(state.shedders.values_mut())
        {
            series.trim();
        }
        for series in state.operations.values_mut() {
            series.trim();
        }
    }

    pub(crate) fn snapshot(&self) -> HistorySnapshot {
        let state = lock(&self.state);
        let series = |name: &str, series: &Series| SeriesSnapshot {
            name: Arc::from(name),
            display_name: series.display_name.clone(),
            columns: series
                .columns
                .iter()
                .map(|(column, values)| (*column, values.iter().copied().collect()))
                .collect(),
        };
        HistorySnapshot {
            interval_ms: u64::try_from(SAMPLE_EVERY.as_millis()).unwrap_or(u64::MAX),
            at_unix_ms: state.at.iter().copied().collect(),
            breakers: state.breakers.iter().map(|(n, s)| series(n, s)).collect(),
            bulkheads: state.bulkheads.iter().map(|(n, s)| series(n, s)).collect(),
            shedders: state.shedders.iter().map(|(n, s)| series(n, s)).collect(),
            operations: state.operations.iter().map(|(n, s)| series(n, s)).collect(),
        }
    }
}

/// A series that took no point this time (its mechanism's snapshot did not list it) gets a
/// gap, so every column stays as long as the ring.
fn pad(series: &mut Series, len: usize) {
    for column in series.columns.values_mut() {
        while column.len() < len {
            column.push_back(None);
        }
    }
}

fn total(per_class: &crate::shedding::PerClass) -> u64 {
    per_class
        .critical
        .saturating_add(per_class.deferred)
        .saturating_add(per_class.background)
}

/// The column of refusals of `kind`: `refused_breaker_open`, ...
fn refused_column(kind: crate::RefusalKind) -> &'static str {
    use crate::RefusalKind as K;
    match kind {
        K::BreakerOpen => "refused_breaker_open",
        K::BulkheadFull => "refused_bulkhead_full",
        K::Shed => "refused_shed",
        K::InsufficientBudget => "refused_insufficient_budget",
        K::RateLimited => "refused_rate_limited",
        K::Injected => "refused_injected",
    }
}

/// The dashboard's history, serialised as `history` in the [`Snapshot`](crate::Snapshot).
///
/// `interval_ms` between points, `at_unix_ms` (when each point was taken, oldest first, at
/// most [`POINTS`]), and one series per breaker, bulkhead, shedder and operation: its `name`
/// (and a shedder's `display_name`) and one array per column, as long as `at_unix_ms`, `null`
/// where the series had no point yet. Counters are the growth during the interval before each
/// point (`null` at a breaker's, bulkhead's or shedder's first point, whose counters ran before
/// the history did; an operation's calls are counted only while the history records, so its
/// first point holds the calls since then). Columns:
///
/// | series | columns |
/// |---|---|
/// | `breakers` | `state` (0 closed, 1 on probation, 2 open), `refusals`, `failures`, `openings` |
/// | `bulkheads` | `running`, `queued` (levels at the point), `refused_full`, `refused_queue_timeout` |
/// | `shedders` | `shed_load`, `shed_budget` (every class) |
/// | `operations` | `calls`, `ok`, `failed`, `expired`, `refused_<kind>` per refusal kind, `p99_ms` (the interval's p99, an upper bound within a third of a doubling; `null` without calls), `bound_ms` (its deadline in force) |
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct HistorySnapshot {
    /// Between two points, in milliseconds.
    pub interval_ms: u64,
    /// When each point was taken (milliseconds since the Unix epoch), oldest first.
    pub at_unix_ms: Vec<u64>,
    /// One series per breaker.
    pub breakers: Vec<SeriesSnapshot>,
    /// One series per bulkhead.
    pub bulkheads: Vec<SeriesSnapshot>,
    /// One series per shedder.
    pub shedders: Vec<SeriesSnapshot>,
    /// One series per annotated operation called so far.
    pub operations: Vec<SeriesSnapshot>,
}

/// One series of the history: its name and its columns.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SeriesSnapshot {
    /// The mechanism's or operation's name.
    pub name: Arc<str>,
    /// A shedder's operation's own name.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub display_name: Option<Arc<str>>,
    /// Each column's values, aligned with the points' times.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub columns: BTreeMap<&'static str, Vec<Option<f64>>>,
}

impl SeriesSnapshot {
    /// The column `name`, if the series has it.
    #[must_use]
    pub fn column(&self, name: &str) -> Option<&[Option<f64>]> {
        self.columns.get(name).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::stats::bucket_of;

    #[test]
    fn a_latency_falls_in_the_bucket_whose_bound_holds_it() {
        for ms in [0.05, 0.1, 0.3, 1.0, 7.5, 150.0, 2000.0, 90_000.0] {
            let took = Duration::from_secs_f64(ms / 1000.0);
            let i = bucket_of(took);
            assert!(
                bucket_upper_ms(i) >= ms || i == BUCKETS - 1,
                "{ms}ms in {i}"
            );
            if i > 0 {
                assert!(bucket_upper_ms(i - 1) < ms, "{ms}ms belongs lower than {i}");
            }
        }
    }

    #[test]
    fn the_p99_is_the_bucket_that_holds_the_ninety_ninth_percent() {
        let mut latency = [0u64; BUCKETS];
        latency[bucket_of(Duration::from_millis(10))] = 99;
        latency[bucket_of(Duration::from_millis(900))] = 1;
        let p = p99(&latency).unwrap_or_default();
        assert!((10.0..=12.7).contains(&p), "{p}");
        latency[bucket_of(Duration::from_millis(900))] = 2;
        let p = p99(&latency).unwrap_or_default();
        assert!((900.0..=1134.0).contains(&p), "{p}");
        assert_eq!(p99(&[0; BUCKETS]), None);
    }

    #[test]
    fn an_operations_first_point_holds_its_calls_a_breakers_does_not() {
        let mut operation = Series::default();
        operation.push(1, &[("calls", Value::Recorded(6))]);
        operation.push(2, &[("calls", Value::Recorded(9))]);
        let calls: Vec<Option<f64>> = operation.columns["calls"].iter().copied().collect();
        assert_eq!(calls, [Some(6.0), Some(3.0)]);
        let mut breaker = Series::default();
        breaker.push(1, &[("refusals", Value::Count(6))]);
        breaker.push(2, &[("refusals", Value::Count(9))]);
        let refusals: Vec<Option<f64>> = breaker.columns["refusals"].iter().copied().collect();
        assert_eq!(refusals, [None, Some(3.0)]);
    }
}
