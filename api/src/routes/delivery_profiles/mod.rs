//! Delivery profiles: `POST` and `GET /delivery-profiles`, `GET`, `PATCH`
//! and `DELETE /delivery-profiles/{profile_id}`, and the starting templates
//! (`GET /delivery-profile-templates`). A profile's rules are
//! `storage::rules::delivery_profiles`; its watermarks must name images of
//! the caller's own agency.

pub mod wire;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use platform::PushOptions;
use platform::kinds::{RenderOutputs, RenderScope};
use storage::Tenant;
use storage::ids::{DeliveryProfileId, MediaId};
use storage::media::MediaStatus;
use storage::rules::delivery_profiles::{self, ProfileDraft};

use self::wire::{ProfileIn, ProfileOut, ProfilePatch, TemplateOut};
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::pagination::{CursorScope, PageOut, PageQuery, page_limit};
use crate::principal::Credential;
use crate::state::AppState;

/// The profile id a path names; text that cannot be one names no profile.
fn parse_profile_id(text: &str) -> Result<DeliveryProfileId, ApiError> {
    DeliveryProfileId::parse(text).ok_or(ApiError::NotFound(Resource::DeliveryProfile))
}

/// The draft, checked by the profile rules and with every watermark naming
/// a stored image of the tenant: every broken field at once.
async fn checked(
    state: &AppState,
    tenant: &Tenant,
    draft: ProfileDraft,
) -> Result<ProfileDraft, ApiError> {
    let mut refused = std::collections::BTreeMap::new();
    for (index, output) in draft.outputs.iter().enumerate() {
        let Some(watermark) = &output.watermark else {
            continue;
        };
        let usable = match state
            .store()
            .media()
            .item(tenant, &watermark.media_id)
            .await
        {
            Ok(item) => item.media_type.is_image() && item.status != MediaStatus::Failed,
            Err(storage::StorageError::NotFound(_)) => false,
            Err(err) => return Err(err.into()),
        };
        if !usable {
            refused.insert(
                format!("outputs[{index}].watermark.media_id"),
                "must name an image this agency uploaded (JPEG, PNG, WebP or GIF) that did not fail"
                    .to_owned(),
            );
        }
    }
    match draft.check() {
        Ok(draft) if refused.is_empty() => Ok(draft),
        Ok(_) => Err(ApiError::Validation(refused)),
        Err(mut broken) => {
            broken.append(&mut refused);
            Err(ApiError::Validation(broken))
        }
    }
}

/// Starts rendering `profile`'s outputs of the tenant's existing photos in
/// the background (`delivery_outputs` jobs, a few photos each, agencies
/// taking turns). An inactive profile renders nothing.
async fn sweep(state: &AppState, tenant: &Tenant, profile: &storage::media::DeliveryProfile) {
    if !profile.active {
        return;
    }
    let job = RenderOutputs::new(
        tenant,
        RenderScope::Profile {
            profile_id: profile.id.clone(),
            revision: profile.revision,
            round: profile.sweep_round,
            after: None,
            rendered: 0,
            total: None,
        },
    );
    // The change is committed: a push the queue refused is pushed again by
    // the maintenance's sweep of unswept profiles, so the answer stands.
    if let Err(err) = state
        .platform()
        .queue
        .push(job, PushOptions::default())
        .await
    {
        tracing::warn!(
            %err,
            profile_id = %profile.id,
            "could not push a profile's sweep; the maintenance pushes it within minutes"
        );
    }
}

/// Renders again, in the background, the outputs of one photo that are not
/// current (its focal point moved). Nothing when the agency has no active
/// profile.
pub(crate) async fn render_again(
    state: &AppState,
    tenant: &Tenant,
    media_id: &MediaId,
) -> Result<(), ApiError> {
    if state
        .store()
        .media()
        .active_profiles(tenant)
        .await?
        .is_empty()
    {
        return Ok(());
    }
    let job = RenderOutputs::new(
        tenant,
        RenderScope::Photo {
            media_id: media_id.clone(),
        },
    );
    state
        .platform()
        .queue
        .push(job, PushOptions::default())
        .await?;
    Ok(())
}

