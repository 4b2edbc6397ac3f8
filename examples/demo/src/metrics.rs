//! `GET /metrics`: every mechanism's metrics (the runtime's `metrics` feature, documented in
//! `velocity_policy::observe`) in Prometheus' text format, from `metrics-exporter-prometheus`'s
//! recorder (feature `prometheus`, on by default).
//!
//! The recorder is installed once per process, by [`install`], before the first mechanism is
//! built: a mechanism registers its metrics when it is built, and one built before a recorder
//! exists stays silent. [`stack::prepare_database`](crate::stack::prepare_database) installs it
//! first thing; [`routes`] does too, for a router built without it. Without the feature,
//! there is no `/metrics` and [`install`] does nothing.

#[cfg(not(feature = "prometheus"))]
use axum::Router;

#[cfg(feature = "prometheus")]
pub use prometheus::{install, routes};

/// Without the `prometheus` feature: nothing to install.
#[cfg(not(feature = "prometheus"))]
pub fn install() {}

/// Without the `prometheus` feature: no routes.
#[cfg(not(feature = "prometheus"))]
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
}

#[cfg(feature = "prometheus")]
mod prometheus {
    use std::sync::OnceLock;
    use std::time::Duration;

    use axum::Router;
    use axum::http::header;
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

    /// Bucket bounds of the durations (`*_seconds`): from a millisecond to the demo's longest
    /// budget and past it.
    const SECONDS: &[f64] = &[
        0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ];
    /// Bucket bounds of the attempts per call.
    const ATTEMPTS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0];

    /// The process's Prometheus recorder, installed the first time this is called (or `None`
    /// when another recorder was installed first: then `/metrics` says so).
    pub fn install() -> Option<&'static PrometheusHandle> {
        static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
        HANDLE
        .get_or_init(|| {
            let installed = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), SECONDS)
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("policy_call_attempts".to_owned()),
                        ATTEMPTS,
                    )
                })
                .ok()?
                .install_recorder();
            let handle = match installed {
                Ok(handle) => handle,
                Err(error) => {
                    tracing::error!(
                        "/metrics will be empty: another metrics recorder was installed first ({error})"
                    );
                    return None;
                }
            };
            // Histogram values are kept until upkeep folds them into their buckets: every
            // second, so a process nobody scrapes keeps flat memory too. (Every 5 s, the values
            // held between two upkeeps at the soak's ~15,000 requests a second raised the
            // process's high-water mark by 10% and failed the soak's memory check.)
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let upkeep = handle.clone();
                runtime.spawn(async move {
                    let mut every = tokio::time::interval(Duration::from_secs(1));
                    loop {
                        every.tick().await;
                        upkeep.run_upkeep();
                    }
                });
            }
            Some(handle)
        })
        .as_ref()
    }

    /// The `/metrics` route, for any router state.
    pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
        install();
        Router::new().route("/metrics", get(scrape))
    }

    async fn scrape() -> Response {
        let text = match install() {
            Some(handle) => {
                handle.run_upkeep();
                handle.render()
            }
            None => {
                "# another metrics recorder was installed first; nothing to render\n".to_owned()
            }
        };
        (
            [
                (
                    header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                ),
                (header::CACHE_CONTROL, "no-store"),
            ],
            text,
        )
            .into_response()
    }
}
