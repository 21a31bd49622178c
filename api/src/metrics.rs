//! Prometheus metrics of HTTP requests by route, method and status, with
//! latency histograms. The recorder, job metrics and queue depth are the
//! platform's (`platform::telemetry`); everything is rendered on the ops
//! listener's `/metrics`, never on the public one.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;

pub use platform::telemetry::install_metrics as install;

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
    metrics::counter!("http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status.clone())
        .increment(1);
    metrics::histogram!("http_request_duration_seconds", "method" => method, "route" => route, "status" => status)
        .record(started.elapsed().as_secs_f64());
    response
}
