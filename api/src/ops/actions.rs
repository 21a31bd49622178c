//! The job console as JSON routes for scripts: queue depth with pause state,
//! jobs by filter, one job with its attempts, the actions on one job or on
//! every job a filter finds, pause and resume, worker processes with quiet
//! and stop, history and the audit log; the metrics scrape and readiness.

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use platform::admin::{DeadJob, JobWindow, QueueAdmin, QueueDepth};
use platform::telemetry;
use serde::Serialize;
use serde_json::{Value, json};

use super::OpsState;
use super::auth::OpsActor;
use super::console::{Console, ConsoleError, FilterInput, JobAction};
use super::pages::{range_named, read_history, shown_state};
use crate::error::{ApiError, Resource};

impl From<ConsoleError> for ApiError {
    fn from(err: ConsoleError) -> Self {
        match err {
            ConsoleError::Invalid(field, reason) => ApiError::field(field, reason),
            ConsoleError::NotFound => ApiError::NotFound(Resource::Job),
            ConsoleError::Failed(cause) => ApiError::internal(cause),
        }
    }
}

fn console(state: &OpsState) -> Console<'_> {
    Console::new(state.app.store(), &state.app.platform().queue)
}

/// A queue as operators see it.
#[derive(Debug, Serialize)]
pub struct QueueOut {
    /// Depth by state.
    #[serde(flatten)]
    pub depth: QueueDepth,
    /// Whether workers stopped taking its jobs.
    pub paused: bool,
}

fn admin(state: &OpsState) -> QueueAdmin {
    QueueAdmin::new(state.app.platform().queue.clone())
}

/// Every queue with its depth and pause state.
pub(super) async fn queues(State(state): State<OpsState>) -> Result<Json<Vec<QueueOut>>, ApiError> {
    let depths = admin(&state).depths().await.map_err(ApiError::internal)?;
    let paused = state.app.store().schedules().paused_queues().await?;
    Ok(Json(
        depths
            .into_iter()
            .map(|depth| QueueOut {
                paused: paused.contains(&depth.queue),
                depth,
            })
            .collect(),
    ))
}

/// Pauses or resumes a queue on every worker process.
pub(super) async fn queue_control(
    State(state): State<OpsState>,
    Extension(actor): Extension<OpsActor>,
    Path((queue, control)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let paused = match control.as_str() {
        "pause" => true,
        "resume" => false,
        _ => return Err(ApiError::field("control", "is pause or resume")),
    };
    let queue = console(&state).set_paused(&queue, paused, &actor.0).await?;
    Ok(Json(json!({"queue": queue, "paused": paused})))
}

/// Dead jobs, most recent first, with their last error.
pub(super) async fn dead_jobs(
    State(state): State<OpsState>,
) -> Result<Json<Vec<DeadJob>>, ApiError> {
    Ok(Json(
        admin(&state)
            .dead_jobs(200)
            .await
            .map_err(ApiError::internal)?,
    ))
}

/// The jobs query: a filter and how many to list.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct JobsQuery {
    #[serde(flatten)]
    filter: FilterInput,
    limit: Option<String>,
}

/// Jobs a filter finds, oldest first: at most `limit` (50; 1 to 1000) of
/// them, and `count`, every match (for a search or agency filter of done
/// jobs, in push order, counted past the window and a thousand, then
/// `count_capped`); `searched`, when free text on the Redis queue's done
/// jobs stopped at its budget, how many it read (newest first, then); for a
/// listing number, also the runs no queue holds (`runs_in_process`,
/// `more_runs_in_process`).
pub(super) async fn jobs(
    State(state): State<OpsState>,
    Query(query): Query<JobsQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = match query.limit.as_deref() {
        None => 50,
        Some(limit) => limit
            .parse::<usize>()
            .ok()
            .filter(|l| (1..=1_000).contains(l))
            .ok_or_else(|| ApiError::field("limit", "is a number from 1 to 1000"))?,
    };
    let window = JobWindow {
        offset: 0,
        limit: Some(limit as u64),
    };
    let found = console(&state)
        .search(query.filter.checked()?, window)
        .await?;
    Ok(Json(found.into_json()))
}

/// One job with every attempt.
pub(super) async fn job(
    State(state): State<OpsState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    console(&state)
        .job_json(&id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound(Resource::Job))
}

/// An action on one job: retry, discard, run-now or cancel.
pub(super) async fn job_action(
    State(state): State<OpsState>,
    Extension(actor): Extension<OpsActor>,
    Path((id, action)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let action = JobAction::parse(&action)
        .ok_or_else(|| ApiError::field("action", "is retry, discard, run-now or cancel"))?;
    console(&state).act_on_job(action, &id, &actor.0).await?;
    Ok(Json(json!({"id": id, action.done(): true})))
}

/// The bulk action's body: the action and its filter.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct BulkBody {
    action: Option<String>,
    #[serde(flatten)]
    filter: FilterInput,
}

