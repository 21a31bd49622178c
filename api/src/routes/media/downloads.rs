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
use storage::media::MediaItem;
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
}

fn signature_message(tenant: &Tenant, id: &MediaId, name: &str, expires: i64) -> String {
    format!(
        "download|{id}|{name}|{}|{}|{expires}",
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
    for item in items {
        let mut variants = Vec::with_capacity(item.variants.len());
        for variant in &item.variants {
            let presigned = match stores {
                Some(stores) => stores
                    .signed_url(
                        item.storage_strategy,
                        &variant.object_key,
                        Duration::from_secs(DOWNLOAD_URL_SECONDS.unsigned_abs()),
                    )
                    .await
                    .map_err(ApiError::internal)?,
                None => None,
            };
            let url = match presigned {
                Some(url) => url.to_string(),
                None => {
                    let signature = state
                        .store()
                        .derived_keys()
                        .url_signature(&signature_message(
                            tenant,
                            &item.id,
                            &variant.name,
                            expires,
                        ));
                    format!(
                        "{}/api/v1/media/{}/variants/{}?expires={expires}&signature={signature}",
                        state.urls().base_url,
                        item.id,
                        variant.name
                    )
                }
            };
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
        });
    }
    Ok(out)
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
    let not_found = ApiError::NotFound(Resource::Media);
    let id = MediaId::parse(&media_id).ok_or(ApiError::NotFound(Resource::Media))?;
    if query.expires < state.store().clock().now().as_unix_seconds() {
        return Err(not_found);
    }
    let (tenant, item) = match state.store().media().item_by_id(&id).await {
        Ok(found) => found,
        Err(storage::StorageError::NotFound(_)) => return Err(not_found),
        Err(err) => return Err(err.into()),
    };
    if !state.store().derived_keys().verify_url_signature(
        &signature_message(&tenant, &id, &name, query.expires),
        &query.signature,
    ) {
        return Err(not_found);
    }
    let variant = item
        .variants
        .iter()
        .find(|variant| variant.name == name)
        .ok_or(ApiError::NotFound(Resource::Media))?;
    let stores = state
        .platform()
        .media
        .as_ref()
        .ok_or_else(|| ApiError::internal("no object store is configured"))?;
    let object = stores
        .primary(item.storage_strategy)
        .get(&ObjectPath::from(variant.object_key.as_str()))
        .await
        .map_err(ApiError::internal)?;
    let content_type = if variant.format == "webp" {
        "image/webp"
    } else {
        "image/jpeg"
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
