//! What apalis-board lacks, as routes: queue depth with pause state, dead jobs
//! with their last error, retry and discard of a dead job, pause and resume of
//! a queue; the metrics scrape and readiness.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;
use jobs::admin::{DeadJob, QueueAdmin, QueueDepth};
use serde::Serialize;
use serde_json::{Value, json};
use workers::telemetry;

use super::OpsState;
use crate::error::ApiError;

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

fn known_queue(queue: &str) -> Result<&'static str, ApiError> {
    jobs::kinds::QUEUES
        .iter()
        .copied()
        .find(|q| *q == queue)
        .ok_or_else(|| ApiError::field("queue", "is not a queue"))
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

async fn set_paused(state: &OpsState, queue: &str, paused: bool) -> Result<Json<Value>, ApiError> {
    let queue = known_queue(queue)?;
    state
        .app
        .store()
        .schedules()
        .set_paused(queue, paused)
        .await?;
    tracing::info!(queue, paused, "queue control changed by an operator");
    Ok(Json(json!({"queue": queue, "paused": paused})))
}

/// Pauses a queue on every worker process.
pub(super) async fn pause(
    State(state): State<OpsState>,
    Path(queue): Path<String>,
) -> Result<Json<Value>, ApiError> {
    set_paused(&state, &queue, true).await
}

/// Resumes a paused queue.
pub(super) async fn resume(
    State(state): State<OpsState>,
    Path(queue): Path<String>,
) -> Result<Json<Value>, ApiError> {
    set_paused(&state, &queue, false).await
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

/// Puts a dead job back in its queue.
pub(super) async fn retry(
    State(state): State<OpsState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if admin(&state).retry(&id).await.map_err(ApiError::internal)? {
        tracing::info!(job = %id, "dead job retried by an operator");
        Ok(Json(json!({"id": id, "retried": true})))
    } else {
        Err(ApiError::NotFound(crate::error::Resource::DeadJob))
    }
}

/// Throws a dead job away.
pub(super) async fn discard(
    State(state): State<OpsState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if admin(&state)
        .discard(&id)
        .await
        .map_err(ApiError::internal)?
    {
        tracing::info!(job = %id, "dead job discarded by an operator");
        Ok(Json(json!({"id": id, "discarded": true})))
    } else {
        Err(ApiError::NotFound(crate::error::Resource::DeadJob))
    }
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