/// An action on every job a filter finds → `{action, count, ids}`.
pub(super) async fn bulk(
    State(state): State<OpsState>,
    Extension(actor): Extension<OpsActor>,
    Json(body): Json<BulkBody>,
) -> Result<Json<Value>, ApiError> {
    let action = body
        .action
        .as_deref()
        .and_then(JobAction::parse)
        .ok_or_else(|| ApiError::field("action", "is retry, discard, run-now or cancel"))?;
    let ids = console(&state)
        .act_on_filter(action, body.filter.checked()?, &actor.0)
        .await?;
    Ok(Json(
        json!({"action": action.name(), "count": ids.len(), "ids": ids}),
    ))
}

/// Every worker process.
pub(super) async fn workers(State(state): State<OpsState>) -> Result<Json<Value>, ApiError> {
    let store = state.app.store();
    let now = store.clock().now();
    let items: Vec<Value> = store
        .worker_processes()
        .list()
        .await?
        .iter()
        .map(|worker| worker_json(worker, now))
        .collect();
    Ok(Json(json!({"items": items})))
}

/// A worker process as JSON (the CLI prints the same).
pub fn worker_json(
    worker: &storage::background::job_console::WorkerProcess,
    now: storage::Timestamp,
) -> Value {
    json!({
        "id": worker.id,
        "host": worker.host,
        "pid": worker.pid,
        "version": worker.version,
        "queues": serde_json::from_str::<Value>(&worker.queues).unwrap_or(Value::Null),
        "in_hand": worker.in_hand,
        "started_at": worker.started_at.to_rfc3339(),
        "heartbeat_at": worker.heartbeat_at.to_rfc3339(),
        "heartbeat_seconds": worker.heartbeat_seconds,
        "state": shown_state(worker, now),
        "requested": worker.requested,
    })
}

/// Asks a worker process to go quiet or stop.
pub(super) async fn worker_request(
    State(state): State<OpsState>,
    Extension(actor): Extension<OpsActor>,
    Path((id, request)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let request = storage::background::job_console::WorkerRequest::parse(&request)
        .ok_or_else(|| ApiError::field("request", "is quiet or stop"))?;
    match console(&state).request_worker(&id, request, &actor.0).await {
        Ok(()) => Ok(Json(json!({"id": id, "requested": request.name()}))),
        Err(ConsoleError::NotFound) => Err(ApiError::NotFound(Resource::Worker)),
        Err(err) => Err(err.into()),
    }
}

/// The history query.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct HistoryQuery {
    range: Option<String>,
    queue: Option<String>,
}

/// Finished runs per bucket over a period (`hour`, `day`, `month`), with
/// the breakdowns by agency and endpoint.
pub(super) async fn history(
    State(state): State<OpsState>,
    Query(query): Query<HistoryQuery>,
) -> Result<Json<Value>, ApiError> {
    let range = range_named(query.range.as_deref())
        .ok_or_else(|| ApiError::field("range", "is hour, day or month"))?;
    let queue = match query.queue.as_deref().filter(|q| !q.is_empty()) {
        Some(queue) => Some(super::console::known_queue(queue)?),
        None => None,
    };
    let history = read_history(state.app.store(), range, queue).await?;
    let buckets: Vec<Value> = history
        .buckets
        .iter()
        .map(|(bucket, point)| {
            let mut item = json!(point);
            item["bucket"] = json!(bucket);
            item
        })
        .collect();
    Ok(Json(json!({
        "range": range.name,
        "bucket_seconds": range.resolution.seconds(),
        "queue": queue,
        "totals": history.totals,
        "buckets": buckets,
        "agencies": history.agencies,
        "endpoints": history.endpoints,
    })))
}

/// The latest operator actions.
pub(super) async fn audit(State(state): State<OpsState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(console(&state).audit_json().await?))
}

/// Prometheus text: queue depth is read now, the rest is what was recorded.
pub(super) async fn metrics(State(state): State<OpsState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, telemetry::PROMETHEUS_CONTENT_TYPE)],
        telemetry::scrape(&state.metrics, &admin(&state)).await,
    )
}

pub(super) async fn readyz(State(state): State<OpsState>) -> Result<Json<Value>, ApiError> {
    match telemetry::readiness(state.app.platform()).await {
        Ok(()) => Ok(Json(json!({"status": "ready"}))),
        Err(not_ready) => {
            tracing::warn!(component = not_ready.component, detail = %not_ready.detail, "not ready");
            Err(ApiError::NotReady(not_ready.component))
        }
    }
}
