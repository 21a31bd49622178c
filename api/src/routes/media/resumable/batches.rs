//! `POST /upload-batches`: a shoot's batch of resumable uploads, whose one
//! operation's progress stream follows every upload of it.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::ApiJson;
use crate::principal::Credential;
use crate::routes::media::progress::progress_url;
use crate::routes::webhooks::endpoint_rules::whole_number;
use crate::state::AppState;

/// Most files one batch announces.
pub(crate) const MAX_BATCH_FILES: i64 = 1000;

/// Body of a batch.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadBatchIn {
    /// How many files the shoot holds: the batch completes once that many
    /// uploads were created in it and every one has ended.
    #[schema(value_type = i64, minimum = 1, maximum = 1000)]
    pub file_count: serde_json::Number,
    /// The listing every file of the batch belongs to.
    pub listing_number: Option<String>,
}

/// A batch of resumable uploads.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UploadBatchOut {
    /// Name it as `batch_id` in each upload's `Upload-Metadata`.
    pub batch_id: String,
    /// `processing` (it follows its uploads to `completed` or `failed`).
    pub status: String,
    /// How many files it announced.
    pub file_count: i64,
    /// The listing its files belong to.
    pub listing_number: Option<String>,
    /// Where each upload is created (tus 1.0).
    pub upload_url: String,
    /// Server-sent events of the batch's operation (token valid for an hour).
    pub progress_url: String,
}

/// Opens a batch for a shoot's resumable uploads.
#[utoipa::path(
    post,
    path = "/upload-batches",
    tag = "uploads",
    operation_id = "create_upload_batch",
    request_body = UploadBatchIn,
    responses(
        (status = 201, description = "Opened; create each upload with its batch_id", body = UploadBatchOut),
        (status = 401, description = "No key or session", body = ErrorEnvelope),
        (status = 404, description = "listing_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: file_count", body = ErrorEnvelope),
        (status = 429, description = "Rate limited", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub async fn create_upload_batch(
    State(state): State<AppState>,
    caller: Credential,
    ApiJson(body): ApiJson<UploadBatchIn>,
) -> Result<(StatusCode, Json<UploadBatchOut>), ApiError> {
    let tenant = caller.tenant();
    let file_count = whole_number(&body.file_count)
        .filter(|count| (1..=MAX_BATCH_FILES).contains(count))
        .ok_or_else(|| {
            ApiError::field(
                "file_count",
                format!("must be a whole number from 1 to {MAX_BATCH_FILES}"),
            )
        })?;
    let listing = match body.listing_number.as_deref().map(str::trim) {
        Some(number) if !number.is_empty() => {
            Some(state.store().listings().get(&tenant, number).await?)
        }
        _ => None,
    };
    let batch_id = state
        .store()
        .media()
        .create_batch(
            &tenant,
            listing.as_ref().map(|listing| &listing.id),
            file_count,
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(UploadBatchOut {
            batch_id: batch_id.to_string(),
            status: "processing".to_owned(),
            file_count,
            listing_number: listing.map(|listing| listing.listing_number),
            upload_url: format!("{}/api/v1/uploads", state.urls().base_url),
            progress_url: progress_url(&state, &tenant, &batch_id),
        }),
    ))
}
