//! Direct uploads, on the S3 profile: the client's bytes go straight to the
//! object store, never through the API.
//!
//! 1. `POST /direct-uploads` with the file's name, size and sha256: the API
//!    starts an S3 multipart upload and answers with one pre-signed `PUT`
//!    URL per part (`part_size` bytes each, the last one the rest).
//! 2. The client `PUT`s each part's bytes to its URL (in any order, several
//!    at once, again after a cut) and keeps the `ETag` each one answers.
//!    `GET /direct-uploads/{upload_id}` signs the URLs afresh.
//! 3. `POST /direct-uploads/{upload_id}/complete` with the ETags: the store
//!    assembles the file, the API checks its size and judges its format by
//!    its first bytes, and the item is queued like any other upload's (its
//!    batch, progress stream, variants and event). The worker checks the
//!    declared sha256 against the stored bytes before it makes anything.
//!
//! A direct upload is a row of the same table as a tus upload, in the same
//! batches, with the same expiry; `DELETE` ends it and has the store drop
//! its parts.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use platform::direct_upload::DirectCompletionError;
use serde::{Deserialize, Serialize};
use storage::Tenant;
use storage::ids::UploadId;
use storage::media::{DirectPlan, StorageKey, StorageStrategy, Upload, UploadState};
use utoipa::ToSchema;

use super::create::{open, refused, requested};
use super::part::gone;
use super::{end, find_by_door};
use crate::error::{ApiError, ErrorEnvelope, UploadRefusal};
use crate::extract::{ApiJson, ApiPath};
use crate::principal::Credential;
use crate::routes::media::progress::progress_url;
use crate::routes::webhooks::endpoint_rules::whole_number;
use crate::state::AppState;

/// The smallest part S3 takes (every part but the last).
pub const MIN_PART_BYTES: i64 = 5 * 1024 * 1024;

/// The part size when the client names none.
pub const DEFAULT_PART_BYTES: i64 = 8 * 1024 * 1024;

/// How long a part URL works; `GET /direct-uploads/{upload_id}` signs new ones.
pub const PART_URL_SECONDS: i64 = 3600;

/// Longest ETag a completion may name.
const MAX_ETAG_CHARS: usize = 256;

/// Body of a direct upload.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectUploadIn {
    /// The client's file name (at most 255 bytes of UTF-8).
    pub filename: String,
    /// The file's size in bytes (at most 50 MB).
    #[schema(value_type = i64, minimum = 1, maximum = 52428800)]
    pub size_bytes: serde_json::Number,
    /// The sha256 of the whole file, 64 hexadecimal digits: the worker
    /// checks the stored bytes against it before it makes any variant.
    #[schema(min_length = 64, max_length = 64, pattern = "^[0-9a-fA-F]{64}$")]
    pub sha256: String,
    /// The type the client names (the format is judged by content).
    pub content_type: Option<String>,
    /// The listing the file belongs to.
    pub listing_number: Option<String>,
    /// The batch (`POST /upload-batches`) the file belongs to; without one
    /// the upload is a batch of its own.
    pub batch_id: Option<String>,
    /// `cloud` (the default, and the only strategy a direct upload takes:
    /// its bytes are in the object store).
    pub storage_strategy: Option<String>,
    /// Whether variants are made (true by default).
    pub enable_optimization: Option<bool>,
    /// A related entity's type, as the upload form takes it.
    pub related_entity_type: Option<String>,
    /// A related entity's id.
    pub related_entity_id: Option<String>,
    /// Bytes of every part but the last: from 5 MiB (S3's smallest) to
    /// 50 MB; 8 MiB by default.
    #[schema(value_type = Option<i64>, minimum = 5242880, maximum = 52428800)]
    pub part_size: Option<serde_json::Number>,
}

/// One part to send.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DirectPartOut {
    /// From 1.
    pub part_number: i64,
    /// Where its first byte is in the file.
    pub offset: i64,
    /// Its bytes.
    pub size_bytes: i64,
    /// `PUT` the part's bytes here; keep the `ETag` the store answers.
    pub url: String,
}

