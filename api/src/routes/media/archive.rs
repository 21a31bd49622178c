//! `POST /media/archive`: packs the originals of some of the caller's media
//! into one ZIP, written to the object store by a job. The answer names the
//! operation and its progress stream; `GET /media/archive/{operation_id}`
//! then gives a signed download URL once the archive is written.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use platform::PushOptions;
use platform::kinds::BuildArchive;
use serde::{Deserialize, Serialize};
use storage::Tenant;
use storage::ids::{DeliveryProfileId, MediaId, OperationId};
use storage::media::{MediaOperation, OutputStatus, StorageStrategy};
use utoipa::ToSchema;

use super::downloads::DOWNLOAD_URL_SECONDS;
use super::progress::progress_url;
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::principal::Credential;
use crate::state::AppState;

/// Most files one archive packs.
pub(crate) const MAX_ARCHIVE_FILES: usize = 200;
/// Longest archive name.
pub(crate) const MAX_NAME_CHARS: usize = 100;

/// Body of an archive request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveIn {
    /// Media items (`med_…`) of the caller, 1 to 200.
    #[schema(min_items = 1, max_items = 200)]
    pub file_ids: Vec<String>,
    /// The ZIP's name, without extension (letters, digits, space, `-`, `_`, `.`).
    #[schema(min_length = 1, max_length = 100, pattern = r"^[A-Za-z0-9 ._-]+$")]
    pub archive_name: String,
    /// A delivery profile (`dpf_…`): the ZIP holds each item's outputs of
    /// it, a folder per output (`mls_small/front.jpg`), instead of the
    /// originals. Every item's outputs of it must be rendered.
    pub profile_id: Option<String>,
}

/// An archive operation.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ArchiveOut {
    /// The operation.
    pub operation_id: String,
    /// `processing`, `completed` or `failed`.
    pub status: String,
    /// The ZIP's name, without extension.
    pub archive_name: String,
    /// Server-sent events of the operation (token valid for an hour).
    pub progress_url: String,
    /// Once completed: the ZIP's size.
    pub size_bytes: Option<i64>,
    /// Once completed: a signed download URL.
    pub download_url: Option<String>,
    /// When `download_url` stops working.
    pub download_expires_at: Option<String>,
}

fn archive_name_problem(name: &str) -> Option<String> {
    let length = name.chars().count();
    if length == 0 || length > MAX_NAME_CHARS {
        return Some(format!("must be 1 to {MAX_NAME_CHARS} characters"));
    }
    let allowed = |c: char| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.');
    if !name.chars().all(allowed) || name.starts_with('.') {
        return Some("may hold letters, digits, spaces, '-', '_' and '.' only".to_owned());
    }
    None
}

/// Refuses, item by item, an archive of `profile`'s outputs of items that
/// have none ready yet (a video, a PDF, or outputs still being rendered).
async fn outputs_ready(
    state: &AppState,
    tenant: &Tenant,
    profile: &storage::media::DeliveryProfile,
    ids: &[MediaId],
    texts: &[String],
    problems: &mut BTreeMap<String, String>,
) -> Result<(), ApiError> {
    for id in ids {
        let item = state.store().media().item(tenant, id).await?;
        let outputs: Vec<_> = item
            .outputs
            .iter()
            .filter(|o| o.profile_id == profile.id)
            .collect();
        let index = texts.iter().position(|t| t == id.as_str()).unwrap_or(0);
        let problem = if outputs.is_empty() {
            Some(
                "has no outputs of this profile (only photos do, and only while the profile is active)",
            )
        } else if outputs.iter().any(|o| o.status == OutputStatus::Pending) {
            Some(
                "its outputs of this profile are still being rendered; ask again once they are ready",
            )
        } else {
            None
        };
        if let Some(problem) = problem {
            problems.insert(format!("file_ids[{index}]"), problem.to_owned());
        }
    }
    Ok(())
}

