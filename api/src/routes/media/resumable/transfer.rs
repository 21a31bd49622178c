//! `HEAD /uploads/{upload_id}` (its offset), `PATCH` (bytes from it) and
//! `DELETE` (termination).

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use storage::Tenant;
use storage::media::{Upload, UploadState};

use super::part::{PartRequest, Received, conflict, gone, receive};
use super::protocol::{self, Checksum};
use super::{complete, end, find, offset_answer};
use crate::error::{ApiError, ErrorEnvelope, UploadRefusal};
use crate::extract::ApiPath;
use crate::principal::Credential;
use crate::state::AppState;

/// Where an upload stands: `Upload-Offset`, `Upload-Length`,
/// `Upload-Metadata` as sent, `Upload-Expires` while it receives,
/// `Upload-Media-Id` once complete. An upload whose every byte arrived but
/// which was not completed yet (its last request stopped) is completed now.
#[utoipa::path(
    head,
    path = "/uploads/{upload_id}",
    tag = "uploads",
    operation_id = "read_upload_offset",
    params(
        ("upload_id" = String, Path, description = "The upload (its Location)"),
        ("Tus-Resumable" = super::protocol::TusResumable, Header, description = "The protocol version: 1.0.0"),
    ),
    responses(
        (status = 200, description = "Upload-Offset, Upload-Length, Upload-Metadata, Upload-Expires, Upload-Batch-Id, Upload-Media-Id (once complete); Cache-Control: no-store"),
        (status = 401, description = "No key or session"),
        (status = 404, description = "upload_not_found (another agency's upload too)"),
        (status = 410, description = "upload.gone: expired or terminated"),
        (status = 412, description = "upload.tus_version_unsupported"),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub async fn read_offset(
    State(state): State<AppState>,
    caller: Credential,
    ApiPath(upload_id): ApiPath<String>,
    headers: HeaderMap,
) -> Response {
    let tenant = caller.tenant();
    let outcome = async {
        protocol::check_version(&headers)?;
        let upload = find(&state, &tenant, &upload_id).await?;
        head(&state, &tenant, upload).await
    }
    .await;
    outcome.unwrap_or_else(protocol::error)
}

async fn head(state: &AppState, tenant: &Tenant, upload: Upload) -> Result<Response, ApiError> {
    let media_id = match upload.state {
        UploadState::Terminated | UploadState::Expired => return Err(gone(&upload)),
        UploadState::Completed => Some(upload.media_id.clone()),
        UploadState::Receiving if upload.offset == upload.length => {
            Some(complete(state, tenant, &upload).await?.id)
        }
        UploadState::Receiving => None,
    };
    let mut response = protocol::answer(StatusCode::OK);
    protocol::set_number(&mut response, protocol::UPLOAD_OFFSET, upload.offset);
    protocol::set_number(&mut response, protocol::UPLOAD_LENGTH, upload.length);
    if !upload.metadata.is_empty() {
        protocol::set_text(&mut response, protocol::UPLOAD_METADATA, &upload.metadata);
    }
    protocol::set_text(
        &mut response,
        protocol::UPLOAD_BATCH_ID,
        upload.operation_id.as_str(),
    );
    match media_id {
        Some(media_id) => {
            protocol::set_text(&mut response, protocol::UPLOAD_MEDIA_ID, media_id.as_str());
        }
        None => protocol::set_expires(&mut response, upload.expires_at),
    }
    Ok(response)
}

/// Adds bytes from the upload's offset. A request cut short keeps the bytes
/// that arrived (unless it named a checksum); the last byte completes the
/// upload into a media item (`Upload-Media-Id`), queued for its variants.
#[utoipa::path(
    patch,
    path = "/uploads/{upload_id}",
    tag = "uploads",
    operation_id = "append_upload",
    params(
        ("upload_id" = String, Path, description = "The upload (its Location)"),
        ("Tus-Resumable" = super::protocol::TusResumable, Header, description = "The protocol version: 1.0.0"),
        ("Upload-Offset" = i64, Header, description = "The upload's offset, as HEAD tells it"),
        ("Upload-Checksum" = Option<String>, Header, description = "`sha1|sha256 BASE64` of this request's bytes"),
    ),
    request_body(content_type = "application/offset+octet-stream", description = "The bytes from Upload-Offset"),
    responses(
        (status = 204, description = "Upload-Offset: the new offset; Upload-Expires; Upload-Media-Id once the upload is complete"),
        (status = 400, description = "upload.length_required (Upload-Offset), upload.unsupported_format (the upload is ended), upload.checksum_algorithm_unsupported", body = ErrorEnvelope),
        (status = 401, description = "No key or session", body = ErrorEnvelope),
        (status = 404, description = "upload_not_found (another agency's upload too)", body = ErrorEnvelope),
        (status = 409, description = "upload.offset_mismatch: Upload-Offset is not the upload's", body = ErrorEnvelope),
        (status = 410, description = "upload.gone: expired or terminated", body = ErrorEnvelope),
        (status = 412, description = "upload.tus_version_unsupported", body = ErrorEnvelope),
        (status = 413, description = "upload.length_exceeded: bytes past Upload-Length", body = ErrorEnvelope),
        (status = 415, description = "upload.content_type_unsupported", body = ErrorEnvelope),
        (status = 429, description = "Rate limited", body = ErrorEnvelope),
        (status = 460, description = "upload.checksum_mismatch: none of the bytes was kept", body = ErrorEnvelope),
        (status = 500, description = "upload.storage_unavailable", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub async fn append_upload(
    State(state): State<AppState>,
    caller: Credential,
    ApiPath(upload_id): ApiPath<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let tenant = caller.tenant();
    append(&state, &tenant, &upload_id, &headers, body)
        .await
        .unwrap_or_else(protocol::error)
}

async fn append(
    state: &AppState,
    tenant: &Tenant,
    upload_id: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    protocol::check_version(headers)?;
    protocol::check_bytes_content_type(headers, true)?;
    let offset =
        protocol::number(headers, &protocol::UPLOAD_OFFSET)?.ok_or_else(|| ApiError::Upload {
            refusal: UploadRefusal::LengthRequired,
            message: "Send the offset the bytes start at as Upload-Offset (HEAD tells it)."
                .to_owned(),
        })?;
    let checksum = Checksum::parse(headers)?;
    let mut upload = find(state, tenant, upload_id).await?;
    match upload.state {
        UploadState::Terminated | UploadState::Expired => return Err(gone(&upload)),
        _ if offset != upload.offset => return Err(conflict(&upload)),
        UploadState::Completed => {
            let mut response = offset_answer(upload.offset);
            protocol::set_text(
                &mut response,
                protocol::UPLOAD_MEDIA_ID,
                upload.media_id.as_str(),
            );
            return Ok(response);
        }
        UploadState::Receiving => {}
    }
    let limits = state.upload_limits();
    let received = receive(
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
    .await;
    match received {
        Ok(Received::Committed(offset)) => upload.offset = offset,
        Ok(Received::Nothing) => {}
        Err(
            err @ ApiError::Upload {
                refusal: UploadRefusal::UnsupportedFormat,
                ..
            },
        ) => {
            end(state, tenant, &upload, UploadState::Terminated).await?;
            return Err(err);
        }
        Err(err) => return Err(err),
    }
    let mut response = offset_answer(upload.offset);
    if upload.offset == upload.length {
        let item = complete(state, tenant, &upload).await?;
        protocol::set_text(&mut response, protocol::UPLOAD_MEDIA_ID, item.id.as_str());
    } else {
        let expires_at = state
            .store()
            .clock()
            .now()
            .plus_seconds(limits.resumable_expiry.as_secs() as i64);
        protocol::set_expires(&mut response, expires_at);
    }
    Ok(response)
}

/// Ends an upload that is still receiving and deletes its bytes
/// (termination); its batch no longer waits for it.
#[utoipa::path(
    delete,
    path = "/uploads/{upload_id}",
    tag = "uploads",
    operation_id = "terminate_upload",
    params(
        ("upload_id" = String, Path, description = "The upload (its Location)"),
        ("Tus-Resumable" = super::protocol::TusResumable, Header, description = "The protocol version: 1.0.0"),
    ),
    responses(
        (status = 204, description = "Ended; its bytes are deleted"),
        (status = 401, description = "No key or session", body = ErrorEnvelope),
        (status = 404, description = "upload_not_found (another agency's upload too)", body = ErrorEnvelope),
        (status = 410, description = "upload.gone: already ended, or complete (its media item stays)", body = ErrorEnvelope),
        (status = 412, description = "upload.tus_version_unsupported", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub async fn terminate_upload(
    State(state): State<AppState>,
    caller: Credential,
    ApiPath(upload_id): ApiPath<String>,
    headers: HeaderMap,
) -> Response {
    let tenant = caller.tenant();
    let outcome = async {
        protocol::check_version(&headers)?;
        let upload = find(&state, &tenant, &upload_id).await?;
        if upload.state != UploadState::Receiving {
            return Err(gone(&upload));
        }
        if !end(&state, &tenant, &upload, UploadState::Terminated).await? {
            let current = find(&state, &tenant, &upload_id).await?;
            return Err(gone(&current));
        }
        Ok(protocol::answer(StatusCode::NO_CONTENT))
    }
    .await;
    outcome.unwrap_or_else(protocol::error)
}
