//! `POST /listings`: create a listing (status Coming Soon) and its order.

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use storage::listings::NewListing;
use utoipa::ToSchema;

use super::wire::ListingOut;
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::ApiJson;
use crate::middleware::idempotency::IdempotencyKey;
use crate::principal::Principal;
use crate::state::AppState;

/// Body of `POST /listings`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListingIn {
    /// Street address.
    #[schema(min_length = 1, max_length = 500, pattern = r"[^\s\x85]")]
    address: String,
    /// The owner: an active user of the caller's agency.
    #[schema(pattern = r"^usr_[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$")]
    owner_user_id: String,
    /// First agent: an active user of the caller's agency.
    #[schema(pattern = r"^usr_[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$")]
    agent_one_id: String,
    /// Second agent, different from the first.
    #[schema(pattern = r"^usr_[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$")]
    agent_two_id: Option<String>,
    /// Package key (essentials, standard, premium); default standard.
    package: Option<String>,
    /// Free-form notes, at most 5000 characters.
    #[schema(max_length = 5000)]
    notes: Option<String>,
}

/// Creates a listing in status Coming Soon, with an open invoice for its package.
#[utoipa::path(
    post,
    path = "/listings",
    tag = "listings",
    operation_id = "create_listing",
    request_body = ListingIn,
    responses(
        (status = 201, description = "The created listing", body = ListingOut),
        (status = 400, description = "Unparseable body", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks listings:write", body = ErrorEnvelope),
        (status = 422, description = "validation.failed; details.fields names each field and reason", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub async fn create_listing(
    State(state): State<AppState>,
    principal: Principal,
    idempotency_key: Option<Extension<IdempotencyKey>>,
    ApiJson(body): ApiJson<ListingIn>,
) -> Result<(StatusCode, Json<ListingOut>), ApiError> {
    let new = NewListing {
        address: body.address,
        owner_user_id: body.owner_user_id,
        agent_one_id: body.agent_one_id,
        agent_two_id: body.agent_two_id,
        package: body.package,
        notes: body.notes,
        idempotency_key: idempotency_key.map(|Extension(IdempotencyKey(key))| key),
    };
    let created = state
        .store()
        .listings()
        .create(&principal.tenant(), new)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(ListingOut::new(&created.listing, state.urls())),
    ))
}
