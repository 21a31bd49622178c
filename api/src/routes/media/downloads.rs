//! Downloads of stored variants through signed URLs: pre-signed S3 URLs when
//! the object lives in S3, otherwise this API's own
//! `/api/v1/media/{media_id}/variants/{name}?expires=…&signature=…`, which
//! streams the local file. A signature names the item, the variant, the
//! item's tenant and the expiry, so it opens that one file until then.

use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use serde::{Deserialize, Serialize};
use storage::Tenant;
use storage::ids::MediaId;
use storage::media::{MediaItem, OutputStatus, StorageKey};
use utoipa::ToSchema;

use crate::error::{ApiError, Resource};
use crate::extract::{ApiPath, ApiQuery};
use crate::state::AppState;

/// How long a download URL works.
pub const DOWNLOAD_URL_SECONDS: i64 = 3600;

/// One variant of a media item as a listing read shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct VariantOut {
    /// thumbnail, web, mls, print, webp_web or webp_thumb.
    pub name: String,
    /// jpeg or webp.
    pub format: String,
    /// Pixels.
    pub width: i32,
    /// Pixels.
    pub height: i32,
    /// Bytes.
    pub size_bytes: i64,
    /// A signed download URL.
    pub url: String,
    /// When `url` stops working, RFC 3339.
    pub url_expires_at: String,
}

/// A media item as a listing read shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MediaOut {
    /// Its id.
    pub media_id: String,
    /// The client's file name.
    pub filename: String,
    /// jpeg, png, webp, gif, mp4 or pdf (from the content).
    pub detected_type: String,
    /// Bytes of the original.
    pub size_bytes: i64,
    /// queued, processing, ready or failed.
    pub status: String,
    /// Why processing failed.
    pub failure_reason: Option<String>,
    /// A video's length.
    pub duration_seconds: Option<f64>,
    /// cloud, local or hybrid.
    pub storage_strategy: String,
    /// The related entity's type, as the upload gave it.
    pub related_entity_type: Option<String>,
    /// The related entity's id, as the upload gave it.
    pub related_entity_id: Option<String>,
    /// The delivery variants, once ready.
    pub variants: Vec<VariantOut>,
    /// Where cropped outputs centre; `null` until a worker has looked at
    /// the photo (and for video and PDF).
    pub focal_point: Option<FocalPointOut>,
    /// The outputs of the agency's delivery profiles, by profile and name.
    pub outputs: Vec<OutputOut>,
}

/// Where a photo's subject is.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FocalPointOut {
    /// 0 (left edge) to 1 (right edge) of the upright photo.
    pub x: f64,
    /// 0 (top edge) to 1 (bottom edge) of the upright photo.
    pub y: f64,
    /// `auto` (the worker's saliency measure) or `manual`.
    pub source: String,
}

/// One output of a delivery profile for a media item.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OutputOut {
    /// The profile (`dpf_…`).
    pub profile_id: String,
    /// The output's name in its profile.
    pub name: String,
    /// `pending` (being rendered, or again after a change), `ready` or
    /// `failed`.
    pub status: String,
    /// A signed download URL once ready; `null` before.
    pub url: Option<String>,
    /// When `url` stops working, RFC 3339.
    pub url_expires_at: Option<String>,
    /// Pixels, once ready.
    pub width: Option<i32>,
    /// Pixels, once ready.
    pub height: Option<i32>,
    /// Bytes, once ready.
    pub bytes: Option<i64>,
    /// `jpeg`, `webp` or `avif`.
    pub format: String,
    /// Why it failed.
    pub failure_reason: Option<String>,
}

/// What a download URL signs: the item, the file (a variant's name, `web`;
/// an output's path, `outputs/dpf_…/mls_full`: no variant name has a
/// slash), its tenant and the expiry.
fn signature_message(tenant: &Tenant, id: &MediaId, file: &str, expires: i64) -> String {
    format!(
        "download|{id}|{file}|{}|{}|{expires}",
        tenant.agency_id,
        tenant.environment.as_str()
    )
}

/// The media of a listing with signed variant URLs.
pub async fn media_out(
    state: &AppState,
    tenant: &Tenant,
    items: &[MediaItem],
) -> Result<Vec<MediaOut>, ApiError> {
    let now = state.store().clock().now();
    let expires = now.as_unix_seconds() + DOWNLOAD_URL_SECONDS;
    let expires_at = now.plus_seconds(DOWNLOAD_URL_SECONDS).to_rfc3339();
    let stores = state.platform().media.as_ref();
    let mut out = Vec::with_capacity(items.len());
    let signed = |key: &StorageKey, item: &MediaItem, file: String| {
        let key = key.clone();
        let strategy = item.storage_strategy;
        let id = item.id.clone();
        async move {
            let presigned = match stores {
                Some(stores) => stores
                    .signed_url(
                        strategy,
                        &key,
                        Duration::from_secs(DOWNLOAD_URL_SECONDS.unsigned_abs()),
                    )
                    .await
                    .map_err(ApiError::internal)?,
                None => None,
            };
            Ok::<_, ApiError>(match presigned {
                Some(url) => url.to_string(),
                None => {
                    let signature = state
                        .store()
                        .derived_keys()
                        .url_signature(&signature_message(tenant, &id, &file, expires));
                    let path = if file.starts_with("outputs/") {
                        file
                    } else {
                        format!("variants/{file}")
                    };
                    format!(
                        "{}/api/v1/media/{id}/{path}?expires={expires}&signature={signature}",
                        state.urls().base_url,
                    )
                }
            })
        }
    };
    for item in items {
        let mut variants = Vec::with_capacity(item.variants.len());
        for variant in &item.variants {
            let url = signed(&variant.object_key, item, variant.name.clone()).await?;
            variants.push(VariantOut {
                name: variant.name.clone(),
                format: variant.format.clone(),
                width: variant.width,
                height: variant.height,
                size_bytes: variant.size_bytes,
                url,
                url_expires_at: expires_at.clone(),
            });
        }
        out.push(MediaOut {
            media_id: item.id.to_string(),
            filename: item.filename.clone(),
            detected_type: item.media_type.as_str().to_owned(),
            size_bytes: item.size_bytes,
            status: item.status.as_str().to_owned(),
            failure_reason: item.failure_reason.clone(),
            duration_seconds: item.duration_seconds,
            storage_strategy: item.storage_strategy.as_str().to_owned(),
            related_entity_type: item.related_entity_type.clone(),
            related_entity_id: item.related_entity_id.clone(),
            variants,
            focal_point: item.focal_point.map(|point| FocalPointOut {
                x: point.x,
                y: point.y,
                source: point.source.as_str().to_owned(),
            }),
            outputs: outputs_out(item, &expires_at, &signed).await?,
        });
    }
    Ok(out)
}

