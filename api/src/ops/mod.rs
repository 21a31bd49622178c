//! The operators' listener: its own port (loopback by default), behind the ops
//! credential. It serves the job console (`/ops/`: jobs by state with search
//! and bulk actions, one job with its attempts, worker processes with quiet
//! and stop, history charts, the audit log; the same as JSON under
//! `/ops/api/`), the read-only apalis-board dashboard (UI at `/`, its API at
//! `/api/v1`, paths its prebuilt UI has compiled in), and Prometheus metrics
//! at `/metrics`; `/healthz` and `/readyz` answer without a credential. The
//! public listener exposes none of it.

mod actions;
mod auth;
mod board;
pub(crate) mod console;
mod pages;
mod sign_in_throttle;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::response::Redirect;
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;

pub use actions::worker_json;
pub use auth::OpsAuth;
pub use sign_in_throttle::{FAILED_SIGN_INS_PER_MINUTE, KNOWN_FOR_SECONDS};

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
        throttle: std::sync::Arc::default(),
    };
    let state_metrics = metrics.clone();
    let state = OpsState {
        app: app.clone(),
        metrics,
    };
    let routes = Router::new()
        .route("/metrics", get(actions::metrics))
        .route("/ops", get(|| async { Redirect::permanent("/ops/") }))
        .route("/ops/", get(pages::jobs_page))
        .route("/ops/assets/{name}", get(pages::asset))
        .route("/ops/jobs/confirm", get(pages::confirm_page))
        .route("/ops/jobs/bulk", post(pages::bulk))
        .route("/ops/jobs/{id}", get(pages::job_page))
        .route("/ops/jobs/{id}/{action}", post(pages::job_action))
        .route("/ops/queues/{queue}/{control}", post(pages::queue_control))
        .route("/ops/workers", get(pages::workers_page))
        .route("/ops/workers/{id}/{request}", post(pages::worker_request))
        .route("/ops/history", get(pages::history_page))
        .route("/ops/audit", get(pages::audit_page))
        .route("/ops/api/queues", get(actions::queues))
        .route(
            "/ops/api/queues/{queue}/{control}",
            post(actions::queue_control),
        )
        .route("/ops/api/jobs", get(actions::jobs))
        .route("/ops/api/jobs/bulk", post(actions::bulk))
        .route("/ops/api/jobs/dead", get(actions::dead_jobs))
        .route("/ops/api/jobs/{id}", get(actions::job))
        .route("/ops/api/jobs/{id}/{action}", post(actions::job_action))
        .route("/ops/api/workers", get(actions::workers))
        .route(
            "/ops/api/workers/{id}/{request}",
            post(actions::worker_request),
        )
        .route("/ops/api/history", get(actions::history))
        .route("/ops/api/audit", get(actions::audit))
        .with_state(state);
    let dashboard = board::router(&app.platform().queue);
    // Orchestrators probe health without a credential; it reveals nothing.
    let probes = Router::new()
        .route("/healthz", get(platform::telemetry::healthz))
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
    let probe_transport = transport.serving_any_transport();
    crate::middleware::apply(guarded, transport, None).merge(crate::middleware::apply(
        probes,
        probe_transport,
        None,
    ))
}
