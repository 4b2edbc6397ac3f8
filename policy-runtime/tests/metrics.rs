//! With the `metrics` feature, refusals, sheds, openings and retries are counters.
#![cfg(feature = "metrics")]

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use policy_runtime::WorkClass;
use policy_runtime::{Breaker, Deadline, Shedder};

/// A counter's name, labels and value.
type Counter = (String, Vec<(String, String)>, u64);

#[test]
fn refusals_openings_and_sheds_are_counted_with_their_labels() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let b = Breaker::builder("metered")
                .open_after_failures(2, Duration::from_secs(10))
                .build();
            b.record_failure();
            b.record_failure();
            assert!(b.check().is_err());
            assert!(b.check().is_err());
            let shedder = Shedder::new("metered");
            let d = Deadline::after(Duration::from_secs(1));
            assert!(
                shedder
                    .admit(WorkClass::Background, 0.9, &d, Duration::ZERO)
                    .is_err()
            );
        });
    });
    let counters: Vec<Counter> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(n) => Some((
                key.key().name().to_owned(),
                key.key()
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect(),
                n,
            )),
            _ => None,
        })
        .collect();
    let find = |name: &str, label: (&str, &str)| {
        counters
            .iter()
            .find(|(n, labels, _)| {
                n == name && labels.iter().any(|(k, v)| k == label.0 && v == label.1)
            })
            .map(|(_, _, v)| *v)
    };
    assert_eq!(
        find("policy_breaker_openings_total", ("name", "metered")),
        Some(1)
    );
    assert_eq!(
        find("policy_refusals_total", ("kind", "breaker_open")),
        Some(2)
    );
    assert_eq!(find("policy_shed_total", ("class", "background")), Some(1));
}
