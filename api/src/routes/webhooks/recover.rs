//! Recovering what an endpoint missed: `POST
//! /webhooks/endpoints/{endpoint_id}/recover` re-sends every delivery that
//! failed since a time, in one job at its own pace; `GET
//! /webhooks/endpoints/{endpoint_id}/recoveries/{recovery_id}` reads its
//! progress.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use platform::PushOptions;
use platform::kinds::RecoverWebhookEndpoint;
use serde::{Deserialize, Serialize};
use storage::Timestamp;
use storage::ids::RecoveryId;
use storage::webhooks::{EndpointStatus, Recovery, RecoveryStatus};
use utoipa::ToSchema;

use super::endpoints::{endpoint_of, parse_endpoint_id};
use super::on_demand::spend_endpoint_budget;
use crate::endpoints;
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiJson, ApiPath};
use crate::principal::Credential;
use crate::state::AppState;

/// How far back a recovery reaches: deliveries are kept 30 days.
pub const MAX_RECOVERY_DAYS: i64 = 30;

/// Body of `POST …/recover`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoverIn {
    /// Re-send every delivery that failed for good at or after this time
    /// (RFC 3339; at most 30 days ago, deliveries are kept that long).
    #[schema(format = DateTime)]
    since: String,
}

/// A recovery and how far it got.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RecoveryOut {
    /// `whr_…`.
    pub id: String,
    /// The endpoint.
    pub endpoint_id: String,
    /// Deliveries that failed for good at or after this time are re-sent.
    pub since: String,
    /// `queued`, `running`, `completed` or `failed` (stopped early: see `error`).
    pub status: String,
    /// Deliveries it re-sends (those failed between `since` and its creation).
    pub total: i32,
    /// Re-sent so far, each once, as a replay in the delivery log.
    pub resent: i32,
    /// Of those, received (2xx).
    pub succeeded: i32,
    /// Of those, failed again (replay them, or recover again once the
    /// receiver is fixed).
    pub failed: i32,
    /// Why it stopped early, and what to do.
    pub error: Option<String>,
    /// When it was asked for.
    pub created_at: String,
    /// When it ended.
    pub finished_at: Option<String>,
}

impl From<Recovery> for RecoveryOut {
    fn from(recovery: Recovery) -> Self {
        Self {
            id: recovery.id.to_string(),
            endpoint_id: recovery.endpoint_id.to_string(),
            since: recovery.since.to_rfc3339(),
            status: recovery.status.as_str().to_owned(),
            total: recovery.total,
            resent: recovery.resent,
            succeeded: recovery.succeeded,
            failed: recovery.failed,
            error: recovery.error,
            created_at: recovery.created_at.to_rfc3339(),
            finished_at: recovery.finished_at.map(|at| at.to_rfc3339()),
        }
    }
}

/// Re-sends every delivery to the endpoint that failed for good since
/// `since`, oldest first, once each, in one job at its own pace (20 a
/// second). Each re-send is a replay in the delivery log. One recovery of an
/// endpoint at a time; 2 per minute per endpoint.
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpoint_id}/recover",
    tag = "webhooks",
    operation_id = "recover_webhook_endpoint",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    request_body = RecoverIn,
    responses(
        (status = 202, description = "The recovery, queued; read its progress at GET …/recoveries/{recovery_id}", body = RecoveryOut),
        (status = 400, description = "Unparseable body", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: `since` is not a time, in the future or more than 30 days ago; the endpoint is disabled; a recovery of it is still running", body = ErrorEnvelope),
        (status = 429, description = "More than 2 recoveries of this endpoint in a minute", body = ErrorEnvelope),
        (status = 503, description = "server.not_ready: the job queue did not take the recovery (it is failed); repeat the request", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn recover_endpoint(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(endpoint_id): ApiPath<String>,
    ApiJson(body): ApiJson<RecoverIn>,
) -> Result<(StatusCode, Json<RecoveryOut>), ApiError> {
    let tenant = principal.tenant();
    let endpoint = endpoint_of(&state, &tenant, &parse_endpoint_id(&endpoint_id)?).await?;
    let since = DateTime::parse_from_rfc3339(body.since.trim())
        .map(|at| Timestamp::from(at.with_timezone(&Utc)))
        .map_err(|_| {
            ApiError::field(
                "since",
                "must be an RFC 3339 time, e.g. 2026-06-01T00:00:00Z",
            )
        })?;
    let now = state.store().clock().now();
    if since > now {
        return Err(ApiError::field("since", "must not be in the future"));
    }
    if since < now.plus_seconds(-MAX_RECOVERY_DAYS * 86_400) {
        return Err(ApiError::field(
            "since",
            "must be within the last 30 days: deliveries are kept that long",
        ));
    }
    if endpoint.status == EndpointStatus::Disabled {
        return Err(ApiError::field(
            "endpoint",
            "is disabled: fix the receiver, enable the endpoint, then recover",
        ));
    }
    spend_endpoint_budget(
        &state,
        &endpoint,
        "recover",
        endpoints::RECOVERIES_PER_ENDPOINT,
    )
    .await?;
    let webhooks = state.store().webhooks();
    let recovery = match webhooks.start_recovery(&endpoint, since).await? {
        Ok(recovery) => recovery,
        Err(running) => {
            return Err(ApiError::field(
                "endpoint",
                format!(
                    "is being recovered already ({}, {} of {} re-sent): wait for it to finish",
                    running.id, running.resent, running.total
                ),
            ));
        }
    };
    let job = RecoverWebhookEndpoint {
        recovery_id: recovery.id.clone(),
        endpoint_id: endpoint.id.clone(),
        agency_id: endpoint.agency_id.clone(),
    };
    if let Err(err) = state
        .platform()
        .queue
        .push(job, PushOptions::default())
        .await
    {
        // Nothing would ever run it: it fails at once, and the answer says
        // to repeat the request.
        let mut failed = recovery;
        failed.status = RecoveryStatus::Failed;
        failed.error = Some("the job queue did not take it: repeat the request".to_owned());
        webhooks.record_recovery(&failed).await?;
        return Err(err.into());
    }
    Ok((StatusCode::ACCEPTED, Json(recovery.into())))
}

/// Reads a recovery's progress.
#[utoipa::path(
    get,
    path = "/webhooks/endpoints/{endpoint_id}/recoveries/{recovery_id}",
    tag = "webhooks",
    operation_id = "get_webhook_recovery",
    params(
        ("endpoint_id" = String, Path, description = "The endpoint's id"),
        ("recovery_id" = String, Path, description = "The recovery's id (whr_…)"),
    ),
    responses(
        (status = 200, description = "The recovery", body = RecoveryOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:read", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found or operation_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = []))
)]
pub(crate) async fn get_recovery(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath((endpoint_id, recovery_id)): ApiPath<(String, String)>,
) -> Result<Json<RecoveryOut>, ApiError> {
    let tenant = principal.tenant();
    let endpoint = endpoint_of(&state, &tenant, &parse_endpoint_id(&endpoint_id)?).await?;
    let id = RecoveryId::parse(&recovery_id).ok_or(ApiError::NotFound(Resource::Operation))?;
    let recovery = state
        .store()
        .webhooks()
        .recovery(&tenant, &endpoint.id, &id)
        .await?
        .ok_or(ApiError::NotFound(Resource::Operation))?;
    Ok(Json(recovery.into()))
}
