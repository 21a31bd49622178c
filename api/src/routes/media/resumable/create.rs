//! `OPTIONS /uploads` (what the server speaks) and `POST /uploads` (the
//! creation and creation-with-upload extensions).

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use storage::Tenant;
use storage::ids::{MediaId, OperationId, UploadId};
use storage::media::{
    BatchChoice, Created, DirectPlan, JoinRefusal, MAX_FILENAME_BYTES, NewUpload, StorageStrategy,
    Upload, UploadOptions,
};

use super::part::{PartRequest, Received, receive};
use super::protocol::{self, Checksum};
use super::{complete, upload_url};
use crate::error::{ApiError, ErrorEnvelope, UploadRefusal};
use crate::principal::Credential;
use crate::routes::media::progress::progress_url;
use crate::state::AppState;

pub(super) fn refused(refusal: UploadRefusal, message: impl Into<String>) -> ApiError {
    ApiError::Upload {
        refusal,
        message: message.into(),
    }
}

/// What the server speaks: version, extensions, largest upload, checksums.
#[utoipa::path(
    options,
    path = "/uploads",
    tag = "uploads",
    operation_id = "discover_uploads",
    responses(
        (status = 204, description = "Tus-Version 1.0.0; Tus-Extension creation, creation-with-upload, termination, expiration, checksum; Tus-Max-Size (50 MB); Tus-Checksum-Algorithm sha1, sha256"),
    )
)]
pub async fn discover(State(state): State<AppState>) -> Response {
    let mut response = protocol::answer(StatusCode::NO_CONTENT);
    let headers = response.headers_mut();
    headers.insert(
        protocol::TUS_VERSION_HEADER,
        HeaderValue::from_static(protocol::TUS_VERSION),
    );
    headers.insert(
        protocol::TUS_EXTENSION,
        HeaderValue::from_static(protocol::TUS_EXTENSIONS),
    );
    headers.insert(
        protocol::TUS_CHECKSUM_ALGORITHM,
        HeaderValue::from_static(protocol::TUS_CHECKSUM_ALGORITHMS),
    );
    headers.insert(
        protocol::TUS_MAX_SIZE,
        HeaderValue::from(state.upload_limits().max_file_bytes),
    );
    response
}

/// What `Upload-Metadata` (or a direct upload's body) asks for, checked.
pub(super) struct Requested {
    pub(super) filename: String,
    pub(super) filetype: Option<String>,
    pub(super) listing_number: Option<String>,
    pub(super) batch: BatchChoice,
    pub(super) storage_strategy: StorageStrategy,
    pub(super) enable_optimization: bool,
    pub(super) related_entity_type: Option<String>,
    pub(super) related_entity_id: Option<String>,
}

/// Reads the metadata the upload form carries: `filename` (or `name`),
/// `filetype` (or `type`), `listing_number`, `batch_id`, `storage_strategy`,
/// `enable_optimization`, `related_entity_type`, `related_entity_id`.
/// Other keys (clients add their own) are kept as sent and not read.
pub(super) fn requested(pairs: &BTreeMap<String, String>) -> Result<Requested, ApiError> {
    let text = |keys: &[&str]| {
        keys.iter()
            .find_map(|key| pairs.get(*key))
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
    };
    let filename = text(&["filename", "name"]).unwrap_or_else(|| "upload".to_owned());
    if filename.len() > MAX_FILENAME_BYTES {
        return Err(refused(
            UploadRefusal::FilenameTooLong,
            format!(
                "The file name is {} bytes; names may be at most {MAX_FILENAME_BYTES} bytes of UTF-8. Rename the file and upload again.",
                filename.len()
            ),
        ));
    }
    let storage_strategy = match text(&["storage_strategy"]) {
        None => StorageStrategy::Cloud,
        Some(value) => StorageStrategy::parse(&value.to_ascii_lowercase())
            .ok_or_else(|| ApiError::field("storage_strategy", "must be cloud, local or hybrid"))?,
    };
    let enable_optimization = match text(&["enable_optimization"]).as_deref() {
        None | Some("true" | "1") => true,
        Some("false" | "0") => false,
        Some(_) => {
            return Err(ApiError::field(
                "enable_optimization",
                "must be true or false",
            ));
        }
    };
    let batch = match text(&["batch_id"]) {
        None => BatchChoice::Own,
        Some(id) => BatchChoice::Join(
            OperationId::parse(&id).ok_or(ApiError::NotFound(crate::error::Resource::Operation))?,
        ),
    };
    let bounded = |name: &'static str, value: Option<String>| match value {
        Some(value) if value.len() > 1024 => {
            Err(ApiError::field(name, "must be at most 1024 bytes"))
        }
        other => Ok(other),
    };
    Ok(Requested {
        filename,
        filetype: bounded("filetype", text(&["filetype", "type"]))?,
        listing_number: text(&["listing_number"]),
        batch,
        storage_strategy,
        enable_optimization,
        related_entity_type: bounded("related_entity_type", text(&["related_entity_type"]))?,
        related_entity_id: bounded("related_entity_id", text(&["related_entity_id"]))?,
    })
}

