//! Delivery history: `GET /webhooks/endpoints/{endpoint_id}/deliveries` and
//! `GET /webhooks/deliveries/{delivery_id}` with its attempts.

use axum::Json;
use axum::extract::State;

use storage::ids::DeliveryId;

use super::endpoints::{endpoint_of, parse_endpoint_id};
use super::wire::{DeliveryOut, PageQuery};
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiPath, ApiQuery};
use crate::pagination::{CursorScope, PageOut, page_limit};
use crate::principal::Credential;
use crate::state::AppState;

/// Lists an endpoint's deliveries, newest first.
#[utoipa::path(
    get,
    path = "/webhooks/endpoints/{endpoint_id}/deliveries",
    tag = "webhooks",
    operation_id = "list_webhook_deliveries",
    params(("endpoint_id" = String, Path, description = "The endpoint's id"), PageQuery),
    responses(
        (status = 200, description = "A page of deliveries", body = PageOut<DeliveryOut>),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:read", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
        (status = 422, description = "Invalid limit or cursor", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = []))
)]
pub(crate) async fn list_deliveries(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(endpoint_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<PageOut<DeliveryOut>>, ApiError> {
    let tenant = principal.tenant();
    let endpoint = endpoint_of(&state, &tenant, &parse_endpoint_id(&endpoint_id)?).await?;
    let limit = page_limit(query.limit)?;
    let scope = CursorScope {
        collection: "webhook_deliveries",
        tenant,
        filters: format!("endpoint={}", endpoint.id),
    };
    let before = state
        .cursors()
        .open_param(&scope, query.cursor.as_deref())?;
    let page = state
        .store()
        .webhooks()
        .deliveries(&endpoint.id, before.as_ref(), limit)
        .await?;
    Ok(Json(
        state
            .cursors()
            .envelope(&scope, page, |d| DeliveryOut::new(d, None)),
    ))
}

/// Reads one delivery with its attempts.
#[utoipa::path(
    get,
    path = "/webhooks/deliveries/{delivery_id}",
    tag = "webhooks",
    operation_id = "get_webhook_delivery",
    params(("delivery_id" = String, Path, description = "The delivery's id")),
    responses(
        (status = 200, description = "The delivery and its attempts", body = DeliveryOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:read", body = ErrorEnvelope),
        (status = 404, description = "webhook_delivery_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = []))
)]
pub(crate) async fn get_delivery(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(delivery_id): ApiPath<String>,
) -> Result<Json<DeliveryOut>, ApiError> {
    let webhooks = state.store().webhooks();
    let delivery = webhooks
        .delivery(&principal.tenant(), &parse_delivery_id(&delivery_id)?)
        .await?
        .ok_or(ApiError::NotFound(Resource::WebhookDelivery))?;
    let attempts = webhooks.attempts(&delivery.id).await?;
    Ok(Json(DeliveryOut::new(delivery, Some(attempts))))
}

/// The delivery id a path names; text that cannot be one names no delivery.
pub(super) fn parse_delivery_id(text: &str) -> Result<DeliveryId, ApiError> {
    DeliveryId::parse(text).ok_or(ApiError::NotFound(Resource::WebhookDelivery))
}
