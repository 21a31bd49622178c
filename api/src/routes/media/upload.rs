//! `POST /media/upload` and `POST /listings/{listing_number}/media`: a
//! multipart body whose `files` parts stream to the object store as they
//! arrive. Formats are told by their magic bytes; the limits (200 files, 50 MB
//! per file, 1 GB per request, 60 seconds) are enforced while streaming; a
//! refused request leaves no object and no row behind. Each stored file gets
//! one processing job, and the answer names the operation whose progress the
//! `progress_url` streams.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::multipart::{Field, MultipartRejection};
use axum::extract::{Multipart, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};
use platform::PushOptions;
use platform::kinds::ProcessMedia;
use platform::progress::MediaStep;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use storage::Tenant;
use storage::ids::{ListingId, MediaId, OperationId};
use storage::media::{
    MAX_FILENAME_BYTES, MediaItem, MediaType, NewMediaItem, StorageKey, StorageStrategy,
    UploadOptions,
};
use utoipa::ToSchema;

use super::progress::progress_url;
use crate::config::UploadLimits;
use crate::error::{ApiError, ErrorEnvelope, UploadRefusal};
use crate::extract::ApiPath;
use crate::multipart::{BodyFingerprint, PartsFingerprint};
use crate::principal::Credential;
use crate::state::AppState;

fn megabytes(bytes: u64) -> String {
    if bytes >= 1024 * 1024 * 1024 {
        format!("{} GB", bytes / (1024 * 1024 * 1024))
    } else {
        format!("{} MB", bytes / (1024 * 1024))
    }
}
/// Longest value of a non-file field.
const MAX_FIELD_BYTES: usize = 1024;
/// Parts the object store uploads at once per file.
const STORE_CONCURRENCY: usize = 4;

/// One stored file in the answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UploadedFile {
    /// The media item.
    pub media_id: String,
    /// The client's file name.
    pub filename: String,
    /// Bytes stored.
    pub size_bytes: i64,
    /// Detected from the content: jpeg, png, webp, gif, mp4 or pdf.
    pub detected_type: String,
    /// Its IANA media type.
    pub content_type: String,
    /// `queued`.
    pub status: String,
    /// The operation's progress stream (carries a short-lived token).
    pub progress_url: String,
}

/// The answer to an upload.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UploadOut {
    /// Track the processing with it.
    pub operation_id: String,
    /// `processing`.
    pub status: String,
    /// The listing the files belong to.
    pub listing_number: Option<String>,
    /// Where the objects are kept.
    pub storage_strategy: String,
    /// Server-sent events of the operation; the URL carries a token valid for an hour.
    pub progress_url: String,
    /// The stored files, in request order.
    pub files: Vec<UploadedFile>,
}

fn refused(refusal: UploadRefusal, message: impl Into<String>) -> ApiError {
    ApiError::Upload {
        refusal,
        message: message.into(),
    }
}

/// A body that is not `multipart/form-data` with a boundary at all.
fn not_multipart(rejection: &MultipartRejection) -> ApiError {
    refused(
        UploadRefusal::Malformed,
        format!(
            "The body must be multipart/form-data with a boundary: {}",
            rejection.body_text()
        ),
    )
}

fn malformed(err: axum::extract::multipart::MultipartError) -> ApiError {
    if err.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return refused(
            UploadRefusal::RequestTooLarge,
            "The request is larger than 1 GB.",
        );
    }
    refused(
        UploadRefusal::Malformed,
        format!("The multipart body could not be read: {}", err.body_text()),
    )
}

/// What the request's fields said, beside its files.
#[derive(Default)]
struct Fields {
    listing_number: Option<String>,
    storage_strategy: Option<StorageStrategy>,
    enable_optimization: Option<bool>,
    related_entity_type: Option<String>,
    related_entity_id: Option<String>,
}

/// An upload in progress: what is stored so far, so a refusal can remove it.
struct Receiving {
    limits: UploadLimits,
    stores: Vec<Arc<dyn ObjectStore>>,
    stored: Vec<NewMediaItem>,
    /// The file being written: one multipart upload per store.
    writing: Vec<WriteMultipart>,
    total: u64,
    fingerprint: PartsFingerprint,
    fields: Fields,
    /// Set once the rows are being recorded: from then on the objects belong
    /// to them and are never removed on the request's behalf.
    handed_over: bool,
}

