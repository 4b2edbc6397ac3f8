//! Spans and metrics reaching the OpenTelemetry SDK (feature `metrics`), read back from the SDK's
//! in-memory exporters: an annotated call's span through `tracing-opentelemetry`, the breaker's
//! events as span events, and the engine's instruments through `OtelRecorder` under OTel's names,
//! units and attributes.
#![cfg(feature = "metrics")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt as _;
use velocity_policy::otel::OtelRecorder;
use velocity_policy::{DeadlineExceeded, ResilienceError};

#[derive(Debug)]
enum AppError {
    Refused(#[expect(dead_code, reason = "the test reads the telemetry")] ResilienceError),
    TimedOut(#[expect(dead_code, reason = "the test reads the telemetry")] DeadlineExceeded),
    Down,
}

impl From<ResilienceError> for AppError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for AppError {
    fn from(e: DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

/// Opens at its first failure.
#[velocity_policy::resilient(
    breaker(failures = 1, within = "30s", cooldown = "10s"),
    deadline = "1s"
)]
async fn fetch_quote(fail: bool) -> Result<u32, AppError> {
    if fail { Err(AppError::Down) } else { Ok(7) }
}

fn attribute<'a>(attributes: impl IntoIterator<Item = &'a KeyValue>, key: &str) -> Option<String> {
    attributes
        .into_iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

fn metric<'a>(metrics: &'a [&'a Metric], name: &str) -> &'a Metric {
    metrics
        .iter()
        .find(|m| m.name() == name)
        .unwrap_or_else(|| {
            let names: Vec<&str> = metrics.iter().map(|m| m.name()).collect();
            panic!("no {name} among {names:?}")
        })
}

/// One test: a process has one `metrics` recorder.
#[test]
fn spans_and_metrics_reach_the_sdk_under_otel_names() {
    let metric_exporter = InMemoryMetricExporter::default();
    let meters = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(metric_exporter.clone()).build())
        .build();
    OtelRecorder::new(meters.meter("policy")).install().unwrap();
    let span_exporter = InMemorySpanExporter::default();
    let tracers = SdkTracerProvider::builder()
        .with_simple_exporter(span_exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(tracers.tracer("policy")));

    tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(fetch_quote(false).await.unwrap(), 7);
            assert!(matches!(fetch_quote(true).await, Err(AppError::Down)));
            assert!(matches!(
                fetch_quote(false).await,
                Err(AppError::Refused(_))
            ));
        });
    });
    tracers.force_flush().unwrap();
    meters.force_flush().unwrap();

    // Spans: one per call, named after the operation, its events inside.
    let spans = span_exporter.get_finished_spans().unwrap();
    let calls: Vec<_> = spans.iter().filter(|s| s.name == "fetch_quote").collect();
    assert_eq!(calls.len(), 3, "{spans:#?}");
    for span in &calls {
        assert_eq!(
            attribute(&span.attributes, "operation").as_deref(),
            Some("fetch_quote")
        );
        assert_eq!(
            attribute(&span.attributes, "class").as_deref(),
            Some("critical")
        );
    }
    let kinds = |span: &opentelemetry_sdk::trace::SpanData| -> Vec<String> {
        span.events
            .iter()
            .filter_map(|e| attribute(&e.attributes, "kind"))
            .collect()
    };
    assert!(
        kinds(calls[1]).contains(&"breaker_opened".to_owned()),
        "{:?}",
        calls[1].events
    );
    assert!(
        kinds(calls[2]).contains(&"breaker_open".to_owned()),
        "{:?}",
        calls[2].events
    );
    // OTel's conventions for a span that ended in error: its status, and `error.type`.
    use opentelemetry::trace::Status;
    assert_eq!(calls[0].status, Status::Unset);
    assert_eq!(attribute(&calls[0].attributes, "error.type"), None);
    assert!(
        matches!(calls[1].status, Status::Error { .. }),
        "{:?}",
        calls[1].status
    );
    assert_eq!(
        attribute(&calls[1].attributes, "error.type").as_deref(),
        Some("_OTHER"),
        "the function's own error"
    );
    assert!(
        matches!(calls[2].status, Status::Error { .. }),
        "{:?}",
        calls[2].status
    );
    assert_eq!(
        attribute(&calls[2].attributes, "error.type").as_deref(),
        Some("breaker_open")
    );

    // Metrics: OTel's names and units, a refusal's kind as `error.type`.
    let exported = metric_exporter.get_finished_metrics().unwrap();
    let last = exported.last().expect("a collection");
    let metrics: Vec<&Metric> = last.scope_metrics().flat_map(|s| s.metrics()).collect();

    let duration = metric(&metrics, "policy.call.duration");
    assert_eq!(duration.unit(), "s");
    let AggregatedMetrics::F64(MetricData::Histogram(histogram)) = duration.data() else {
        panic!("a histogram: {:?}", duration.data())
    };
    let points: Vec<_> = histogram.data_points().collect();
    let count = |outcome: &str| -> u64 {
        points
            .iter()
            .filter(|p| attribute(p.attributes(), "policy.outcome").as_deref() == Some(outcome))
            .map(|p| p.count())
            .sum()
    };
    assert_eq!((count("ok"), count("failed"), count("refused")), (1, 1, 1));
    let refused = points
        .iter()
        .find(|p| attribute(p.attributes(), "policy.outcome").as_deref() == Some("refused"))
        .unwrap();
    assert_eq!(
        attribute(refused.attributes(), "error.type").as_deref(),
        Some("breaker_open")
    );
    assert_eq!(
        attribute(refused.attributes(), "policy.operation").as_deref(),
        Some("fetch_quote")
    );
    // The duration boundaries the conventions advise, in seconds (not the SDK's default ms).
    assert_eq!(refused.bounds().next(), Some(0.005));

    let openings = metric(&metrics, "policy.breaker.openings");
    let AggregatedMetrics::U64(MetricData::Sum(sum)) = openings.data() else {
        panic!("a sum: {:?}", openings.data())
    };
    assert!(sum.is_monotonic());
    assert_eq!(sum.data_points().map(|p| p.value()).sum::<u64>(), 1);

    let refusals = metric(&metrics, "policy.refusals");
    let AggregatedMetrics::U64(MetricData::Sum(sum)) = refusals.data() else {
        panic!("a sum: {:?}", refusals.data())
    };
    let refused_open: u64 = sum
        .data_points()
        .filter(|p| attribute(p.attributes(), "error.type").as_deref() == Some("breaker_open"))
        .map(|p| p.value())
        .sum();
    assert_eq!(refused_open, 1);

    let state = metric(&metrics, "policy.breaker.state");
    let AggregatedMetrics::F64(MetricData::Gauge(gauge)) = state.data() else {
        panic!("a gauge: {:?}", state.data())
    };
    let open: Vec<f64> = gauge.data_points().map(|p| p.value()).collect();
    assert_eq!(open, [2.0], "2 is open");
}
