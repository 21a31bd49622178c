//! Prometheus metrics: the recorder, and HTTP requests by route, method and
//! status with latency histograms. Job metrics are recorded by the workers and
//! queue depth is read at scrape time (`ops`); everything is rendered on the
//! ops listener's `/metrics`, never on the public one.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Latency buckets (seconds) of every `*_duration_seconds` histogram.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide recorder (once) and returns its handle.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("duration_seconds".to_owned()), &BUCKETS)
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!(
                    "a metrics recorder was already installed; /metrics shows only what it renders"
                );
            }
            handle
        })
        .clone()
}

/// The route template a request matched, carried out on the response for the
/// outer metrics layer.
#[derive(Clone, Debug)]
pub struct MatchedRoute(pub Arc<str>);

/// Route layer: remembers the matched route template on the response.
pub async fn tag_route(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| Arc::<str>::from(path.as_str()));
    let mut response = next.run(request).await;
    if let Some(route) = route {
        response.extensions_mut().insert(MatchedRoute(route));
    }
    response
}

/// Middleware: counts requests and observes their latency by route, method
/// and status (`http_requests_total`, `http_request_duration_seconds`).
pub async fn record(request: Request, next: Next) -> Response {
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let route = response
        .extensions()
        .get::<MatchedRoute>()
        .map_or_else(|| "unmatched".to_owned(), |r| r.0.to_string());
    let status = response.status().as_u16().to_string();
    metrics::counter!("http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("http_request_duration_seconds", "method" => method, "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}
