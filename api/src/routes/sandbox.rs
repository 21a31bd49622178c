//! `POST /agency/sandbox/seed`: a sandbox key queues the seeding job, which
//! gives the agency's sandbox exactly its three fixture listings (re-seeding
//! resets them). The answer names the operation and the fixtures' numbers.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use platform::PushOptions;
use platform::kinds::SeedSandbox;
use serde::{Deserialize, Serialize};
use storage::Environment;
use storage::ids::OperationId;
use storage::people::sandbox::{FIXTURES, fixture_number};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorEnvelope};
use crate::principal::Principal;
use crate::state::AppState;

/// A queued seeding.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SeedOut {
    /// The operation; its progress ends `completed`.
    pub operation_id: String,
    /// `queued`.
    pub status: String,
    /// The fixtures' numbers: `snd_active_…`, `snd_coming_soon_…`, `snd_sold_…`.
    pub listing_numbers: Vec<String>,
}

/// Re-seeds the sandbox's three fixture listings (sandbox keys only).
#[utoipa::path(
    post,
    path = "/agency/sandbox/seed",
    tag = "developer",
    operation_id = "seed_sandbox",
    responses(
        (status = 202, description = "The seeding job is queued", body = SeedOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks listings:write, or is a live key (permission_denied)", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn seed(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<(StatusCode, Json<SeedOut>), ApiError> {
    if principal.environment != Environment::Sandbox {
        return Err(ApiError::Forbidden(
            "Seeding acts on the sandbox pool only: use a sandbox key (sk_test_ or ma_test_ak_)."
                .to_owned(),
        ));
    }
    let operation_id = OperationId::generate();
    let job = SeedSandbox {
        operation_id: operation_id.clone(),
        agency_id: principal.agency_id.clone(),
    };
    state
        .platform()
        .queue
        .push(job, PushOptions::default())
        .await
        .map_err(ApiError::internal)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(SeedOut {
            operation_id: operation_id.to_string(),
            status: "queued".to_owned(),
            listing_numbers: FIXTURES
                .iter()
                .map(|fixture| fixture_number(&principal.agency_id, fixture))
                .collect(),
        }),
    ))
}
