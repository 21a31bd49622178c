//! `POST /listings/{listing_number}/cancel`: cancel inside the no-fee window.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use storage::{Rule, StorageError};
use utoipa::ToSchema;

use super::wire::{ListingOut, MoneyOut};
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::ApiPath;
use crate::principal::Principal;
use crate::state::AppState;

/// The cancelled listing and the fee, which is always zero through the API.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CancellationOut {
    /// The listing, now Cancelled.
    #[serde(flatten)]
    pub listing: ListingOut,
    /// The status before cancelling.
    pub previous_status: String,
    /// Always {amount: 0, currency: USD}: the API cancels only inside the no-fee window.
    pub fee_applied: MoneyOut,
}

/// Cancels a listing at or before its no-fee cutoff.
#[utoipa::path(
    post,
    path = "/listings/{listing_number}/cancel",
    tag = "listings",
    operation_id = "cancel_listing",
    params(("listing_number" = String, Path, description = "The listing's number")),
    responses(
        (status = 200, description = "The cancelled listing", body = CancellationOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks listings:write", body = ErrorEnvelope),
        (status = 404, description = "listing_not_found", body = ErrorEnvelope),
        (status = 409, description = "outside_cancellation_window (details.remediation_url) or listing_already_cancelled", body = ErrorEnvelope),
        (status = 422, description = "lifecycle_violation: an archived listing", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub async fn cancel_listing(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(listing_number): ApiPath<String>,
) -> Result<Json<CancellationOut>, ApiError> {
    let transition = state
        .store()
        .listings()
        .cancel(&principal.tenant(), &listing_number)
        .await
        .map_err(|err| match err {
            StorageError::Rule(Rule::OutsideCancellationWindow { cutoff_rfc3339 }) => {
                ApiError::OutsideCancellationWindow {
                    cutoff: cutoff_rfc3339,
                    remediation_url: format!(
                        "{}/dashboard/listings/{}/cancel",
                        state.urls().base_url,
                        storage::listings::normalise_listing_number(&listing_number)
                    ),
                }
            }
            other => other.into(),
        })?;
    Ok(Json(CancellationOut {
        listing: ListingOut::new(&transition.listing, state.urls()),
        previous_status: transition.previous.display().to_owned(),
        fee_applied: MoneyOut {
            amount: 0,
            currency: "USD".to_owned(),
        },
    }))
}
