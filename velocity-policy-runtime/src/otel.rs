//! OpenTelemetry (feature `metrics`): the engine's telemetry in an OTel SDK.
//!
//! - **Metrics.** [`OtelRecorder`] is a `metrics` recorder that hands every instrument the
//!   engine records (the table in [`observe`](crate::observe)'s "Metrics") to an OTel
//!   [`Meter`], renamed the way OpenTelemetry's semantic conventions name instruments: dotted,
//!   without the Prometheus suffixes, the unit as the instrument's unit
//!   ([`otel_name`]): `policy_call_duration_seconds` is the histogram `policy.call.duration`
//!   in `s` (with the bucket boundaries the conventions advise for durations, as
//!   `http.server.request.duration` has), `policy_refusals_total` the counter
//!   `policy.refusals`. Labels become attributes in the `policy.` namespace, except a refusal's
//!   kind (`kind`, `refused_by`), which is the conventions' own `error.type`.
//! - **Spans.** Each annotated call is a `tracing` span named after its operation, and the
//!   mechanisms' events are inside it: `tracing-opentelemetry`'s layer makes them OTel spans
//!   and span events, with no code of ours in between. A call that ended in error records
//!   the conventions' `otel.status_code` (`ERROR`: the span's status) and `error.type` (the
//!   refusal's kind, `deadline_exceeded`, or `_OTHER` for the function's own error).
//!
//! Exported with OTLP (this is documentation, not run in CI; it needs `opentelemetry-otlp`
//! and the SDK in your service):
//!
//! ```ignore
//! use opentelemetry::trace::TracerProvider as _;
//! use opentelemetry_otlp::{MetricExporter, SpanExporter};
//! use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
//! use opentelemetry_sdk::trace::SdkTracerProvider;
//! use tracing_subscriber::prelude::*;
//!
//! // Metrics: OTLP over gRPC to a collector (OTEL_EXPORTER_OTLP_ENDPOINT, default localhost:4317).
//! let meters = SdkMeterProvider::builder()
//!     .with_reader(PeriodicReader::builder(MetricExporter::builder().with_tonic().build()?).build())
//!     .build();
//! velocity_policy::otel::OtelRecorder::new(opentelemetry::metrics::MeterProvider::meter(&meters, "policy"))
//!     .install()?;
//!
//! // Spans: the engine's tracing spans and events, through tracing-opentelemetry.
//! let tracers = SdkTracerProvider::builder()
//!     .with_batch_exporter(SpanExporter::builder().with_tonic().build()?)
//!     .build();
//! tracing_subscriber::registry()
//!     .with(tracing_opentelemetry::layer().with_tracer(tracers.tracer("policy")))
//!     .init();
//! // ...serve; at exit, `meters.shutdown()` and `tracers.shutdown()` flush what is left.
//! ```
//!
//! Install the recorder before the first call: a mechanism registers its instruments when it
//! is built.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SetRecorderError, SharedString, Unit,
};
use opentelemetry::KeyValue;
use opentelemetry::metrics::Meter;

/// The boundaries, in seconds, OpenTelemetry's semantic conventions advise for duration
/// histograms (`http.server.request.duration`); the SDK's default ones are for milliseconds.
const DURATION_BOUNDARIES: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// An instrument's OTel name and unit from its `metrics` name. For the engine's own
/// (`policy_...`): `_total` dropped (a counter is a sum already), `_seconds` dropped for the
/// unit `s`, and the mechanism a namespace of its own (`policy.bulkhead.in_flight`). Any other
/// name (a library's sharing the recorder) is kept as it is.
///
/// ```
/// use velocity_policy_runtime::otel::otel_name;
///
/// assert_eq!(otel_name("policy_call_duration_seconds"), ("policy.call.duration".into(), Some("s")));
/// assert_eq!(otel_name("policy_refusals_total"), ("policy.refusals".into(), None));
/// assert_eq!(otel_name("policy_bulkhead_in_flight"), ("policy.bulkhead.in_flight".into(), None));
/// assert_eq!(otel_name("http_requests_total"), ("http_requests_total".into(), None));
/// ```
pub fn otel_name(name: &str) -> (String, Option<&'static str>) {
    let Some(rest) = name.strip_prefix("policy_") else {
        return (name.to_owned(), None);
    };
    let (stem, unit) = if let Some(stem) = rest.strip_suffix("_total") {
        (stem, None)
    } else if let Some(stem) = rest.strip_suffix("_seconds") {
        (stem, Some("s"))
    } else {
        (rest, None)
    };
    (format!("policy.{}", stem.replacen('_', ".", 1)), unit)
}

/// A label's OTel attribute key on one of the engine's instruments: a refusal's kind is
/// `error.type` (the semantic conventions' class of error an operation ended with); every
/// other label is in the `policy.` namespace (`policy.name`, `policy.outcome`).
pub fn otel_attribute(label: &str) -> String {
    match label {
        "kind" | "refused_by" => "error.type".to_owned(),
        other => format!("policy.{other}"),
    }
}