/// A direct upload.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DirectUploadOut {
    /// Its id.
    pub upload_id: String,
    /// receiving, completed, terminated or expired.
    pub status: String,
    /// The client's file name.
    pub filename: String,
    /// The file's size in bytes.
    pub size_bytes: i64,
    /// The sha256 the client declared.
    pub sha256: String,
    /// Bytes of every part but the last.
    pub part_size: i64,
    /// How many parts the file is sent in.
    pub part_count: i64,
    /// While receiving: each part's pre-signed URL. Empty once it ended.
    pub parts: Vec<DirectPartOut>,
    /// When the part URLs stop working, RFC 3339 (`GET` the upload for new ones).
    pub parts_expire_at: Option<String>,
    /// Receiving: when it is abandoned unless completed. Ended: when it is forgotten.
    pub expires_at: String,
    /// The batch (its operation) the upload belongs to.
    pub batch_id: String,
    /// Server-sent events of the batch's operation (token valid for an hour).
    pub progress_url: String,
    /// The media item, once completed.
    pub media_id: Option<String>,
    /// `POST` the parts' ETags here to complete it.
    pub complete_url: String,
}

/// One sent part, as the store answered it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletedPartIn {
    /// From 1.
    #[schema(value_type = i64, minimum = 1)]
    pub part_number: serde_json::Number,
    /// The `ETag` header the store answered the part's `PUT` with.
    #[schema(min_length = 1, max_length = 256)]
    pub etag: String,
}

/// Body of a completion: every part, each once.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteDirectUploadIn {
    /// Every part of the upload, each with its ETag (in any order).
    pub parts: Vec<CompletedPartIn>,
}

/// The object store failed: logged, and answered as a failure to retry.
fn store_failed(err: object_store::Error) -> ApiError {
    tracing::error!(%err, "the object store failed a direct upload's request");
    refused(
        UploadRefusal::StorageUnavailable,
        "The object store did not answer as expected; try again in a moment.",
    )
}

fn unavailable() -> ApiError {
    refused(
        UploadRefusal::DirectUnavailable,
        "This deployment keeps media in local files, which no client can reach; direct uploads need the S3 object store. Upload through the API with tus at /api/v1/uploads instead.",
    )
}

/// The upload as the API shows it; part URLs signed afresh while it receives.
async fn out(
    state: &AppState,
    tenant: &Tenant,
    upload: &Upload,
) -> Result<DirectUploadOut, ApiError> {
    let plan = upload
        .direct
        .as_ref()
        .ok_or_else(|| ApiError::internal("a tus upload shown as a direct one"))?;
    let part_count = plan.part_count(upload.length);
    let mut parts = Vec::new();
    let mut parts_expire_at = None;
    if upload.state == UploadState::Receiving {
        let objects = state
            .platform()
            .media
            .as_ref()
            .ok_or_else(unavailable)?
            .cloud();
        let assembled = StorageKey::direct_upload(tenant, &upload.id).to_path();
        let expires_in = Duration::from_secs(PART_URL_SECONDS as u64);
        for part_number in 1..=part_count {
            let offset = (part_number - 1) * plan.part_size;
            let url = objects
                .signed_part_url(&assembled, &plan.store_upload_id, part_number, expires_in)
                .await
                .map_err(store_failed)?
                .ok_or_else(unavailable)?;
            parts.push(DirectPartOut {
                part_number,
                offset,
                size_bytes: plan.part_size.min(upload.length - offset),
                url: url.to_string(),
            });
        }
        parts_expire_at = Some(
            state
                .store()
                .clock()
                .now()
                .plus_seconds(PART_URL_SECONDS)
                .to_rfc3339(),
        );
    }
    let base = &state.urls().base_url;
    Ok(DirectUploadOut {
        upload_id: upload.id.to_string(),
        status: upload.state.as_str().to_owned(),
        filename: upload.filename.clone(),
        size_bytes: upload.length,
        sha256: plan.declared_sha256.clone(),
        part_size: plan.part_size,
        part_count,
        parts,
        parts_expire_at,
        expires_at: upload.expires_at.to_rfc3339(),
        batch_id: upload.operation_id.to_string(),
        progress_url: progress_url(state, tenant, &upload.operation_id),
        media_id: (upload.state == UploadState::Completed).then(|| upload.media_id.to_string()),
        complete_url: format!("{base}/api/v1/direct-uploads/{}/complete", upload.id),
    })
}