/// An item's outputs, the ready ones with a signed URL.
async fn outputs_out<F, Fut>(
    item: &MediaItem,
    expires_at: &str,
    signed: &F,
) -> Result<Vec<OutputOut>, ApiError>
where
    F: Fn(&StorageKey, &MediaItem, String) -> Fut,
    Fut: std::future::Future<Output = Result<String, ApiError>>,
{
    let mut outputs = Vec::with_capacity(item.outputs.len());
    for output in &item.outputs {
        let url = match (&output.object_key, output.status) {
            (Some(key), OutputStatus::Ready) => Some(
                signed(
                    key,
                    item,
                    format!("outputs/{}/{}", output.profile_id, output.name),
                )
                .await?,
            ),
            _ => None,
        };
        outputs.push(OutputOut {
            profile_id: output.profile_id.to_string(),
            name: output.name.clone(),
            status: output.status.as_str().to_owned(),
            url_expires_at: url.as_ref().map(|_| expires_at.to_owned()),
            url,
            width: output.width,
            height: output.height,
            bytes: output.size_bytes,
            format: output.format.clone(),
            failure_reason: output.failure_reason.clone(),
        });
    }
    Ok(outputs)
}

/// Query of a signed download.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DownloadQuery {
    expires: i64,
    signature: String,
}

/// Streams one variant to a holder of its signed URL. Anything wrong (bad or
/// expired signature, unknown item or variant) is the same 404.
pub(crate) async fn download(
    State(state): State<AppState>,
    ApiPath((media_id, name)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<DownloadQuery>,
) -> Result<Response, ApiError> {
    let (item, _) = signed_item(&state, &media_id, &name, &query).await?;
    let variant = item
        .variants
        .iter()
        .find(|variant| variant.name == name)
        .ok_or(ApiError::NotFound(Resource::Media))?;
    stream(&state, &item, &variant.object_key, &variant.format).await
}

/// Streams one output of a delivery profile to a holder of its signed URL,
/// as [`download`] a variant.
pub(crate) async fn download_output(
    State(state): State<AppState>,
    ApiPath((media_id, profile_id, name)): ApiPath<(String, String, String)>,
    ApiQuery(query): ApiQuery<DownloadQuery>,
) -> Result<Response, ApiError> {
    let file = format!("outputs/{profile_id}/{name}");
    let (item, _) = signed_item(&state, &media_id, &file, &query).await?;
    let (key, format) = item
        .outputs
        .iter()
        .find(|output| {
            output.profile_id.as_str() == profile_id
                && output.name == name
                && output.status == OutputStatus::Ready
        })
        .and_then(|output| Some((output.object_key.clone()?, output.format.clone())))
        .ok_or(ApiError::NotFound(Resource::Media))?;
    stream(&state, &item, &key, &format).await
}

/// The item a signed URL for `file` names, once its signature and expiry
/// hold; every refusal is the same 404.
async fn signed_item(
    state: &AppState,
    media_id: &str,
    file: &str,
    query: &DownloadQuery,
) -> Result<(MediaItem, Tenant), ApiError> {
    let not_found = || ApiError::NotFound(Resource::Media);
    let id = MediaId::parse(media_id).ok_or_else(not_found)?;
    if query.expires < state.store().clock().now().as_unix_seconds() {
        return Err(not_found());
    }
    let (tenant, item) = match state.store().media().item_by_id(&id).await {
        Ok(found) => found,
        Err(storage::StorageError::NotFound(_)) => return Err(not_found()),
        Err(err) => return Err(err.into()),
    };
    if !state.store().derived_keys().verify_url_signature(
        &signature_message(&tenant, &id, file, query.expires),
        &query.signature,
    ) {
        return Err(not_found());
    }
    Ok((item, tenant))
}

/// Streams the object `key` of `item`, typed by its `format`.
async fn stream(
    state: &AppState,
    item: &MediaItem,
    key: &StorageKey,
    format: &str,
) -> Result<Response, ApiError> {
    let stores = state
        .platform()
        .media
        .as_ref()
        .ok_or_else(|| ApiError::internal("no object store is configured"))?;
    let object = stores
        .primary(item.storage_strategy)
        .get(&ObjectPath::from(key.as_str()))
        .await
        .map_err(ApiError::internal)?;
    let content_type = match format {
        "webp" => "image/webp",
        "avif" => "image/avif",
        _ => "image/jpeg",
    };
    let mut response = Body::from_stream(object.into_stream()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=3600"),
    );
    Ok(response)
}