/// Queues an archive of the caller's media.
#[utoipa::path(
    post,
    path = "/media/archive",
    tag = "media",
    operation_id = "archive_media",
    request_body = ArchiveIn,
    responses(
        (status = 202, description = "Queued; follow progress_url, then read the archive for its download URL", body = ArchiveOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks media:write, the session's user administers no agency, or its X-CSRF-Token is wrong", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: file_ids (empty, too many, not the caller's media, or without ready outputs of profile_id), archive_name or profile_id", body = ErrorEnvelope),
        (status = 503, description = "server.not_ready: the job queue did not take the archive (its operation is failed); repeat the request after Retry-After", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn create_archive(
    State(state): State<AppState>,
    principal: Credential,
    ApiJson(body): ApiJson<ArchiveIn>,
) -> Result<(StatusCode, Json<ArchiveOut>), ApiError> {
    let tenant = principal.tenant();
    let mut problems = BTreeMap::new();
    if let Some(problem) = archive_name_problem(&body.archive_name) {
        problems.insert("archive_name".to_owned(), problem);
    }
    if body.file_ids.is_empty() || body.file_ids.len() > MAX_ARCHIVE_FILES {
        problems.insert(
            "file_ids".to_owned(),
            format!("must list 1 to {MAX_ARCHIVE_FILES} media items"),
        );
    }
    let mut ids = Vec::with_capacity(body.file_ids.len());
    for (index, text) in body.file_ids.iter().enumerate() {
        let found = match MediaId::parse(text) {
            Some(id) => state
                .store()
                .media()
                .item(&tenant, &id)
                .await
                .is_ok()
                .then_some(id),
            None => None,
        };
        match found {
            Some(id) => ids.push(id),
            None => {
                problems.insert(
                    format!("file_ids[{index}]"),
                    "is not a media item of this agency".to_owned(),
                );
            }
        }
    }
    let profile = match body.profile_id.as_deref() {
        None => None,
        Some(text) => {
            let found = match DeliveryProfileId::parse(text) {
                Some(id) => match state.store().media().profile(&tenant, &id).await {
                    Ok(profile) => Some(profile),
                    Err(storage::StorageError::NotFound(_)) => None,
                    Err(err) => return Err(err.into()),
                },
                None => None,
            };
            if found.is_none() {
                problems.insert(
                    "profile_id".to_owned(),
                    "is not a delivery profile of this agency".to_owned(),
                );
            }
            found
        }
    };
    if let Some(profile) = &profile {
        outputs_ready(
            &state,
            &tenant,
            profile,
            &ids,
            &body.file_ids,
            &mut problems,
        )
        .await?;
    }
    if !problems.is_empty() {
        return Err(ApiError::Validation(problems));
    }
    let operation_id = OperationId::generate();
    state
        .store()
        .media()
        .create_archive(
            &tenant,
            &operation_id,
            &body.archive_name,
            &ids,
            profile.as_ref().map(|p| &p.id),
        )
        .await?;
    let job = BuildArchive {
        operation_id: operation_id.clone(),
        agency_id: tenant.agency_id.clone(),
        is_sandbox: tenant.environment.is_sandbox(),
    };
    if let Err(err) = state
        .platform()
        .queue
        .push(job, PushOptions::default())
        .await
    {
        // Nothing would ever build it: the operation fails at once rather
        // than waiting forever, and the answer says to repeat the request.
        state
            .store()
            .media()
            .finish_archive(&tenant, &operation_id, None)
            .await?;
        return Err(err.into());
    }
    let operation = state
        .store()
        .media()
        .operation(&tenant, &operation_id)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(archive_out(&state, &tenant, operation).await?),
    ))
}

fn signature_message(tenant: &Tenant, operation: &OperationId, expires: i64) -> String {
    format!(
        "archive|{operation}|{}|{}|{expires}",
        tenant.agency_id,
        tenant.environment.as_str()
    )
}

