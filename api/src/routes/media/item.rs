//! `PATCH /media/{media_id}`: a photo's focal point set by hand. The
//! profiles' `cover` outputs of the photo are rendered again around it.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use storage::ids::MediaId;
use storage::media::{FocalPoint, FocalSource};
use utoipa::ToSchema;

use super::downloads::{MediaOut, media_out};
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiJson, ApiPath};
use crate::principal::Credential;
use crate::state::AppState;

/// Body of `PATCH /media/{media_id}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MediaPatch {
    /// Where the photo's subject is; its `source` becomes `manual`.
    pub focal_point: FocalPointIn,
}

/// A focal point placed by hand.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FocalPointIn {
    /// 0 (left edge) to 1 (right edge) of the upright photo.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub x: f64,
    /// 0 (top edge) to 1 (bottom edge) of the upright photo.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub y: f64,
}

/// Sets a photo's focal point by hand; its cropped outputs follow.
#[utoipa::path(
    patch,
    path = "/media/{media_id}",
    tag = "media",
    operation_id = "update_media",
    params(("media_id" = String, Path, description = "The media item's id (`med_…`)")),
    request_body = MediaPatch,
    responses(
        (status = 200, description = "The media item", body = MediaOut),
        (status = 400, description = "Unparseable body", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks media:write, the session's user administers no agency, or its X-CSRF-Token is wrong", body = ErrorEnvelope),
        (status = 404, description = "media_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: a coordinate outside 0 to 1, no focal point, or a focal point on a video or PDF", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn update_media(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(media_id): ApiPath<String>,
    ApiJson(body): ApiJson<MediaPatch>,
) -> Result<Json<MediaOut>, ApiError> {
    let tenant = principal.tenant();
    let id = MediaId::parse(&media_id).ok_or(ApiError::NotFound(Resource::Media))?;
    let media = state.store().media();
    // A missing item is 404 before any validation of the body's values.
    let item = media.item(&tenant, &id).await?;
    let point = body.focal_point;
    if !item.media_type.is_image() {
        return Err(ApiError::field(
            "focal_point",
            "only a photo has a focal point (this item is a video or a PDF)",
        ));
    }
    let focal_point = FocalPoint {
        x: point.x,
        y: point.y,
        source: FocalSource::Manual,
    };
    media.set_focal_point(&tenant, &id, focal_point).await?;
    crate::routes::delivery_profiles::render_again(&state, &tenant, &id).await?;
    let item = media.item(&tenant, &id).await?;
    let mut out = media_out(&state, &tenant, std::slice::from_ref(&item)).await?;
    Ok(Json(out.remove(0)))
}
