//! The operators' listener: its own port (loopback by default), behind the ops
//! credential. It serves the apalis-board dashboard (UI at `/`, its API at
//! `/api/v1`, paths its prebuilt UI has compiled in), what the board lacks as
//! routes and a page (`/ops/`: dead jobs with retry and discard, pausing and
//! resuming queues), and Prometheus metrics at `/metrics`; `/healthz` and
//! `/readyz` answer without a credential. The public listener exposes none of it.

mod actions;
mod auth;
mod board;
mod page;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::response::Redirect;
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;

pub use auth::OpsAuth;

use crate::TransportPolicy;
use crate::state::AppState;

/// What the ops handlers reach.
#[derive(Clone)]
pub struct OpsState {
    app: AppState,
    metrics: PrometheusHandle,
}

/// The ops application, behind `auth`, on a listener with `transport`'s policy.
pub fn router(
    app: AppState,
    auth: OpsAuth,
    metrics: PrometheusHandle,
    transport: TransportPolicy,
) -> Router {
    let guard = auth::Guard {
        app: app.clone(),
        auth,
    };
    let state_metrics = metrics.clone();
    let state = OpsState {
        app: app.clone(),
        metrics,
    };
    let routes = Router::new()
        .route("/metrics", get(actions::metrics))
        .route("/ops", get(|| async { Redirect::permanent("/ops/") }))
        .route("/ops/", get(page::page))
        .route("/ops/api/queues", get(actions::queues))
        .route("/ops/api/queues/{queue}/pause", post(actions::pause))
        .route("/ops/api/queues/{queue}/resume", post(actions::resume))
        .route("/ops/api/jobs/dead", get(actions::dead_jobs))
        .route("/ops/api/jobs/{id}/retry", post(actions::retry))
        .route("/ops/api/jobs/{id}/discard", post(actions::discard))
        .with_state(state);
    let dashboard = board::router(&app.platform().queue);
    // Orchestrators probe health without a credential; it reveals nothing.
    let probes = Router::new()
        .route("/healthz", get(workers::telemetry::healthz))
        .route("/readyz", get(actions::readyz))
        .with_state(OpsState {
            app: app.clone(),
            metrics: state_metrics,
        });
    let guarded = routes
        .merge(dashboard)
        .layer(from_fn_with_state(guard, auth::require));
    // Operators get the same request ids, envelope and access log, and the
    // public listener's transport rule: credentials and job data never cross
    // a reachable address in plain HTTP. Probes reveal nothing and come from
    // the orchestrator on the host, so they are answered over any transport.
    crate::middleware::apply(guarded, transport, None).merge(crate::middleware::apply(
        probes,
        TransportPolicy::ServeAll,
        None,
    ))
}