async fn archive_out(
    state: &AppState,
    tenant: &Tenant,
    operation: MediaOperation,
) -> Result<ArchiveOut, ApiError> {
    let now = state.store().clock().now();
    let expires = now.as_unix_seconds() + DOWNLOAD_URL_SECONDS;
    let download_url = match (&operation.archive_key, state.platform().media.as_ref()) {
        (Some(key), Some(stores)) => {
            let presigned = stores
                .signed_url(
                    StorageStrategy::Cloud,
                    key,
                    Duration::from_secs(DOWNLOAD_URL_SECONDS.unsigned_abs()),
                )
                .await
                .map_err(ApiError::internal)?;
            Some(match presigned {
                Some(url) => url.to_string(),
                None => {
                    let signature = state
                        .store()
                        .derived_keys()
                        .url_signature(&signature_message(tenant, &operation.id, expires));
                    format!(
                        "{}/api/v1/media/archive/{}/download?expires={expires}&signature={signature}",
                        state.urls().base_url,
                        operation.id
                    )
                }
            })
        }
        _ => None,
    };
    Ok(ArchiveOut {
        progress_url: progress_url(state, tenant, &operation.id),
        operation_id: operation.id.to_string(),
        status: operation.status,
        archive_name: operation.archive_name.unwrap_or_default(),
        size_bytes: operation.archive_size_bytes,
        download_expires_at: download_url
            .as_ref()
            .map(|_| now.plus_seconds(DOWNLOAD_URL_SECONDS).to_rfc3339()),
        download_url,
    })
}

/// An archive operation, with its download URL once written.
#[utoipa::path(
    get,
    path = "/media/archive/{operation_id}",
    tag = "media",
    operation_id = "read_archive",
    params(("operation_id" = String, Path, description = "The archive operation (op_…)")),
    responses(
        (status = 200, description = "The archive", body = ArchiveOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 404, description = "operation_not_found, also for another agency's", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = []))
)]
pub(crate) async fn read_archive(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(operation_id): ApiPath<String>,
) -> Result<Json<ArchiveOut>, ApiError> {
    let tenant = principal.tenant();
    let id = OperationId::parse(&operation_id).ok_or(ApiError::NotFound(Resource::Operation))?;
    let operation = state.store().media().operation(&tenant, &id).await?;
    if operation.kind != "archive" {
        return Err(ApiError::NotFound(Resource::Operation));
    }
    Ok(Json(archive_out(&state, &tenant, operation).await?))
}

/// Query of a signed archive download.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DownloadQuery {
    expires: i64,
    signature: String,
}

/// Streams a written archive from local files to a holder of its signed URL.
pub(crate) async fn download(
    State(state): State<AppState>,
    ApiPath(operation_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<DownloadQuery>,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::NotFound(Resource::Operation);
    let id = OperationId::parse(&operation_id).ok_or_else(not_found)?;
    if query.expires < state.store().clock().now().as_unix_seconds() {
        return Err(not_found());
    }
    let (tenant, operation) = state
        .store()
        .media()
        .operation_by_id(&id)
        .await
        .map_err(|_| not_found())?;
    if !state.store().derived_keys().verify_url_signature(
        &signature_message(&tenant, &id, query.expires),
        &query.signature,
    ) {
        return Err(not_found());
    }
    let key = operation.archive_key.ok_or_else(not_found)?;
    let stores = state
        .platform()
        .media
        .as_ref()
        .ok_or_else(|| ApiError::internal("no object store is configured"))?;
    let object = stores
        .primary(StorageStrategy::Cloud)
        .get(&ObjectPath::from(key.as_str()))
        .await
        .map_err(ApiError::internal)?;
    let filename = format!(
        "attachment; filename=\"{}.zip\"",
        operation.archive_name.unwrap_or_default()
    );
    let mut response = Body::from_stream(object.into_stream()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/zip"),
    );
    if let Ok(value) = HeaderValue::from_str(&filename) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}
