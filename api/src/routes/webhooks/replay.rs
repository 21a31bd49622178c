//! `POST /webhooks/deliveries/{delivery_id}/replay`: sends a past delivery's
//! event again, now.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use storage::webhooks::DeliveryKind;

use super::deliveries::parse_delivery_id;
use super::endpoints::endpoint_of;
use super::on_demand::{deliver_now, spend_endpoint_budget};
use super::wire::DeliveryOut;
use crate::endpoints;
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::ApiPath;
use crate::principal::Credential;
use crate::state::AppState;

/// Replays a past delivery now: the same event (same `X-Event-Id` and
/// data), a new nonce, signed with the endpoint's current secret, one
/// attempt without backoff. 10 per minute per endpoint.
#[utoipa::path(
    post,
    path = "/webhooks/deliveries/{delivery_id}/replay",
    tag = "webhooks",
    operation_id = "replay_webhook_delivery",
    params(("delivery_id" = String, Path, description = "The delivery to replay")),
    responses(
        (status = 201, description = "The replay delivery with its attempt", body = DeliveryOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_delivery_not_found", body = ErrorEnvelope),
        (status = 429, description = "Over 10 replays per minute for this endpoint", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn replay_delivery(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(delivery_id): ApiPath<String>,
) -> Result<(StatusCode, Json<DeliveryOut>), ApiError> {
    let tenant = principal.tenant();
    let webhooks = state.store().webhooks();
    let original = webhooks
        .delivery(&tenant, &parse_delivery_id(&delivery_id)?)
        .await?
        .ok_or(ApiError::NotFound(Resource::WebhookDelivery))?;
    let endpoint = endpoint_of(&state, &tenant, &original.endpoint_id).await?;
    spend_endpoint_budget(&state, &endpoint, "replay", endpoints::REPLAYS_PER_ENDPOINT).await?;
    let mut template = original.clone();
    template.replay_of = Some(original.id.clone());
    let replay = webhooks
        .create_manual(&endpoint, DeliveryKind::Replay, &template)
        .await?;
    let (delivery, attempts, _) = deliver_now(&state, &endpoint, replay).await?;
    Ok((
        StatusCode::CREATED,
        Json(DeliveryOut::new(delivery, Some(attempts))),
    ))
}