impl Receiving {
    /// Removes every object stored so far and aborts the file being written
    /// (a refused or failed request).
    async fn discard(&mut self) {
        let writing = std::mem::take(&mut self.writing);
        let stored = std::mem::take(&mut self.stored);
        discard_objects(&self.stores, writing, &stored).await;
    }
}

impl Drop for Receiving {
    /// A request dropped midway (the client hung up) leaves no objects
    /// behind: they are removed in the background.
    fn drop(&mut self) {
        if self.handed_over || (self.writing.is_empty() && self.stored.is_empty()) {
            return;
        }
        let writing = std::mem::take(&mut self.writing);
        let stored = std::mem::take(&mut self.stored);
        let stores = self.stores.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { discard_objects(&stores, writing, &stored).await });
        }
    }
}

/// Aborts unfinished multipart uploads and deletes the finished objects.
async fn discard_objects(
    stores: &[Arc<dyn ObjectStore>],
    writing: Vec<WriteMultipart>,
    stored: &[NewMediaItem],
) {
    for writer in writing {
        if let Err(err) = writer.abort().await {
            tracing::warn!(%err, "could not abort a refused upload's multipart upload");
        }
    }
    for item in stored {
        let path = item.object_key.to_path();
        for store in stores {
            match store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(err) => {
                    tracing::warn!(%err, key = %item.object_key, "could not remove a refused upload's object");
                }
            }
        }
    }
}

/// Reads a small text field.
async fn text_field(field: Field<'_>, receiving: &mut Receiving) -> Result<String, ApiError> {
    let name = field.name().unwrap_or_default().to_owned();
    let bytes = field.bytes().await.map_err(malformed)?;
    receiving.fingerprint.update(&bytes);
    receiving.total += bytes.len() as u64;
    if bytes.len() > MAX_FIELD_BYTES {
        return Err(ApiError::field(
            name,
            format!("must be at most {MAX_FIELD_BYTES} bytes"),
        ));
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| ApiError::field(name, "must be UTF-8 text"))
}

/// Applies one non-file field.
fn apply_field(fields: &mut Fields, name: &str, value: String) -> Result<(), ApiError> {
    let value = value.trim().to_owned();
    match name {
        "listing_number" => fields.listing_number = Some(value),
        "storage_strategy" => {
            fields.storage_strategy = Some(
                StorageStrategy::parse(&value.to_ascii_lowercase()).ok_or_else(|| {
                    ApiError::field("storage_strategy", "must be cloud, local or hybrid")
                })?,
            );
        }
        "enable_optimization" => {
            fields.enable_optimization = Some(match value.to_ascii_lowercase().as_str() {
                "true" | "1" => true,
                "false" | "0" => false,
                _ => {
                    return Err(ApiError::field(
                        "enable_optimization",
                        "must be true or false",
                    ));
                }
            });
        }
        "related_entity_type" => fields.related_entity_type = Some(value),
        "related_entity_id" => fields.related_entity_id = Some(value),
        other => return Err(ApiError::field(other, "is not a known field")),
    }
    Ok(())
}