/// Creates a resumable upload; with a body, takes its first bytes too.
///
/// `Upload-Metadata` (tus's comma-separated `key base64(value)` pairs)
/// carries `filename`, `filetype`, `listing_number`, `batch_id` (from
/// `POST /upload-batches`; without one the upload is a batch of its own),
/// `storage_strategy`, `enable_optimization`, `related_entity_type` and
/// `related_entity_id`. `X-Idempotency-Key` is optional here (tus clients
/// send none): when sent, a retry of the same creation answers the same
/// upload.
#[utoipa::path(
    post,
    path = "/uploads",
    tag = "uploads",
    operation_id = "create_upload",
    params(
        ("Tus-Resumable" = super::protocol::TusResumable, Header, description = "The protocol version: 1.0.0"),
        ("Upload-Length" = i64, Header, description = "The file's size in bytes (at most 50 MB)"),
        ("Upload-Metadata" = Option<String>, Header, description = "Comma-separated `key base64(value)` pairs: filename, filetype, listing_number, batch_id, storage_strategy, enable_optimization, related_entity_type, related_entity_id"),
        ("Upload-Checksum" = Option<String>, Header, description = "`sha1|sha256 BASE64` of the body, when it carries bytes"),
    ),
    request_body(content_type = "application/offset+octet-stream", description = "Optional: the file's first bytes (creation-with-upload)"),
    responses(
        (status = 201, description = "Created: Location is the upload's URL; Upload-Offset, Upload-Expires, Upload-Batch-Id and Upload-Progress-Url (the batch's progress stream) are set"),
        (status = 400, description = "upload.length_required, upload.malformed (metadata), upload.filename_too_long, upload.unsupported_format, upload.checksum_algorithm_unsupported", body = ErrorEnvelope),
        (status = 401, description = "No key or session", body = ErrorEnvelope),
        (status = 404, description = "listing_not_found, operation_not_found (batch_id)", body = ErrorEnvelope),
        (status = 409, description = "upload.batch_full, upload.batch_ended", body = ErrorEnvelope),
        (status = 412, description = "upload.tus_version_unsupported", body = ErrorEnvelope),
        (status = 413, description = "upload.file_too_large (Upload-Length over 50 MB), upload.length_exceeded", body = ErrorEnvelope),
        (status = 415, description = "upload.content_type_unsupported", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: a bad metadata value", body = ErrorEnvelope),
        (status = 429, description = "Rate limited", body = ErrorEnvelope),
        (status = 460, description = "upload.checksum_mismatch: the first bytes were not kept", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub async fn create_upload(
    State(state): State<AppState>,
    caller: Credential,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match create(&state, &caller.tenant(), &headers, body).await {
        Ok(response) => response,
        Err(err) => protocol::error(err),
    }
}

async fn create(
    state: &AppState,
    tenant: &Tenant,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    protocol::check_version(headers)?;
    if headers.contains_key(protocol::UPLOAD_DEFER_LENGTH) {
        return Err(refused(
            UploadRefusal::LengthRequired,
            "Deferring the length is not supported: send Upload-Length.",
        ));
    }
    if headers.contains_key(protocol::UPLOAD_CONCAT) {
        return Err(refused(
            UploadRefusal::Malformed,
            "Concatenation is not supported: send each file as one upload.",
        ));
    }
    let length = protocol::number(headers, &protocol::UPLOAD_LENGTH)?.ok_or_else(|| {
        refused(
            UploadRefusal::LengthRequired,
            "Send the file's size in bytes as Upload-Length.",
        )
    })?;
    let limits = state.upload_limits();
    if length as u64 > limits.max_file_bytes {
        return Err(refused(
            UploadRefusal::FileTooLarge,
            format!(
                "The file is {length} bytes; a file may be at most {} MB.",
                limits.max_file_bytes / (1024 * 1024)
            ),
        ));
    }
    let carries_bytes = protocol::check_bytes_content_type(headers, false)?;
    let checksum = Checksum::parse(headers)?;
    let (raw_metadata, pairs) = protocol::metadata(headers)?;
    let requested = requested(&pairs)?;
    let mut upload = open(
        state,
        tenant,
        requested,
        UploadId::generate(),
        length,
        raw_metadata,
        None,
    )
    .await?;
    let mut media_id = None;
    if carries_bytes || length == 0 {
        let received = if carries_bytes {
            receive(
                PartRequest {
                    platform: state.platform().clone(),
                    tenant: tenant.clone(),
                    upload: upload.clone(),
                    checksum,
                    idle: limits.resumable_idle,
                    expiry: limits.resumable_expiry,
                },
                body,
            )
            .await
        } else {
            Ok(Received::Nothing)
        };
        match received {
            Ok(Received::Committed(offset)) => upload.offset = offset,
            Ok(Received::Nothing) => {}
            // The upload exists: the client sends the bytes again by PATCH.
            Err(ApiError::Upload {
                refusal: UploadRefusal::ChecksumMismatch | UploadRefusal::StorageUnavailable,
                ..
            }) => {}
            Err(err) => {
                super::end(
                    state,
                    tenant,
                    &upload,
                    storage::media::UploadState::Terminated,
                )
                .await?;
                return Err(err);
            }
        }
        if upload.offset == upload.length {
            media_id = Some(complete(state, tenant, &upload).await?.id);
        }
    }
    let mut response = protocol::answer(StatusCode::CREATED);
    protocol::set_text(&mut response, header::LOCATION, &upload_url(&upload.id));
    protocol::set_number(&mut response, protocol::UPLOAD_OFFSET, upload.offset);
    protocol::set_expires(&mut response, upload.expires_at);
    protocol::set_text(
        &mut response,
        protocol::UPLOAD_BATCH_ID,
        upload.operation_id.as_str(),
    );
    protocol::set_text(
        &mut response,
        protocol::UPLOAD_PROGRESS_URL,
        &progress_url(state, tenant, &upload.operation_id),
    );
    if let Some(media_id) = media_id {
        protocol::set_text(&mut response, protocol::UPLOAD_MEDIA_ID, media_id.as_str());
    }
    Ok(response)
}

/// Opens upload `id` of `length` bytes as `requested`, in its batch: checks
/// its storage strategy and listing, then records it (its expiry from now;
/// `direct` the store's multipart upload of a direct upload). A full or
/// ended batch, or one of another listing, refuses it.
pub(super) async fn open(
    state: &AppState,
    tenant: &Tenant,
    requested: Requested,
    id: UploadId,
    length: i64,
    metadata: String,
    direct: Option<DirectPlan>,
) -> Result<Upload, ApiError> {
    if let Some(reason) = state
        .platform()
        .media
        .as_ref()
        .ok_or_else(|| ApiError::internal("no object store is configured"))?
        .refusal(requested.storage_strategy)
    {
        return Err(ApiError::field("storage_strategy", reason));
    }
    let listing_id = match &requested.listing_number {
        Some(number) => Some(state.store().listings().get(tenant, number).await?.id),
        None => None,
    };
    let now = state.store().clock().now();
    let new = NewUpload {
        id,
        media_id: MediaId::generate(),
        length,
        filename: requested.filename,
        filetype: requested.filetype,
        options: UploadOptions {
            listing_id,
            storage_strategy: requested.storage_strategy,
            enable_optimization: requested.enable_optimization,
            related_entity_type: requested.related_entity_type,
            related_entity_id: requested.related_entity_id,
        },
        metadata,
        expires_at: now.plus_seconds(state.upload_limits().resumable_expiry.as_secs() as i64),
        direct,
    };
    let created = state
        .store()
        .media()
        .create_resumable(tenant, &requested.batch, &new)
        .await?;
    match created {
        Created::Upload(upload) => Ok(*upload),
        Created::Refused(JoinRefusal::Full { expected }) => Err(refused(
            UploadRefusal::BatchFull,
            format!(
                "The batch announced {expected} files and has an upload for each; open another batch."
            ),
        )),
        Created::Refused(JoinRefusal::Ended) => Err(refused(
            UploadRefusal::BatchEnded,
            "The batch's uploads all ended; open another batch.",
        )),
        Created::Refused(JoinRefusal::OtherListing) => Err(ApiError::field(
            "listing_number",
            "differs from the listing of the batch",
        )),
    }
}
