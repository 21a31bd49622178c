//! What a process of the platform tells its operators: logs (tracing to
//! stderr, text or JSON; panics logged through tracing so a request's carry
//! its request id; keys, secrets and passwords never recorded), Prometheus
//! metrics (every family described; job duration and outcome by kind are
//! recorded by the handlers; queue depth and the oldest job's age by queue
//! and state are read at scrape time) and health
//! (`/healthz`: the process runs; `/readyz`: its database and queue answer).
//!
//! `api serve` mounts these on its ops listener; `workers run` serves them on
//! its own status listener (`--status-listen`).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use crate::admin::QueueAdmin;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clap::ValueEnum;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde_json::json;
use tokio::sync::watch;
use tracing_subscriber::EnvFilter;

use crate::Platform;

/// Log line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber and the panic hook. `default_level` applies
/// when `RUST_LOG` is unset. Calling it twice is harmless.
pub fn init(format: LogFormat, default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    if installed.is_ok() {
        install_panic_hook();
    }
}

/// Logs panics as tracing errors, inside whatever span is current (for a
/// request: its request id), then hands them to the previous hook (which prints
/// the location and, with `RUST_BACKTRACE`, the backtrace). The request gets a
/// 500 envelope from the panic guard and the process keeps serving. Installing
/// twice is harmless.
pub fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            log_panic(info);
            previous(info);
        }));
    });
}

fn log_panic(info: &std::panic::PanicHookInfo<'_>) {
    {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_owned());
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        tracing::error!(%message, %location, "panic");
    }
}

/// Latency buckets (seconds) of every `*_duration_seconds` histogram.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// How long a readiness check waits for the database and the queue.
const READINESS_TIMEOUT: Duration = Duration::from_secs(3);

/// Content type of the Prometheus text exposition format.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide metrics recorder (once) and returns its handle.
pub fn install_metrics() -> PrometheusHandle {
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
            describe_metrics();
            handle
        })
        .clone()
}

/// Every metric family the platform records, with its `# HELP` text.
pub const METRIC_FAMILIES: [(&str, &str); 13] = [
    (
        "listing_api_build_info",
        "The running build: its version, always 1.",
    ),
    (
        "http_requests_total",
        "HTTP requests answered, by method, route template and status.",
    ),
    (
        "http_request_duration_seconds",
        "Time to answer an HTTP request, by method, route template and status.",
    ),
    (
        "jobs_total",
        "Job runs (and maintenance tasks) finished, by kind and outcome (succeeded, failed).",
    ),
    (
        "job_duration_seconds",
        "Time a job run (or maintenance task) took, by kind and outcome.",
    ),
    (
        "jobs_deferred_total",
        "Jobs put back because their agency was at its concurrency cap, by kind.",
    ),
    (
        "events_dispatched_total",
        "Committed events fanned out to webhook deliveries, by event type.",
    ),
    (
        "webhook_attempts_total",
        "Webhook delivery attempts, by outcome.",
    ),
    (
        "webhook_attempt_duration_seconds",
        "Time a webhook delivery attempt took.",
    ),
    (
        "webhook_deliveries_deferred_total",
        "Webhook deliveries held back by an endpoint's hourly budget.",
    ),
    (
        "queue_depth",
        "Jobs waiting or kept, by queue and state (pending, scheduled, retrying, running, dead); finished jobs are not depth.",
    ),
    (
        "queue_finished_jobs",
        "Finished jobs kept until the retention purge, by queue.",
    ),
    (
        "queue_oldest_job_age_seconds",
        "Seconds since the oldest job of a queue in a state (pending, scheduled, running, dead) was pushed; 0 when there is none.",
    ),
];

