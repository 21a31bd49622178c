//! Resumable uploads: tus 1.0 at `/api/v1/uploads` (core, creation,
//! creation-with-upload, termination, expiration, checksum), and the batches
//! that group a shoot's uploads under one operation's progress.
//!
//! - `OPTIONS /uploads` says what the server speaks (no credential).
//! - `POST /uploads` creates an upload from `Upload-Length` and
//!   `Upload-Metadata` (and, with a body, takes its first bytes);
//!   `Location` is its URL.
//! - `HEAD /uploads/{upload_id}` tells its offset; `PATCH` adds bytes from
//!   it; `DELETE` ends it and deletes its bytes.
//! - `POST /upload-batches` opens a batch for a number of files; each
//!   upload names it in its metadata (`batch_id`), and the batch's
//!   `progress_url` follows them all.
//!
//! - `POST /direct-uploads` (the S3 profile) hands out pre-signed part URLs
//!   of a multipart upload in the object store; the client sends the parts
//!   there and completes the upload here (`direct`): two doors to one
//!   pipeline.
//!
//! Bytes arrive in parts (`part`), kept in the object store every replica
//! reads, with the offset in the database, so an upload resumes through any
//! replica and after a restart. Once every byte is there the upload
//! becomes a media item exactly as a file of `POST /media/upload` does
//! (`platform::resumable`). Abandoned uploads expire (`UPLOAD_EXPIRY_HOURS`,
//! 24 by default) and the workers' `upload_expiry` task deletes their bytes.

pub mod batches;
pub mod create;
pub mod direct;
mod part;
pub mod protocol;
pub mod transfer;
mod writers;

use axum::http::StatusCode;
use axum::response::Response;
use platform::resumable::CompletionError;
use storage::Tenant;
use storage::ids::UploadId;
use storage::media::{MediaItem, Upload, UploadState};

use crate::error::{ApiError, UploadRefusal};
use crate::state::AppState;

/// The URL of an upload, as `Location` gives it: relative, so a client
/// resolves it against the address its creation reached (through whatever
/// proxy or alias host), as tus clients do.
pub fn upload_url(id: &UploadId) -> String {
    format!("/api/v1/uploads/{id}")
}

/// One of the caller's tus uploads by the id in its URL: anything else
/// (another agency's, a malformed id, a direct upload) is 404.
pub async fn find(state: &AppState, tenant: &Tenant, id: &str) -> Result<Upload, ApiError> {
    find_by_door(state, tenant, id, false).await
}

/// One of the caller's uploads by the id in its URL, if it came in through
/// the door asked for (`direct`, or tus); 404 otherwise.
async fn find_by_door(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
    direct: bool,
) -> Result<Upload, ApiError> {
    let not_found = || ApiError::NotFound(crate::error::Resource::Upload);
    let id = UploadId::parse(id).ok_or_else(not_found)?;
    let upload = state.store().media().resumable(tenant, &id).await?;
    if upload.direct.is_some() == direct {
        Ok(upload)
    } else {
        Err(not_found())
    }
}

/// Completes an upload whose every byte arrived. Content of no accepted
/// format ends the upload (it never could complete) and deletes its bytes.
/// The work runs in a task of its own: a request stopped meanwhile (its
/// client gone, its deadline passed) does not leave the original half
/// written.
pub async fn complete(
    state: &AppState,
    tenant: &Tenant,
    upload: &Upload,
) -> Result<MediaItem, ApiError> {
    let task = {
        let (platform, tenant, upload) = (state.platform().clone(), tenant.clone(), upload.clone());
        tokio::spawn(
            async move { platform::resumable::complete(&platform, &tenant, &upload).await },
        )
    };
    let completed = task
        .await
        .map_err(|err| ApiError::internal(format!("an upload's completion failed: {err}")))?;
    match completed {
        Ok(item) => Ok(item),
        Err(CompletionError::UnsupportedFormat) => {
            end(state, tenant, upload, UploadState::Terminated).await?;
            Err(part::unsupported(upload))
        }
        Err(CompletionError::Storage(err)) => Err(err.into()),
        Err(err) => {
            tracing::error!(%err, upload = %upload.id, "an upload could not be completed");
            Err(ApiError::Upload {
                refusal: UploadRefusal::StorageUnavailable,
                message: "The upload could not be completed yet; ask for its offset (HEAD) to complete it again.".to_owned(),
            })
        }
    }
}

/// Ends a receiving upload (terminated or refused): its bytes deleted, and
/// its batch completed if this was its last open upload.
pub async fn end(
    state: &AppState,
    tenant: &Tenant,
    upload: &Upload,
    as_state: UploadState,
) -> Result<bool, ApiError> {
    let media = state.store().media();
    let forget_at = state
        .store()
        .clock()
        .now()
        .plus_seconds(platform::resumable::COMPLETED_UPLOAD_KEPT_SECONDS);
    let ended = media
        .end_resumable(tenant, &upload.id, as_state, forget_at)
        .await?;
    if let Some(stores) = &state.platform().media
        && let Err(err) = stores
            .delete_upload_parts(
                tenant,
                &upload.id,
                upload
                    .direct
                    .as_ref()
                    .map(|plan| plan.store_upload_id.as_str()),
            )
            .await
    {
        // The expiry task deletes them when it forgets the upload.
        tracing::warn!(%err, upload = %upload.id, "an ended upload's bytes were not deleted yet");
    }
    if ended {
        media
            .complete_upload_if_done(tenant, &upload.operation_id)
            .await?;
    }
    Ok(ended)
}

/// `204` with the upload's offset.
pub fn offset_answer(upload_offset: i64) -> Response {
    let mut response = protocol::answer(StatusCode::NO_CONTENT);
    protocol::set_number(&mut response, protocol::UPLOAD_OFFSET, upload_offset);
    response
}
