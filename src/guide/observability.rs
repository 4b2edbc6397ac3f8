//! What the engine tells operators: metrics, OpenTelemetry and the live dashboard.
//!
//! With the `metrics` feature every mechanism also records through the `metrics` facade, for any
//! exporter: call durations per operation and outcome, attempts, breaker state and openings,
//! refusals, bulkhead slots and queue, shed decisions, retries and the retry allowance's balance,
//! and deferred and background tasks (every name, label and unit is in `velocity_policy::observe`'s
//! "Metrics"). Install the recorder before the first call (a mechanism registers its metrics when
//! it is built); with `metrics-exporter-prometheus`, for example:
//!
//! ```rust,ignore
//! let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
//! let app = app().route("/metrics", get(move || std::future::ready(prometheus.render())));
//! ```
//!
//! The demo serves its metrics that way at `/metrics` (`examples/demo/src/metrics.rs`).
//!
//! **OpenTelemetry** (feature `metrics`): `velocity_policy::otel::OtelRecorder` hands the same instruments to
//! an OTel meter in OTel's spelling (`policy.call.duration` in `s` with the duration buckets the
//! semantic conventions advise, `policy.refusals` with the refusal's kind as `error.type`), and
//! `tracing-opentelemetry` makes each annotated call's span an OTel span, the mechanisms' events
//! its span events, and a call that ended in error a span with status `Error` and `error.type`
//! (the refusal's kind, `deadline_exceeded`, or `_OTHER`). With OTLP to a collector:
//!
//! ```rust,ignore
//! let meters = SdkMeterProvider::builder()
//!     .with_reader(PeriodicReader::builder(MetricExporter::builder().with_tonic().build()?).build())
//!     .build();
//! velocity_policy::otel::OtelRecorder::new(meters.meter("policy")).install()?;
//! let tracers = SdkTracerProvider::builder()
//!     .with_batch_exporter(SpanExporter::builder().with_tonic().build()?)
//!     .build();
//! tracing_subscriber::registry()
//!     .with(tracing_opentelemetry::layer().with_tracer(tracers.tracer("policy")))
//!     .init();
//! ```
//!
//! (`opentelemetry-otlp`'s exporters; `tests/otel.rs` reads both back from the SDK's in-memory
//! exporters.)
//!
//! # Dashboard
//!
//! Feature `dashboard` serves the live state of every breaker, bulkhead, shedder, retry policy,
//! rate limiter, pool and deferred queue from your own axum service, in one line:
//!
//! ```rust
//! # #[cfg(feature = "dashboard")]
//! # fn main() {
//! # use axum::{Router, routing::get};
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .merge(velocity_policy::dashboard::router()); // GET /dashboard (the page), GET /policy (its JSON)
//! # let _ = app;
//! # }
//! # #[cfg(not(feature = "dashboard"))]
//! # fn main() {}
//! ```
//!
//! `.nest("/ops", velocity_policy::dashboard::router())` puts the same two routes under `/ops`. The page is
//! embedded in the binary and reads the JSON every second. Every row is named by its policy or by
//! the operation's own name, never a module path; the JSON is versioned (`"version": 1`) and every
//! duration in it is milliseconds under a name ending in `_ms`; the shape is documented in
//! `velocity_policy::dashboard`. The feature adds only axum without its default features (and
//! `velocity-policy-lang`, which composes the trees). The demo mounts it this way
//! (`examples/demo/src/dashboard.rs`).
//!
//! Above the tables, the page draws each entry point's tree of operations as this instance called
//! them, with both worst cases and each operation's p99 of the last minute beside its bound
//! ([reading a tree](crate::guide::deadlines#the-requests-bound-a-routes-tree-and-its-two-worst-cases)); every
//! operation, breaker, bulkhead and shedder has sparklines of its last five minutes (calls,
//! refusals, p99 against its bound, a point every 2 s, kept in a bounded ring in the process:
//! `history` in the JSON).
