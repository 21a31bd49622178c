//! `PATCH /listings/{listing_number}/status`: move a listing along its lifecycle.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use storage::listings::StatusChange;
use storage::rules::listing_status::ListingStatus;
use utoipa::ToSchema;

use super::read::status_choices;
use super::wire::ListingOut;
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiJson, ApiPath};
use crate::principal::Principal;
use crate::state::AppState;

/// Body of the status change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusPatch {
    /// The new status, in any case and spacing (`Off Market`, `off_market`). `status` is accepted as an alias.
    #[serde(alias = "status")]
    new_status: String,
}

/// The listing after a status change.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StatusChangeOut {
    /// The listing, with its new status.
    #[serde(flatten)]
    pub listing: ListingOut,
    /// The status before the change.
    pub previous_status: String,
}

/// Changes a listing's status, if it is activated and billed and the lifecycle allows the move.
#[utoipa::path(
    patch,
    path = "/listings/{listing_number}/status",
    tag = "listings",
    operation_id = "update_listing_status",
    params(("listing_number" = String, Path, description = "The listing's number")),
    request_body = StatusPatch,
    responses(
        (status = 200, description = "The listing with its new status", body = StatusChangeOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks listings:write", body = ErrorEnvelope),
        (status = 404, description = "listing_not_found", body = ErrorEnvelope),
        (status = 409, description = "listing_not_activated, no_op_transition, or listing_status_conflict when another change moved the listing first", body = ErrorEnvelope),
        (status = 422, description = "lifecycle_violation, or validation.failed for an unknown status", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub async fn update_listing_status(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(listing_number): ApiPath<String>,
    ApiJson(body): ApiJson<StatusPatch>,
) -> Result<Json<StatusChangeOut>, ApiError> {
    let to = ListingStatus::parse(&body.new_status)
        .ok_or_else(|| ApiError::field("new_status", status_choices()))?;
    let change = state
        .store()
        .listings()
        .change_status(&principal.tenant(), &listing_number, to)
        .await?;
    let transition = match change {
        StatusChange::Changed(transition) => *transition,
        StatusChange::Overtaken { expected, current } => {
            return Err(ApiError::ListingStatusConflict {
                expected: expected.display(),
                current: current.display(),
            });
        }
    };
    Ok(Json(StatusChangeOut {
        listing: ListingOut::new(&transition.listing, state.urls()),
        previous_status: transition.previous.display().to_owned(),
    }))
}