/// Streams one file part to the object store(s), detecting its format from
/// its first bytes and enforcing the size limits as it goes.
async fn receive_file(
    tenant: &Tenant,
    mut field: Field<'_>,
    receiving: &mut Receiving,
) -> Result<(), ApiError> {
    let filename = field
        .file_name()
        .map(str::to_owned)
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| format!("file-{}", receiving.stored.len() + 1));
    if filename.len() > MAX_FILENAME_BYTES {
        // Said before a byte is stored; the name itself is not repeated.
        return Err(refused(
            UploadRefusal::FilenameTooLong,
            format!(
                "File {} has a name of {} bytes; names may be at most {MAX_FILENAME_BYTES} bytes of UTF-8. Rename the file and upload again.",
                receiving.stored.len() + 1,
                filename.len()
            ),
        ));
    }
    let limits = receiving.limits;
    if receiving.stored.len() == limits.max_files {
        return Err(refused(
            UploadRefusal::TooManyFiles,
            format!("A request carries at most {} files.", limits.max_files),
        ));
    }
    let id = MediaId::generate();
    // The first bytes wait here until the format is known.
    let mut head: Vec<u8> = Vec::with_capacity(MediaType::SNIFF_LEN);
    let mut media_type = None;
    let mut hasher = Sha256::new();
    let mut size: u64 = 0;
    let result: Result<(), ApiError> = async {
        while let Some(chunk) = field.chunk().await.map_err(malformed)? {
            size += chunk.len() as u64;
            receiving.total += chunk.len() as u64;
            if size > limits.max_file_bytes {
                return Err(refused(
                    UploadRefusal::FileTooLarge,
                    format!(
                        "{filename} is larger than {}.",
                        megabytes(limits.max_file_bytes)
                    ),
                ));
            }
            if receiving.total > limits.max_request_bytes {
                return Err(refused(
                    UploadRefusal::RequestTooLarge,
                    format!(
                        "The request is larger than {}.",
                        megabytes(limits.max_request_bytes)
                    ),
                ));
            }
            hasher.update(&chunk);
            receiving.fingerprint.update(&chunk);
            if media_type.is_none() {
                head.extend_from_slice(&chunk);
                if head.len() < MediaType::SNIFF_LEN {
                    continue;
                }
                let detected = detect(&head, &filename)?;
                open_writers(receiving, tenant, &id, detected).await?;
                for writer in &mut receiving.writing {
                    writer.write(&head);
                }
                head.clear();
                media_type = Some(detected);
                continue;
            }
            for writer in &mut receiving.writing {
                writer
                    .wait_for_capacity(STORE_CONCURRENCY)
                    .await
                    .map_err(storage_unavailable)?;
                writer.write(&chunk);
            }
        }
        Ok(())
    }
    .await;
    if let Err(err) = result {
        for writer in std::mem::take(&mut receiving.writing) {
            let _ = writer.abort().await;
        }
        return Err(err);
    }
    // A file shorter than the sniffing window is judged on what there is.
    let media_type = match media_type {
        Some(kind) => kind,
        None => {
            let detected = detect(&head, &filename)?;
            open_writers(receiving, tenant, &id, detected).await?;
            for writer in &mut receiving.writing {
                writer.write(&head);
            }
            detected
        }
    };
    // Recorded before the writers finish: should one store fail, the
    // request's discard also removes what the others completed.
    receiving.stored.push(NewMediaItem {
        object_key: StorageKey::original(tenant, &id, media_type.extension()),
        id,
        filename,
        size_bytes: i64::try_from(size).unwrap_or(i64::MAX),
        media_type,
        content_sha256: hex::encode(hasher.finalize()),
    });
    while !receiving.writing.is_empty() {
        let writer = receiving.writing.remove(0);
        writer.finish().await.map_err(storage_unavailable)?;
    }
    Ok(())
}

fn detect(head: &[u8], filename: &str) -> Result<MediaType, ApiError> {
    MediaType::detect(head).ok_or_else(|| {
        refused(
            UploadRefusal::UnsupportedFormat,
            format!("{filename} is not JPEG, PNG, WebP, GIF, MP4 or PDF (judged by its content)."),
        )
    })
}

fn storage_unavailable(err: object_store::Error) -> ApiError {
    tracing::error!(%err, "object store write failed");
    refused(
        UploadRefusal::StorageUnavailable,
        "Storage is unavailable; it is safe to retry with the same idempotency key.",
    )
}

/// Starts the file's multipart upload on every store, into `receiving.writing`.
async fn open_writers(
    receiving: &mut Receiving,
    tenant: &Tenant,
    id: &MediaId,
    media_type: MediaType,
) -> Result<(), ApiError> {
    let path = StorageKey::original(tenant, id, media_type.extension()).to_path();
    for store in &receiving.stores {
        let upload = store
            .put_multipart(&path)
            .await
            .map_err(storage_unavailable)?;
        receiving.writing.push(WriteMultipart::new(upload));
    }
    Ok(())
}

/// Reads every part: files to the store, fields into `receiving.fields`.
async fn receive(
    state: &AppState,
    tenant: &Tenant,
    mut multipart: Multipart,
    receiving: &mut Receiving,
) -> Result<(), ApiError> {
    while let Some(field) = multipart.next_field().await.map_err(malformed)? {
        let name = field.name().unwrap_or_default().to_owned();
        receiving.fingerprint.begin(&name, field.file_name());
        if name == "files" || name == "files[]" {
            if receiving.stores.is_empty() {
                let strategy = receiving
                    .fields
                    .storage_strategy
                    .unwrap_or(StorageStrategy::Cloud);
                let stores = media_stores(state)?;
                if let Some(reason) = stores.refusal(strategy) {
                    return Err(ApiError::field("storage_strategy", reason));
                }
                receiving.stores = stores.targets(strategy);
            }
            receive_file(tenant, field, receiving).await?;
        } else {
            if name == "storage_strategy" && !receiving.stores.is_empty() {
                return Err(ApiError::field(
                    "storage_strategy",
                    "must come before the files: they are stored as they arrive",
                ));
            }
            let value = text_field(field, receiving).await?;
            apply_field(&mut receiving.fields, &name, value)?;
        }
    }
    if receiving.stored.is_empty() {
        return Err(refused(
            UploadRefusal::NoFiles,
            "The request carries no `files` part.",
        ));
    }
    Ok(())
}