/// A `metrics` recorder that records into an OTel [`Meter`]; see the [module docs](self).
pub struct OtelRecorder {
    meter: Meter,
    /// What `describe_*` said, by `metrics` name.
    descriptions: Mutex<HashMap<String, (Option<Unit>, SharedString)>>,
}

impl std::fmt::Debug for OtelRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtelRecorder").finish_non_exhaustive()
    }
}

impl OtelRecorder {
    /// Records into `meter` (the SDK's `MeterProvider::meter("policy")`, say).
    pub fn new(meter: Meter) -> Self {
        Self {
            meter,
            descriptions: Mutex::new(HashMap::new()),
        }
    }

    /// Installs it as the process's `metrics` recorder, before the first call. Fails when one
    /// is installed already (a process has one: put both behind a `metrics-util` fan-out to
    /// keep another exporter too).
    pub fn install(self) -> Result<(), SetRecorderError<Self>> {
        metrics::set_global_recorder(self)
    }

    fn describe(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.descriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.as_str().to_owned(), (unit, description));
    }

    /// The OTel name, unit and description of `key`'s instrument, and its attributes.
    fn instrument(&self, key: &Key) -> (String, Option<String>, String, Vec<KeyValue>) {
        let (name, unit) = otel_name(key.name());
        let described = self
            .descriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key.name())
            .cloned();
        let unit = unit.map(str::to_owned).or_else(|| {
            described
                .as_ref()
                .and_then(|(unit, _)| *unit)
                .filter(|unit| *unit != Unit::Count)
                .map(|unit| unit.as_canonical_label().to_owned())
        });
        let description = described.map_or_else(String::new, |(_, d)| d.into_owned());
        let ours = key.name().starts_with("policy_");
        let attributes = key
            .labels()
            .map(|label| {
                let attribute = if ours {
                    otel_attribute(label.key())
                } else {
                    label.key().to_owned()
                };
                KeyValue::new(attribute, label.value().to_owned())
            })
            .collect();
        (name, unit, description, attributes)
    }
}

impl Recorder for OtelRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description);
    }

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let (name, unit, description, attributes) = self.instrument(key);
        let mut builder = self.meter.u64_counter(name).with_description(description);
        if let Some(unit) = unit {
            builder = builder.with_unit(unit);
        }
        Counter::from_arc(Arc::new(OtelCounter {
            counter: builder.build(),
            attributes,
            total: AtomicU64::new(0),
        }))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let (name, unit, description, attributes) = self.instrument(key);
        let mut builder = self.meter.f64_gauge(name).with_description(description);
        if let Some(unit) = unit {
            builder = builder.with_unit(unit);
        }
        Gauge::from_arc(Arc::new(OtelGauge {
            gauge: builder.build(),
            attributes,
            value: AtomicU64::new(0_f64.to_bits()),
        }))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let (name, unit, description, attributes) = self.instrument(key);
        let seconds = unit.as_deref() == Some("s");
        let mut builder = self.meter.f64_histogram(name).with_description(description);
        if let Some(unit) = unit {
            builder = builder.with_unit(unit);
        }
        if seconds {
            builder = builder.with_boundaries(DURATION_BOUNDARIES.to_vec());
        }
        Histogram::from_arc(Arc::new(OtelHistogram {
            histogram: builder.build(),
            attributes,
        }))
    }
}

struct OtelCounter {
    counter: opentelemetry::metrics::Counter<u64>,
    attributes: Vec<KeyValue>,
    /// What was added, for `absolute` (an OTel counter only adds).
    total: AtomicU64,
}

impl CounterFn for OtelCounter {
    fn increment(&self, value: u64) {
        self.total.fetch_add(value, Ordering::Relaxed);
        self.counter.add(value, &self.attributes);
    }

    fn absolute(&self, value: u64) {
        let before = self.total.fetch_max(value, Ordering::Relaxed);
        if value > before {
            self.counter.add(value - before, &self.attributes);
        }
    }
}

struct OtelGauge {
    gauge: opentelemetry::metrics::Gauge<f64>,
    attributes: Vec<KeyValue>,
    /// The value now (its bits), for `increment` and `decrement` (an OTel gauge only records).
    value: AtomicU64,
}

impl OtelGauge {
    /// Changes the value and records the result. Two changes at once may record in either
    /// order (the next change records the value both made).
    fn update(&self, change: impl Fn(f64) -> f64) {
        let mut now = 0.0;
        let _ = self
            .value
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                now = change(f64::from_bits(bits));
                Some(now.to_bits())
            });
        self.gauge.record(now, &self.attributes);
    }
}

impl GaugeFn for OtelGauge {
    fn increment(&self, value: f64) {
        self.update(|now| now + value);
    }

    fn decrement(&self, value: f64) {
        self.update(|now| now - value);
    }

    fn set(&self, value: f64) {
        self.update(|_| value);
    }
}

struct OtelHistogram {
    histogram: opentelemetry::metrics::Histogram<f64>,
    attributes: Vec<KeyValue>,
}

impl HistogramFn for OtelHistogram {
    fn record(&self, value: f64) {
        self.histogram.record(value, &self.attributes);
    }
}
