//! What a test recorded through the `metrics` facade: `metrics-util`'s `DebuggingRecorder`
//! installed for one paused-clock run ([`with_recorder`]), and its snapshot read by series
//! ([`Recorded`]): a metric's kind, name and labels (in any order) give its value.
//!
//! ```
//! use metrics_util::debugging::DebuggingRecorder;
//! use velocity_policy_testkit::recorder::{Recorded, with_recorder};
//!
//! let recorder = DebuggingRecorder::new();
//! let snapshotter = recorder.snapshotter();
//! with_recorder(&recorder, async {
//!     metrics::counter!("policy_demo_total", "name" => "search").increment(2);
//! });
//! let seen = Recorded::take(&snapshotter);
//! assert_eq!(seen.counter("policy_demo_total", &[("name", "search")]), 2);
//! ```

use std::collections::HashMap;
use std::future::Future;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};

/// A metric's kind, name and labels (sorted by key).
pub type Series = (MetricKind, String, Vec<(String, String)>);

/// One snapshot of the recorder, by series. The debugging recorder's snapshot takes the
/// values: each counter, gauge and histogram reads as what was recorded since the previous
/// snapshot.
#[derive(Debug, Default)]
pub struct Recorded(pub HashMap<Series, DebugValue>);

impl Recorded {
    /// What the recorder behind `snapshotter` holds now.
    pub fn take(snapshotter: &Snapshotter) -> Self {
        let key_of = |key: &CompositeKey| {
            let mut labels: Vec<(String, String)> = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            (key.kind(), key.key().name().to_owned(), labels)
        };
        Self(
            snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .map(|(key, _, _, value)| (key_of(&key), value))
                .collect(),
        )
    }

    /// The value of the series `kind`, `name`, `labels`, if recorded.
    pub fn get(
        &self,
        kind: MetricKind,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<&DebugValue> {
        let mut labels: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        labels.sort();
        self.0.get(&(kind, name.to_owned(), labels))
    }

    /// A counter's value; panics, listing what was recorded, when there is none.
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.get(MetricKind::Counter, name, labels) {
            Some(DebugValue::Counter(n)) => *n,
            other => panic!("no counter {name}{labels:?}: {other:?}\n{self:#?}"),
        }
    }

    /// A gauge's value; panics, listing what was recorded, when there is none.
    pub fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        match self.get(MetricKind::Gauge, name, labels) {
            Some(DebugValue::Gauge(v)) => v.into_inner(),
            other => panic!("no gauge {name}{labels:?}: {other:?}\n{self:#?}"),
        }
    }

    /// A histogram's values in the order recorded; panics, listing what was recorded, when
    /// there is none.
    pub fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        match self.get(MetricKind::Histogram, name, labels) {
            Some(DebugValue::Histogram(values)) => values.iter().map(|v| v.into_inner()).collect(),
            other => panic!("no histogram {name}{labels:?}: {other:?}\n{self:#?}"),
        }
    }
}

/// Runs `test` on a paused current-thread runtime with `recorder` as this thread's recorder:
/// every handle registered inside (mechanisms built, operations first called) records there.
pub fn with_recorder<F: Future<Output = ()>>(recorder: &DebuggingRecorder, test: F) {
    let _local = metrics::set_default_local_recorder(recorder);
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
        .block_on(test);
}
