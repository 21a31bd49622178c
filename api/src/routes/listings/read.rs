//! `GET /listings` and `GET /listings/{listing_number}`.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use storage::Timestamp;
use storage::ids::UserId;
use storage::listings::ListingDetail;
use storage::listings::ListingFilter;
use storage::rules::listing_status::ListingStatus;
use utoipa::{IntoParams, ToSchema};

use super::wire::{AppointmentOut, ListingOut, OrderOut};
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiPath, ApiQuery};
use crate::pagination::{CursorScope, PageOut, page_limit};
use crate::principal::Principal;
use crate::state::AppState;

/// Query of `GET /listings`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListingListQuery {
    /// Only listings with this status (any spelling of either variant: `Off Market`, `off_market`).
    status: Option<String>,
    /// Only listings where this user is agent one or agent two.
    #[param(pattern = r"^usr_[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$")]
    agent_id: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// Page size, 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<i64>,
}

impl ListingListQuery {
    fn filter(&self) -> Result<ListingFilter, ApiError> {
        let status = match self.status.as_deref() {
            None => None,
            Some(text) => Some(
                ListingStatus::parse(text)
                    .ok_or_else(|| ApiError::field("status", status_choices()))?,
            ),
        };
        let agent_id = match self.agent_id.as_deref() {
            None => None,
            Some(text) => Some(
                UserId::parse(text)
                    .ok_or_else(|| ApiError::field("agent_id", "is not a user id"))?,
            ),
        };
        Ok(ListingFilter { status, agent_id })
    }
}

/// The reason given for an unknown status value.
pub fn status_choices() -> String {
    let names: Vec<&str> = ListingStatus::ALL.iter().map(|s| s.display()).collect();
    format!("must be one of {}", names.join(", "))
}

/// Lists the caller's listings, oldest first.
#[utoipa::path(
    get,
    path = "/listings",
    tag = "listings",
    operation_id = "read_listings_list",
    params(ListingListQuery),
    responses(
        (status = 200, description = "A page of listings", body = PageOut<ListingOut>),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks listings:read", body = ErrorEnvelope),
        (status = 422, description = "Invalid filter or limit (validation.failed), or invalid_cursor", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub async fn list_listings(
    State(state): State<AppState>,
    principal: Principal,
    ApiQuery(query): ApiQuery<ListingListQuery>,
) -> Result<Json<PageOut<ListingOut>>, ApiError> {
    let filter = query.filter()?;
    let limit = page_limit(query.limit)?;
    let scope = CursorScope {
        collection: "listings",
        tenant: principal.tenant(),
        filters: format!(
            "status={};agent={}",
            filter.status.map(ListingStatus::key).unwrap_or(""),
            filter.agent_id.as_ref().map(UserId::as_str).unwrap_or("")
        ),
    };
    let after = state
        .cursors()
        .open_param(&scope, query.cursor.as_deref())?;
    let page = state
        .store()
        .listings()
        .list(&scope.tenant, &filter, after.as_ref(), limit)
        .await?;
    let urls = state.urls().clone();
    Ok(Json(
        state
            .cursors()
            .envelope(&scope, page, |l| ListingOut::new(&l, &urls)),
    ))
}

/// A person assigned to a listing.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AssignedUserOut {
    /// The user's id.
    pub user_id: String,
    /// owner, agent_one, agent_two or photographer.
    pub assignment: String,
    /// The user's role in the agency.
    pub role: String,
    /// Display name.
    pub name: Option<String>,
}

/// The 3D-tour section.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Tour3dSectionOut {
    /// The tour's URL, if set.
    pub url: Option<String>,
}

/// A stored floorplan file.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FloorplanFileOut {
    /// Where the file is.
    pub url: String,
    /// The stored (sanitized) label.
    pub label: String,
}

/// The floorplan section.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FloorplanSectionOut {
    /// Its files, in order.
    pub files: Vec<FloorplanFileOut>,
}

/// The media sections the API exposes.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SectionsOut {
    /// 3D tour.
    pub tour3d: Tour3dSectionOut,
    /// Floorplan.
    pub floorplan: FloorplanSectionOut,
}

/// The cancellation window of a listing.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CancellationWindowOut {
    /// The last instant to cancel without a fee; null when no shoot is scheduled (always free).
    pub no_fee_cutoff: Option<String>,
}

/// One listing with everything the single read shows.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ListingDetailOut {
    /// The listing.
    #[serde(flatten)]
    pub listing: ListingOut,
    /// Owner, agents and photographer.
    pub assigned_users: Vec<AssignedUserOut>,
    /// tour3d and floorplan.
    pub sections: SectionsOut,
    /// The listing's orders and their invoice state.
    pub orders: Vec<OrderOut>,
    /// The shoot, once scheduled.
    pub appointment: Option<AppointmentOut>,
    /// The no-fee cancellation window.
    pub cancellation: CancellationWindowOut,
    /// Uploaded photos, videos and documents with their variants.
    pub media: Vec<crate::routes::media::downloads::MediaOut>,
}

fn assigned_users(detail: &ListingDetail) -> Vec<AssignedUserOut> {
    let listing = &detail.listing;
    let mut assigned = vec![
        ("owner", &listing.owner_user_id),
        ("agent_one", &listing.agent_one_id),
    ];
    if let Some(agent_two) = &listing.agent_two_id {
        assigned.push(("agent_two", agent_two));
    }
    if let Some(photographer) = detail
        .appointment
        .as_ref()
        .and_then(|a| a.photographer_id.as_ref())
    {
        assigned.push(("photographer", photographer));
    }
    assigned
        .into_iter()
        .filter_map(|(assignment, id)| {
            let person = detail.people.iter().find(|p| &p.id == id)?;
            Some(AssignedUserOut {
                user_id: person.id.to_string(),
                assignment: assignment.to_owned(),
                role: person.role.as_str().to_owned(),
                name: person.name.clone(),
            })
        })
        .collect()
}

/// Reads one of the caller's listings.
#[utoipa::path(
    get,
    path = "/listings/{listing_number}",
    tag = "listings",
    operation_id = "read_listing_single",
    params(("listing_number" = String, Path, description = "The listing's number")),
    responses(
        (status = 200, description = "The listing", body = ListingDetailOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks listings:read", body = ErrorEnvelope),
        (status = 404, description = "listing_not_found, also for another agency's listing", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub async fn read_listing(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(listing_number): ApiPath<String>,
) -> Result<Json<ListingDetailOut>, ApiError> {
    let detail = state
        .store()
        .listings()
        .detail(&principal.tenant(), &listing_number)
        .await?;
    let listing = &detail.listing;
    let media =
        crate::routes::media::downloads::media_out(&state, &principal.tenant(), &detail.media)
            .await?;
    let out = ListingDetailOut {
        listing: ListingOut::new(listing, state.urls()),
        assigned_users: assigned_users(&detail),
        sections: SectionsOut {
            tour3d: Tour3dSectionOut {
                url: listing.tour3d_url.clone(),
            },
            floorplan: FloorplanSectionOut {
                files: listing
                    .floorplan
                    .iter()
                    .map(|f| FloorplanFileOut {
                        url: f.url.clone(),
                        label: f.label.clone(),
                    })
                    .collect(),
            },
        },
        orders: detail.orders.iter().cloned().map(OrderOut::from).collect(),
        appointment: detail.appointment.clone().map(AppointmentOut::from),
        cancellation: CancellationWindowOut {
            no_fee_cutoff: detail.no_fee_cutoff.map(Timestamp::to_rfc3339),
        },
        media,
    };
    Ok(Json(out))
}