fn media_stores(state: &AppState) -> Result<&platform::media_stores::MediaStores, ApiError> {
    state
        .platform()
        .media
        .as_ref()
        .ok_or_else(|| ApiError::internal("no object store is configured"))
}

/// The listing named by the path or the `listing_number` field (which must
/// agree), if it is the caller's.
async fn listing_of(
    state: &AppState,
    tenant: &Tenant,
    from_path: Option<&str>,
    from_field: Option<&str>,
) -> Result<Option<(ListingId, String)>, ApiError> {
    let number = match (from_path, from_field.filter(|n| !n.is_empty())) {
        (Some(path), Some(field))
            if storage::listings::normalise_listing_number(path)
                != storage::listings::normalise_listing_number(field) =>
        {
            return Err(ApiError::field(
                "listing_number",
                "differs from the listing in the path",
            ));
        }
        (Some(number), _) | (None, Some(number)) => number,
        (None, None) => return Ok(None),
    };
    let listing = state.store().listings().get(tenant, number).await?;
    Ok(Some((listing.id, listing.listing_number)))
}

/// Receives, records and queues an upload.
async fn accept_upload(
    state: &AppState,
    caller: &Credential,
    path_listing: Option<&str>,
    multipart: Multipart,
) -> Response {
    let tenant = &caller.tenant();
    let limits = state.upload_limits();
    let mut receiving = Receiving {
        limits,
        stores: Vec::new(),
        stored: Vec::new(),
        total: 0,
        writing: Vec::new(),
        fingerprint: PartsFingerprint::default(),
        fields: Fields::default(),
        handed_over: false,
    };
    // A timeout drops `receive` midway; `discard` below then aborts the file
    // being written. A request dropped altogether leaves that to `Receiving`'s
    // drop.
    let received = tokio::time::timeout(
        limits.timeout,
        receive(state, tenant, multipart, &mut receiving),
    )
    .await
    .unwrap_or_else(|_| {
        Err(refused(
            UploadRefusal::Timeout,
            format!(
                "The upload took longer than {} seconds.",
                limits.timeout.as_secs()
            ),
        ))
    });
    let outcome = match received {
        Ok(()) => {
            // Dropped from here on, the request may have committed its rows.
            receiving.handed_over = true;
            record(
                state,
                tenant,
                path_listing,
                &receiving.fields,
                &receiving.stored,
            )
            .await
        }
        Err(err) => Err(err),
    };
    match outcome {
        Ok(out) => {
            let mut response = Json(out).into_response();
            let fingerprint = std::mem::take(&mut receiving.fingerprint).finish();
            response
                .extensions_mut()
                .insert(BodyFingerprint(fingerprint));
            response
        }
        Err(err) => {
            receiving.discard().await;
            err.into_response()
        }
    }
}

/// Writes the rows, queues one job per file and publishes the first state.
async fn record(
    state: &AppState,
    tenant: &Tenant,
    path_listing: Option<&str>,
    fields: &Fields,
    stored: &[NewMediaItem],
) -> Result<UploadOut, ApiError> {
    let listing = listing_of(
        state,
        tenant,
        path_listing,
        fields.listing_number.as_deref(),
    )
    .await?;
    let strategy = fields.storage_strategy.unwrap_or(StorageStrategy::Cloud);
    let options = UploadOptions {
        listing_id: listing.as_ref().map(|(id, _)| id.clone()),
        storage_strategy: strategy,
        enable_optimization: fields.enable_optimization.unwrap_or(true),
        related_entity_type: fields.related_entity_type.clone(),
        related_entity_id: fields.related_entity_id.clone(),
    };
    let operation_id = OperationId::generate();
    let items = state
        .store()
        .media()
        .create_upload(tenant, &operation_id, &options, stored)
        .await?;
    // The rows are committed: from here on nothing fails the request, since a
    // refusal would remove originals the rows point at. Items whose job did
    // not get queued stay `queued`, and the media sweep pushes them again.
    queue_processing(state, tenant, &operation_id, &items).await;
    let progress_url = progress_url(state, tenant, &operation_id);
    Ok(UploadOut {
        operation_id: operation_id.to_string(),
        status: "processing".to_owned(),
        listing_number: listing.map(|(_, number)| number),
        storage_strategy: strategy.as_str().to_owned(),
        files: items
            .iter()
            .map(|item| UploadedFile {
                media_id: item.id.to_string(),
                filename: item.filename.clone(),
                size_bytes: item.size_bytes,
                detected_type: item.media_type.as_str().to_owned(),
                content_type: item.media_type.content_type().to_owned(),
                status: item.status.as_str().to_owned(),
                progress_url: progress_url.clone(),
            })
            .collect(),
        progress_url,
    })
}

