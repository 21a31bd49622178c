//! `PATCH /listings/{listing_number}/sections/{section}`: the tour3d and
//! floorplan sections. Any other section is 404 `section_not_exposed`; a body
//! that parses but makes no sense is 422 `invalid_section_payload` naming the
//! field and the reason.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use storage::rules::sections::{FloorplanFileIn, floorplan_operation, tour3d_operation};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiPath, JsonBody};
use crate::principal::Principal;
use crate::state::AppState;

/// A floorplan file in a request.
#[derive(Debug, Deserialize, ToSchema)]
pub struct FloorplanFileBody {
    /// Where the file is (http or https).
    #[schema(max_length = 2048)]
    pub url: Option<String>,
    /// 1–64 characters; stored without path-unsafe characters.
    #[schema(min_length = 1, max_length = 64)]
    pub label: Option<String>,
}

/// Body of a section patch. tour3d: `operation` set|remove and `url`;
/// floorplan: `operation` set|replace|append and `files`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SectionPatch {
    /// tour3d: set or remove; floorplan: set, replace or append.
    pub operation: Option<String>,
    /// tour3d only: the tour's URL (required to set).
    #[schema(max_length = 2048)]
    pub url: Option<String>,
    /// floorplan only: 1–20 files.
    #[schema(min_items = 1, max_items = 20)]
    pub files: Option<Vec<FloorplanFileBody>>,
}

/// A floorplan file as the patch response echoes it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FloorplanFileEcho {
    /// Where the file is.
    pub url: String,
    /// The label exactly as sent.
    pub label: String,
    /// The label as stored, without path-unsafe characters.
    pub stored_label: String,
}

/// The outcome of a tour3d patch: the URL before and after.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Tour3dChangeOut {
    /// The listing's number.
    pub listing_number: String,
    /// Always `tour3d`.
    pub section: String,
    /// set or remove.
    pub operation: String,
    /// The URL before the change.
    pub previous_url: Option<String>,
    /// The URL now; null after remove.
    pub url: Option<String>,
}

/// The outcome of a floorplan patch.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FloorplanChangeOut {
    /// The listing's number.
    pub listing_number: String,
    /// Always `floorplan`.
    pub section: String,
    /// set, replace or append.
    pub operation: String,
    /// The files of this request, with the caller's labels.
    pub files: Vec<FloorplanFileEcho>,
    /// How many files the floorplan holds now.
    pub floorplan_size: usize,
}

/// The outcome of a section patch.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum SectionChangeOut {
    /// tour3d.
    Tour3d(Tour3dChangeOut),
    /// floorplan.
    Floorplan(FloorplanChangeOut),
}

fn not_for(section: &str, field: &str) -> ApiError {
    ApiError::InvalidSectionPayload {
        field: field.to_owned(),
        reason: format!("does not apply to the {section} section"),
    }
}

/// Changes the tour3d or floorplan section of a listing.
#[utoipa::path(
    patch,
    path = "/listings/{listing_number}/sections/{section}",
    tag = "listings",
    operation_id = "update_section",
    params(
        ("listing_number" = String, Path, description = "The listing's number"),
        ("section" = String, Path, description = "tour3d or floorplan"),
    ),
    request_body = SectionPatch,
    responses(
        (status = 200, description = "The section after the change", body = SectionChangeOut),
        (status = 400, description = "Unparseable body", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks listings:write", body = ErrorEnvelope),
        (status = 404, description = "listing_not_found or section_not_exposed", body = ErrorEnvelope),
        (status = 422, description = "invalid_section_payload (details.field, details.reason) or validation.failed", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub async fn update_section(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((listing_number, section)): ApiPath<(String, String)>,
    body: JsonBody,
) -> Result<Json<SectionChangeOut>, ApiError> {
    if section != "tour3d" && section != "floorplan" {
        return Err(ApiError::SectionNotExposed);
    }
    let patch: SectionPatch = body.parse()?;
    let tenant = principal.tenant();
    let listings = state.store().listings();
    if section == "tour3d" {
        if patch.files.is_some() {
            return Err(not_for("tour3d", "files"));
        }
        let operation = tour3d_operation(patch.operation.as_deref(), patch.url.as_deref())?;
        let operation_name = patch.operation.unwrap_or_default();
        let change = listings
            .update_tour3d(&tenant, &listing_number, operation)
            .await?;
        return Ok(Json(SectionChangeOut::Tour3d(Tour3dChangeOut {
            listing_number: change.listing.listing_number,
            section,
            operation: operation_name,
            previous_url: change.previous_url,
            url: change.listing.tour3d_url,
        })));
    }
    if patch.url.is_some() {
        return Err(not_for("floorplan", "url"));
    }
    let files: Option<Vec<FloorplanFileIn>> = patch.files.map(|files| {
        files
            .into_iter()
            .map(|f| FloorplanFileIn {
                url: f.url,
                label: f.label,
            })
            .collect()
    });
    let (operation, stored) = floorplan_operation(patch.operation.as_deref(), files.as_deref())?;
    let echo = stored
        .iter()
        .map(|f| FloorplanFileEcho {
            url: f.url.clone(),
            label: f.original_label.clone(),
            stored_label: f.label.clone(),
        })
        .collect();
    let listing = listings
        .update_floorplan(&tenant, &listing_number, operation, stored)
        .await?;
    Ok(Json(SectionChangeOut::Floorplan(FloorplanChangeOut {
        listing_number: listing.listing_number,
        section,
        operation: operation.as_str().to_owned(),
        files: echo,
        floorplan_size: listing.floorplan.len(),
    })))
}