/// Describes every family (the exposition's `# HELP` lines) and sets the
/// build's info metric.
fn describe_metrics() {
    for (name, help) in METRIC_FAMILIES {
        if name.ends_with("_seconds") && !name.starts_with("queue_") {
            metrics::describe_histogram!(name, metrics::Unit::Seconds, help);
        } else if name.ends_with("_total") {
            metrics::describe_counter!(name, help);
        } else {
            metrics::describe_gauge!(name, help);
        }
    }
    metrics::gauge!("listing_api_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
}

/// Refreshes the queue gauges (depth, finished jobs, oldest ages) and renders
/// every metric as Prometheus text.
pub async fn scrape(handle: &PrometheusHandle, admin: &QueueAdmin) -> String {
    match admin.depths().await {
        Ok(depths) => {
            for depth in depths {
                for (state, value) in [
                    ("pending", depth.pending),
                    ("scheduled", depth.scheduled),
                    ("retrying", depth.retrying),
                    ("running", depth.running),
                    ("dead", depth.dead),
                ] {
                    metrics::gauge!("queue_depth", "queue" => depth.queue.clone(), "state" => state)
                        .set(value as f64);
                }
                metrics::gauge!("queue_finished_jobs", "queue" => depth.queue.clone())
                    .set(depth.done as f64);
            }
        }
        Err(err) => tracing::warn!(%err, "queue depth unavailable for /metrics"),
    }
    match admin.oldest_jobs().await {
        Ok(oldest) => {
            for job in oldest {
                metrics::gauge!("queue_oldest_job_age_seconds", "queue" => job.queue, "state" => job.state)
                    .set(job.age_seconds);
            }
        }
        Err(err) => tracing::warn!(%err, "oldest job ages unavailable for /metrics"),
    }
    handle.render()
}

/// A dependency that did not answer a readiness check.
#[derive(Debug)]
pub struct NotReady {
    /// `database` or `queue`.
    pub component: &'static str,
    /// What went wrong (logged, never served).
    pub detail: String,
}

/// Whether the process can do its work: the database and the queue answer.
pub async fn readiness(state: &Platform) -> Result<(), NotReady> {
    let not_ready = |component, detail: String| NotReady { component, detail };
    match tokio::time::timeout(READINESS_TIMEOUT, state.store.db().ping()).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => return Err(not_ready("database", err.to_string())),
        Err(_) => return Err(not_ready("database", "no answer in time".to_owned())),
    }
    match tokio::time::timeout(READINESS_TIMEOUT, state.queue.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) => Err(not_ready("queue", err.to_string())),
        Err(_) => Err(not_ready("queue", "no answer in time".to_owned())),
    }
}

/// This host's name: `$HOSTNAME`, else `/etc/hostname`.
pub fn host_name() -> Option<String> {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}

/// `/healthz`: the process is up and serving.
pub async fn healthz() -> Response {
    (StatusCode::OK, axum::Json(json!({"status": "ok"}))).into_response()
}

/// The body and status of `/readyz` for `state`.
pub async fn readyz_response(state: &Platform) -> Response {
    match readiness(state).await {
        Ok(()) => (StatusCode::OK, axum::Json(json!({"status": "ready"}))).into_response(),
        Err(NotReady { component, detail }) => {
            tracing::warn!(component, %detail, "not ready");
            // The envelope of the API's answers, so one probe parser reads both.
            let error = json!({
                "code": "server.not_ready",
                "message": format!("The {component} does not answer."),
                "details": {"component": component},
            });
            (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(json!({ "error": error })),
            )
                .into_response()
        }
    }
}

#[derive(Clone)]
struct StatusState {
    platform: Platform,
    admin: QueueAdmin,
    metrics: PrometheusHandle,
}

/// The workers' status listener: `/healthz`, `/readyz` and `/metrics`. It
/// serves nothing else and takes no actions, so it needs no credential; bind
/// it where only the orchestrator and the metrics scraper reach it.
pub fn status_router(platform: Platform, metrics: PrometheusHandle) -> Router {
    let state = StatusState {
        admin: QueueAdmin::new(platform.queue.clone()),
        platform,
        metrics,
    };
    Router::new()
        .route("/healthz", get(healthz))
        .route(
            "/readyz",
            get(|State(state): State<StatusState>| async move {
                readyz_response(&state.platform).await
            }),
        )
        .route(
            "/metrics",
            get(|State(state): State<StatusState>| async move {
                (
                    [(header::CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE)],
                    scrape(&state.metrics, &state.admin).await,
                )
            }),
        )
        .with_state(state)
        .layer(axum::middleware::map_response(status_headers))
}

/// The headers every answer of the API's listeners carries, on the status
/// listener's too: never sniffed, never cached.
async fn status_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// Binds the status listener (so a taken port fails the start, not later).
pub async fn bind_status(listen: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|err| anyhow::anyhow!("status listener {listen}: {err}"))
}

/// Serves `router` on `listener` until `shutdown` turns true.
pub async fn serve_status(
    listener: tokio::net::TcpListener,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    tracing::info!(address = %listener.local_addr()?, "status listener (healthz, readyz, metrics)");
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        })
        .await?;
    Ok(())
}