/// Announces the upload and pushes one job per item. Failures are logged,
/// not returned: the upload is recorded and the sweep recovers its jobs.
async fn queue_processing(
    state: &AppState,
    tenant: &Tenant,
    operation_id: &OperationId,
    items: &[MediaItem],
) {
    let queued = state
        .platform()
        .progress
        .publish_step(tenant, operation_id, MediaStep::Queued)
        .await;
    if let Err(err) = queued {
        tracing::warn!(%err, %operation_id, "upload's first progress state not published");
    }
    let jobs: Vec<_> = items
        .iter()
        .map(|item| {
            let job = ProcessMedia::new(tenant, operation_id, &item.id);
            (job, PushOptions::default())
        })
        .collect();
    let queue = &state.platform().queue;
    if let Err(err) = queue.push_many(jobs.clone()).await {
        tracing::warn!(
            %err,
            %operation_id,
            "upload's processing jobs not queued yet; retrying until the queue is back"
        );
        // Should this process stop first, the media sweep pushes them.
        let patience = ProcessMedia::LOST_PUSH_AFTER_SECONDS.unsigned_abs();
        queue.keep_pushing(jobs, Duration::from_secs(patience));
    }
}

/// Uploads files (to a listing named by the `listing_number` field, or to none).
#[utoipa::path(
    post,
    path = "/media/upload",
    tag = "media",
    operation_id = "upload_media",
    request_body(content_type = "multipart/form-data", description = "Parts: files (repeatable), listing_number, related_entity_type, related_entity_id, storage_strategy (cloud, local, hybrid; before the files), enable_optimization"),
    responses(
        (status = 200, description = "Stored; processing started", body = UploadOut),
        (status = 400, description = "upload.too_many_files, upload.unsupported_format, upload.filename_too_long, upload.no_files, upload.malformed", body = ErrorEnvelope),
        (status = 401, description = "No key or session", body = ErrorEnvelope),
        (status = 404, description = "listing_not_found", body = ErrorEnvelope),
        (status = 408, description = "upload.timeout", body = ErrorEnvelope),
        (status = 413, description = "upload.file_too_large (over 50 MB), upload.request_too_large (over 1 GB)", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: a bad field", body = ErrorEnvelope),
        (status = 429, description = "Rate limited", body = ErrorEnvelope),
        (status = 500, description = "upload.storage_unavailable", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub async fn upload(
    State(state): State<AppState>,
    caller: Credential,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    match multipart {
        Ok(multipart) => accept_upload(&state, &caller, None, multipart).await,
        Err(rejection) => not_multipart(&rejection).into_response(),
    }
}

/// Uploads files to the listing in the path.
#[utoipa::path(
    post,
    path = "/listings/{listing_number}/media",
    tag = "media",
    operation_id = "upload_listing_media",
    params(("listing_number" = String, Path, description = "The listing's number")),
    request_body(content_type = "multipart/form-data", description = "As POST /media/upload; a listing_number part must name the same listing"),
    responses(
        (status = 200, description = "Stored; processing started", body = UploadOut),
        (status = 400, description = "upload.too_many_files, upload.unsupported_format, upload.filename_too_long, upload.no_files, upload.malformed", body = ErrorEnvelope),
        (status = 401, description = "No key or session", body = ErrorEnvelope),
        (status = 404, description = "listing_not_found", body = ErrorEnvelope),
        (status = 413, description = "upload.file_too_large, upload.request_too_large", body = ErrorEnvelope),
        (status = 422, description = "validation.failed", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub async fn upload_to_listing(
    State(state): State<AppState>,
    caller: Credential,
    ApiPath(listing_number): ApiPath<String>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    match multipart {
        Ok(multipart) => accept_upload(&state, &caller, Some(&listing_number), multipart).await,
        Err(rejection) => not_multipart(&rejection).into_response(),
    }
}