/// Creates a delivery profile.
#[utoipa::path(
    post,
    path = "/delivery-profiles",
    tag = "delivery-profiles",
    operation_id = "create_delivery_profile",
    request_body = ProfileIn,
    responses(
        (status = 201, description = "The profile", body = ProfileOut),
        (status = 400, description = "Unparseable body", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks delivery_profiles:write", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: each broken field by its path (`outputs[1].width`), a name already used, a watermark that names no image of the agency, or the agency's 20 profiles reached", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn create_profile(
    State(state): State<AppState>,
    principal: Credential,
    ApiJson(body): ApiJson<ProfileIn>,
) -> Result<(StatusCode, Json<ProfileOut>), ApiError> {
    let tenant = principal.tenant();
    let (draft, active) = body.into_draft();
    let draft = checked(&state, &tenant, draft).await?;
    let profile = state
        .store()
        .media()
        .create_profile(&tenant, &draft, active)
        .await?;
    sweep(&state, &tenant, &profile).await;
    Ok((StatusCode::CREATED, Json(profile.into())))
}

/// Lists the caller's delivery profiles, oldest first.
#[utoipa::path(
    get,
    path = "/delivery-profiles",
    tag = "delivery-profiles",
    operation_id = "list_delivery_profiles",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of profiles", body = PageOut<ProfileOut>),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks delivery_profiles:read", body = ErrorEnvelope),
        (status = 422, description = "Invalid limit or cursor", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = []))
)]
pub(crate) async fn list_profiles(
    State(state): State<AppState>,
    principal: Credential,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<PageOut<ProfileOut>>, ApiError> {
    let limit = page_limit(query.limit)?;
    let scope = CursorScope {
        collection: "delivery_profiles",
        tenant: principal.tenant(),
        filters: String::new(),
    };
    let after = state
        .cursors()
        .open_param(&scope, query.cursor.as_deref())?;
    let page = state
        .store()
        .media()
        .profiles(&scope.tenant, after.as_ref(), limit)
        .await?;
    Ok(Json(state.cursors().envelope(
        &scope,
        page,
        ProfileOut::from,
    )))
}

/// Reads one delivery profile.
#[utoipa::path(
    get,
    path = "/delivery-profiles/{profile_id}",
    tag = "delivery-profiles",
    operation_id = "get_delivery_profile",
    params(("profile_id" = String, Path, description = "The profile's id (`dpf_…`)")),
    responses(
        (status = 200, description = "The profile", body = ProfileOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks delivery_profiles:read", body = ErrorEnvelope),
        (status = 404, description = "delivery_profile_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = []))
)]
pub(crate) async fn get_profile(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(profile_id): ApiPath<String>,
) -> Result<Json<ProfileOut>, ApiError> {
    let profile = state
        .store()
        .media()
        .profile(&principal.tenant(), &parse_profile_id(&profile_id)?)
        .await?;
    Ok(Json(profile.into()))
}

/// Renames a profile, replaces its outputs, or both; its revision moves on.
#[utoipa::path(
    patch,
    path = "/delivery-profiles/{profile_id}",
    tag = "delivery-profiles",
    operation_id = "update_delivery_profile",
    params(("profile_id" = String, Path, description = "The profile's id (`dpf_…`)")),
    request_body = ProfilePatch,
    responses(
        (status = 200, description = "The profile", body = ProfileOut),
        (status = 400, description = "Unparseable body", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks delivery_profiles:write", body = ErrorEnvelope),
        (status = 404, description = "delivery_profile_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn update_profile(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(profile_id): ApiPath<String>,
    ApiJson(body): ApiJson<ProfilePatch>,
) -> Result<Json<ProfileOut>, ApiError> {
    let tenant = principal.tenant();
    // A missing profile is 404 before any validation of the body's values.
    let id = parse_profile_id(&profile_id)?;
    let current = state.store().media().profile(&tenant, &id).await?;
    let draft = ProfileDraft {
        name: body.name.unwrap_or(current.name),
        outputs: match body.outputs {
            Some(outputs) => outputs.into_iter().map(Into::into).collect(),
            None => current.outputs,
        },
    };
    let draft = checked(&state, &tenant, draft).await?;
    let active = body.active.unwrap_or(current.active);
    let profile = state
        .store()
        .media()
        .update_profile(&tenant, &id, &draft, active)
        .await?;
    if profile.sweep_round != current.sweep_round {
        sweep(&state, &tenant, &profile).await;
    }
    Ok(Json(profile.into()))
}

/// Deletes a profile and its rendered outputs.
#[utoipa::path(
    delete,
    path = "/delivery-profiles/{profile_id}",
    tag = "delivery-profiles",
    operation_id = "delete_delivery_profile",
    params(("profile_id" = String, Path, description = "The profile's id (`dpf_…`)")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks delivery_profiles:write", body = ErrorEnvelope),
        (status = 404, description = "delivery_profile_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn delete_profile(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(profile_id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let tenant = principal.tenant();
    let keys = state
        .store()
        .media()
        .delete_profile(&tenant, &parse_profile_id(&profile_id)?)
        .await?;
    if let Some(stores) = state.platform().media.as_ref() {
        for key in keys {
            stores.delete_everywhere(&key).await;
        }
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The starting templates: an unbranded MLS set and a branded marketing set.
#[utoipa::path(
    get,
    path = "/delivery-profile-templates",
    tag = "delivery-profiles",
    operation_id = "list_delivery_profile_templates",
    responses(
        (status = 200, description = "The templates", body = Vec<TemplateOut>),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks delivery_profiles:read", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = []))
)]
pub(crate) async fn list_templates(_principal: Credential) -> Json<Vec<TemplateOut>> {
    Json(
        delivery_profiles::templates()
            .into_iter()
            .map(TemplateOut::from)
            .collect(),
    )
}
