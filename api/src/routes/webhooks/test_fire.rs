//! `POST /webhooks/endpoints/{endpoint_id}/test`: a signed
//! `webhook.test_fire` delivery sent at once, and a verdict a developer can
//! act on.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use platform::webhooks::AttemptReport;
use serde::{Deserialize, Serialize};
use serde_json::json;
use storage::ids::{DeliveryId, EventId};
use storage::webhooks::{Delivery, DeliveryKind};
use utoipa::ToSchema;

use super::endpoints::{endpoint_of, parse_endpoint_id};
use super::on_demand::{deliver_now, spend_endpoint_budget};
use super::wire::DeliveryOut;
use crate::endpoints;
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::ApiPath;
use crate::principal::Credential;
use crate::state::AppState;

/// What a test fire found.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TestFireOut {
    /// `Verified` (2xx), `Signature rejected` (401 or 403), `Handler error`
    /// (any other status), `Connection failed` or `Timeout` (10 seconds).
    pub verdict: String,
    /// The test delivery with its attempt.
    pub delivery: DeliveryOut,
}

/// The verdict of a test fire's attempt.
pub fn verdict(report: &AttemptReport) -> &'static str {
    use storage::webhooks::AttemptOutcome;
    match report.outcome {
        AttemptOutcome::Succeeded => "Verified",
        AttemptOutcome::HttpError if matches!(report.status_code, Some(401 | 403)) => {
            "Signature rejected"
        }
        AttemptOutcome::HttpError => "Handler error",
        AttemptOutcome::Timeout => "Timeout",
        AttemptOutcome::ConnectionFailed | AttemptOutcome::Refused => "Connection failed",
    }
}

/// Sends a signed `webhook.test_fire` delivery to the endpoint now and
/// reports the verdict. 5 per minute per endpoint.
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpoint_id}/test",
    tag = "webhooks",
    operation_id = "test_webhook_endpoint",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 201, description = "The test delivery made, and its verdict", body = TestFireOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
        (status = 429, description = "Over 5 test fires per minute for this endpoint", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn test_fire(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(endpoint_id): ApiPath<String>,
) -> Result<(StatusCode, Json<TestFireOut>), ApiError> {
    let tenant = principal.tenant();
    let endpoint = endpoint_of(&state, &tenant, &parse_endpoint_id(&endpoint_id)?).await?;
    spend_endpoint_budget(
        &state,
        &endpoint,
        "test_fire",
        endpoints::TEST_FIRES_PER_ENDPOINT,
    )
    .await?;
    let now = state.store().clock().now();
    let template = Delivery {
        id: DeliveryId::generate(),
        endpoint_id: endpoint.id.clone(),
        agency_id: endpoint.agency_id.clone(),
        kind: DeliveryKind::TestFire,
        replay_of: None,
        event_id: EventId::generate(),
        event_type: "webhook.test_fire".to_owned(),
        api_version: storage::rules::events::API_VERSION.to_owned(),
        occurred_at: now,
        is_sandbox: tenant.environment.is_sandbox(),
        data: json!({
            "endpoint_id": endpoint.id,
            "message": "Test delivery from the Media Agency Listing API",
        }),
        status: storage::webhooks::DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: None,
        created_at: now,
        completed_at: None,
    };
    let delivery = state
        .store()
        .webhooks()
        .create_manual(&endpoint, DeliveryKind::TestFire, &template)
        .await?;
    let (delivery, attempts, report) = deliver_now(&state, &endpoint, delivery).await?;
    // 201 like a replay: both make a delivery, shown in the history.
    Ok((
        StatusCode::CREATED,
        Json(TestFireOut {
            verdict: verdict(&report).to_owned(),
            delivery: DeliveryOut::new(delivery, Some(attempts)),
        }),
    ))
}
