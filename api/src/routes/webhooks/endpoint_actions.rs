//! The actions on an endpoint beyond editing it: `POST
//! /webhooks/endpoints/{endpoint_id}/disable`, `…/enable` and
//! `…/rotate-secret`.

use axum::Json;
use axum::extract::State;
use storage::webhooks::{
    DEFAULT_SECRET_OVERLAP_SECONDS, MANUALLY_DISABLED_REASON, MAX_SECRET_OVERLAP_SECONDS,
};

use super::endpoint_rules;
use super::endpoints::parse_endpoint_id;
use super::wire::{EndpointOut, EndpointWithSecretOut};
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiPath, OptionalJson};
use crate::principal::Credential;
use crate::state::AppState;

/// Disables an endpoint (reason `disabled_by_owner`).
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpoint_id}/disable",
    tag = "webhooks",
    operation_id = "disable_webhook_endpoint",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "The endpoint", body = EndpointOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn disable_endpoint(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(endpoint_id): ApiPath<String>,
) -> Result<Json<EndpointOut>, ApiError> {
    set_enabled(&state, &principal, &endpoint_id, false).await
}

/// Re-enables an endpoint and resets its failure count.
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpoint_id}/enable",
    tag = "webhooks",
    operation_id = "enable_webhook_endpoint",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "The endpoint", body = EndpointOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn enable_endpoint(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(endpoint_id): ApiPath<String>,
) -> Result<Json<EndpointOut>, ApiError> {
    set_enabled(&state, &principal, &endpoint_id, true).await
}

async fn set_enabled(
    state: &AppState,
    principal: &Credential,
    endpoint_id: &str,
    enabled: bool,
) -> Result<Json<EndpointOut>, ApiError> {
    let endpoint = state
        .store()
        .webhooks()
        .set_enabled(
            &principal.tenant(),
            &parse_endpoint_id(endpoint_id)?,
            enabled,
            MANUALLY_DISABLED_REASON,
        )
        .await?
        .ok_or(ApiError::NotFound(Resource::WebhookEndpoint))?;
    Ok(Json(endpoint.into()))
}

/// Body of `POST …/rotate-secret`, optional.
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotateSecretIn {
    /// Seconds the replaced secret keeps signing deliveries alongside the
    /// new one, so receivers can switch without a gap: 0 (it stops at once)
    /// to 604800 (7 days). Default 86400 (a day).
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 604800)]
    previous_secret_expires_in: Option<serde_json::Number>,
}

/// Replaces the signing secret; the new one is shown once. The replaced
/// one keeps signing deliveries too (a second signature in the header)
/// until `previous_secret_expires_at`.
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpoint_id}/rotate-secret",
    tag = "webhooks",
    operation_id = "rotate_webhook_secret",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    request_body(content = Option<RotateSecretIn>, content_type = "application/json", description = "Optional: how long the replaced secret keeps signing"),
    responses(
        (status = 200, description = "The endpoint and its new secret", body = EndpointWithSecretOut),
        (status = 400, description = "The body is not JSON", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
        (status = 415, description = "A body that is not sent as JSON", body = ErrorEnvelope),
        (status = 422, description = "previous_secret_expires_in out of range", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn rotate_secret(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(endpoint_id): ApiPath<String>,
    OptionalJson(body): OptionalJson<RotateSecretIn>,
) -> Result<Json<EndpointWithSecretOut>, ApiError> {
    let overlap = match body.unwrap_or_default().previous_secret_expires_in {
        None => DEFAULT_SECRET_OVERLAP_SECONDS,
        Some(number) => endpoint_rules::whole_number(&number)
            .filter(|seconds| (0..=MAX_SECRET_OVERLAP_SECONDS).contains(seconds))
            .ok_or_else(|| {
                ApiError::field(
                    "previous_secret_expires_in",
                    "is a whole number of seconds from 0 to 604800 (7 days)",
                )
            })?,
    };
    let id = parse_endpoint_id(&endpoint_id)?;
    let (endpoint, secret) = state
        .store()
        .webhooks()
        .rotate_secret(&principal.tenant(), &id, overlap)
        .await?
        .ok_or(ApiError::NotFound(Resource::WebhookEndpoint))?;
    Ok(Json(EndpointWithSecretOut {
        endpoint: endpoint.into(),
        secret,
    }))
}