/// The body's requests, read as the tus metadata's are.
fn requested_of(body: &DirectUploadIn) -> Result<super::create::Requested, ApiError> {
    let mut pairs = BTreeMap::new();
    let mut put = |key: &str, value: Option<&String>| {
        if let Some(value) = value {
            pairs.insert(key.to_owned(), value.clone());
        }
    };
    put("filename", Some(&body.filename));
    put("filetype", body.content_type.as_ref());
    put("listing_number", body.listing_number.as_ref());
    put("batch_id", body.batch_id.as_ref());
    put("storage_strategy", body.storage_strategy.as_ref());
    put(
        "enable_optimization",
        body.enable_optimization.map(|on| on.to_string()).as_ref(),
    );
    put("related_entity_type", body.related_entity_type.as_ref());
    put("related_entity_id", body.related_entity_id.as_ref());
    let requested = requested(&pairs)?;
    if requested.storage_strategy != StorageStrategy::Cloud {
        return Err(ApiError::field(
            "storage_strategy",
            "a direct upload's bytes are in the object store: it can only be cloud",
        ));
    }
    Ok(requested)
}

/// Starts a direct upload: a multipart upload in the object store and a
/// pre-signed URL for each of its parts.
#[utoipa::path(
    post,
    path = "/direct-uploads",
    tag = "uploads",
    operation_id = "create_direct_upload",
    request_body = DirectUploadIn,
    responses(
        (status = 201, description = "Started: PUT each part to its URL, then complete", body = DirectUploadOut),
        (status = 400, description = "upload.filename_too_long", body = ErrorEnvelope),
        (status = 401, description = "No key or session", body = ErrorEnvelope),
        (status = 404, description = "listing_not_found, operation_not_found (batch_id)", body = ErrorEnvelope),
        (status = 409, description = "upload.direct_unavailable (media kept in local files), upload.batch_full, upload.batch_ended", body = ErrorEnvelope),
        (status = 413, description = "upload.file_too_large (over 50 MB)", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: size_bytes, sha256, part_size, storage_strategy, a bad value", body = ErrorEnvelope),
        (status = 429, description = "Rate limited", body = ErrorEnvelope),
        (status = 500, description = "upload.storage_unavailable", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub async fn create_direct_upload(
    State(state): State<AppState>,
    caller: Credential,
    ApiJson(body): ApiJson<DirectUploadIn>,
) -> Result<(StatusCode, Json<DirectUploadOut>), ApiError> {
    let tenant = caller.tenant();
    let max_file_bytes = state.upload_limits().max_file_bytes as i64;
    let length = whole_number(&body.size_bytes)
        .filter(|size| *size >= 1)
        .ok_or_else(|| {
            ApiError::field("size_bytes", "must be a whole number of bytes, at least 1")
        })?;
    if length > max_file_bytes {
        return Err(refused(
            UploadRefusal::FileTooLarge,
            format!(
                "The file is {length} bytes; a file may be at most {} MB.",
                max_file_bytes / (1024 * 1024)
            ),
        ));
    }
    let sha256 = body.sha256.trim().to_ascii_lowercase();
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::field(
            "sha256",
            "must be the file's sha256 as 64 hexadecimal digits",
        ));
    }
    let part_size = match &body.part_size {
        None => DEFAULT_PART_BYTES,
        Some(size) => whole_number(size)
            .filter(|size| (MIN_PART_BYTES..=max_file_bytes).contains(size))
            .ok_or_else(|| {
                ApiError::field(
                    "part_size",
                    format!(
                        "must be a whole number of bytes from {MIN_PART_BYTES} to {max_file_bytes}"
                    ),
                )
            })?,
    };
    let requested = requested_of(&body)?;
    let stores = state.platform().media.as_ref().ok_or_else(unavailable)?;
    if !stores.cloud().takes_direct_uploads() {
        return Err(unavailable());
    }
    let id = UploadId::generate();
    let assembled = StorageKey::direct_upload(&tenant, &id).to_path();
    let store_upload_id = stores
        .cloud()
        .start_direct_upload(&assembled)
        .await
        .map_err(store_failed)?
        .ok_or_else(unavailable)?;
    let plan = DirectPlan {
        store_upload_id: store_upload_id.clone(),
        part_size,
        declared_sha256: sha256,
    };
    let opened = open(
        &state,
        &tenant,
        requested,
        id,
        length,
        String::new(),
        Some(plan),
    )
    .await;
    let upload = match opened {
        Ok(upload) => upload,
        Err(err) => {
            if let Err(abort) = stores
                .cloud()
                .abort_direct_upload(&assembled, &store_upload_id)
                .await
            {
                tracing::warn!(err = %abort, "a refused direct upload's multipart upload was not aborted");
            }
            return Err(err);
        }
    };
    Ok((
        StatusCode::CREATED,
        Json(out(&state, &tenant, &upload).await?),
    ))
}

/// A direct upload: where it stands, and while it receives, its part URLs
/// signed afresh.
#[utoipa::path(
    get,
    path = "/direct-uploads/{upload_id}",
    tag = "uploads",
    operation_id = "read_direct_upload",
    params(("upload_id" = String, Path, description = "The direct upload")),
    responses(
        (status = 200, description = "The upload", body = DirectUploadOut),
        (status = 401, description = "No key or session", body = ErrorEnvelope),
        (status = 404, description = "upload_not_found (another agency's, or a tus upload)", body = ErrorEnvelope),
        (status = 429, description = "Rate limited", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub async fn read_direct_upload(
    State(state): State<AppState>,
    caller: Credential,
    ApiPath(upload_id): ApiPath<String>,
) -> Result<Json<DirectUploadOut>, ApiError> {
    let tenant = caller.tenant();
    let upload = find_by_door(&state, &tenant, &upload_id, true).await?;
    Ok(Json(out(&state, &tenant, &upload).await?))
}

/// The parts' ETags in part order, checked against the upload's plan:
/// every part from 1 to its count, each once.
fn etags_in_order(upload: &Upload, parts: Vec<CompletedPartIn>) -> Result<Vec<String>, ApiError> {
    let count = upload
        .direct
        .as_ref()
        .map_or(1, |plan| plan.part_count(upload.length));
    let mut etags: Vec<Option<String>> = vec![None; count as usize];
    for part in parts {
        let number = whole_number(&part.part_number)
            .filter(|number| (1..=count).contains(number))
            .ok_or_else(|| {
                ApiError::field(
                    "parts",
                    format!("part_number must be a whole number from 1 to {count}"),
                )
            })?;
        let etag = part.etag.trim();
        if etag.is_empty()
            || etag.len() > MAX_ETAG_CHARS
            || !etag.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(ApiError::field(
                "parts",
                format!("etag of part {number} must be the ETag header its PUT answered"),
            ));
        }
        let slot = &mut etags[number as usize - 1];
        if slot.is_some() {
            return Err(ApiError::field(
                "parts",
                format!("part {number} is named twice"),
            ));
        }
        *slot = Some(etag.to_owned());
    }
    let missing: Vec<String> = etags
        .iter()
        .enumerate()
        .filter(|(_, etag)| etag.is_none())
        .map(|(index, _)| (index + 1).to_string())
        .collect();
    if !missing.is_empty() {
        return Err(ApiError::field(
            "parts",
            format!("every part must be named; missing: {}", missing.join(", ")),
        ));
    }
    Ok(etags.into_iter().flatten().collect())
}

/// Completes a direct upload from its parts' ETags: the store assembles
/// the file, its size and format are checked, and its media item is queued
/// for its variants. Completing a completed upload answers it again.
#[utoipa::path(
    post,
    path = "/direct-uploads/{upload_id}/complete",
    tag = "uploads",
    operation_id = "complete_direct_upload",
    params(("upload_id" = String, Path, description = "The direct upload")),
    request_body = CompleteDirectUploadIn,
    responses(
        (status = 200, description = "Completed: media_id is its item, queued for its variants", body = DirectUploadOut),
        (status = 400, description = "upload.unsupported_format: the upload ended and its bytes are deleted", body = ErrorEnvelope),
        (status = 401, description = "No key or session", body = ErrorEnvelope),
        (status = 404, description = "upload_not_found", body = ErrorEnvelope),
        (status = 409, description = "upload.parts_refused: a part missing or of another size than planned (named); send it and complete again", body = ErrorEnvelope),
        (status = 410, description = "upload.gone: terminated, expired, or its parts gone from the store", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: parts", body = ErrorEnvelope),
        (status = 429, description = "Rate limited", body = ErrorEnvelope),
        (status = 500, description = "upload.storage_unavailable: complete again", body = ErrorEnvelope),
        (status = 502, description = "upload.assembly_failed: the store assembled the parts into a file of another size; the upload ended, create a new one", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub async fn complete_direct_upload(
    State(state): State<AppState>,
    caller: Credential,
    ApiPath(upload_id): ApiPath<String>,
    ApiJson(body): ApiJson<CompleteDirectUploadIn>,
) -> Result<Json<DirectUploadOut>, ApiError> {
    let tenant = caller.tenant();
    let upload = find_by_door(&state, &tenant, &upload_id, true).await?;
    match upload.state {
        UploadState::Completed => return Ok(Json(out(&state, &tenant, &upload).await?)),
        UploadState::Terminated | UploadState::Expired => return Err(gone(&upload)),
        UploadState::Receiving => {}
    }
    let etags = etags_in_order(&upload, body.parts)?;
    // In a task of its own: a request stopped meanwhile does not leave the
    // store's copy half made.
    let task = {
        let (platform, tenant, upload) = (state.platform().clone(), tenant.clone(), upload.clone());
        tokio::spawn(async move {
            platform::direct_upload::complete(&platform, &tenant, &upload, etags).await
        })
    };
    let completed = task
        .await
        .map_err(|err| ApiError::internal(format!("a direct upload's completion failed: {err}")))?;
    let media = state.store().media();
    match completed {
        Ok(_) => {}
        Err(DirectCompletionError::PartsRefused(reason)) => {
            // A racer may have completed it (and dropped the assembled object).
            let now = media.resumable(&tenant, &upload.id).await?;
            if now.state != UploadState::Completed {
                return Err(refused(
                    UploadRefusal::PartsRefused,
                    format!(
                        "The object store does not hold the upload's parts as planned: {reason}. PUT those parts to their URLs (GET the upload for fresh ones), name the ETag each PUT answered, and complete again."
                    ),
                ));
            }
        }
        // The parts were each checked, so only a store that assembled
        // them wrongly gets here: the upload ends, and the fault is the
        // store's (logged as an error), not the client's.
        Err(err @ DirectCompletionError::SizeMismatch { .. }) => {
            tracing::error!(%err, upload_id = %upload.id, "the object store assembled a direct upload wrongly");
            end_assembled(&state, &tenant, &upload).await?;
            return Err(refused(
                UploadRefusal::AssemblyFailed,
                format!(
                    "The object store assembled the parts wrongly ({err}); the upload ended and its file was deleted. Create a new upload to send {} again.",
                    upload.filename
                ),
            ));
        }
        Err(DirectCompletionError::UnsupportedFormat) => {
            end_assembled(&state, &tenant, &upload).await?;
            return Err(refused(
                UploadRefusal::UnsupportedFormat,
                format!(
                    "{} is not a JPEG, PNG, WebP, GIF, MP4 or PDF file; the upload ended.",
                    upload.filename
                ),
            ));
        }
        Err(DirectCompletionError::PartsGone) => {
            end(&state, &tenant, &upload, UploadState::Terminated).await?;
            let now = media.resumable(&tenant, &upload.id).await?;
            return Err(gone(&now));
        }
        Err(DirectCompletionError::Store(err)) => return Err(store_failed(err)),
        Err(DirectCompletionError::Storage(err)) => return Err(err.into()),
        Err(DirectCompletionError::NotDirect) => return Err(unavailable()),
    }
    let now = media.resumable(&tenant, &upload.id).await?;
    Ok(Json(out(&state, &tenant, &now).await?))
}

/// Ends an upload whose parts the store already assembled (so there is no
/// multipart upload left to abort) and deletes the assembled object.
async fn end_assembled(
    state: &AppState,
    tenant: &Tenant,
    upload: &Upload,
) -> Result<bool, ApiError> {
    let assembled = Upload {
        direct: None,
        ..upload.clone()
    };
    end(state, tenant, &assembled, UploadState::Terminated).await
}

/// Ends a direct upload that has not completed: the store drops its parts
/// and its batch no longer waits for it.
#[utoipa::path(
    delete,
    path = "/direct-uploads/{upload_id}",
    tag = "uploads",
    operation_id = "abort_direct_upload",
    params(("upload_id" = String, Path, description = "The direct upload")),
    responses(
        (status = 204, description = "Ended; the store dropped its parts"),
        (status = 401, description = "No key or session", body = ErrorEnvelope),
        (status = 404, description = "upload_not_found", body = ErrorEnvelope),
        (status = 410, description = "upload.gone: already ended, or complete (its media item stays)", body = ErrorEnvelope),
        (status = 429, description = "Rate limited", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub async fn abort_direct_upload(
    State(state): State<AppState>,
    caller: Credential,
    ApiPath(upload_id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let tenant = caller.tenant();
    let upload = find_by_door(&state, &tenant, &upload_id, true).await?;
    if upload.state != UploadState::Receiving
        || !end(&state, &tenant, &upload, UploadState::Terminated).await?
    {
        let now = find_by_door(&state, &tenant, &upload_id, true).await?;
        return Err(gone(&now));
    }
    Ok(StatusCode::NO_CONTENT)
}
