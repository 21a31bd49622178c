//! A media item as stored: where its objects are kept, how processing went,
//! its record and columns, and its variants.

use crate::ids::{ListingId, MediaId, OperationId};
use crate::objects::StorageKey;
use crate::{Environment, Result, StorageError};

use super::MediaType;

/// Where an upload's objects are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageStrategy {
    /// The configured object store (the default).
    Cloud,
    /// Files in the data directory (development and testing).
    Local,
    /// Both.
    Hybrid,
}

impl StorageStrategy {
    /// The wire and column name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Cloud => "cloud",
            Self::Local => "local",
            Self::Hybrid => "hybrid",
        }
    }

    /// Parses a wire value.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Cloud, Self::Local, Self::Hybrid]
            .into_iter()
            .find(|strategy| strategy.as_str() == text)
    }

    /// Whether objects go to the configured object store.
    pub const fn uses_cloud(self) -> bool {
        matches!(self, Self::Cloud | Self::Hybrid)
    }

    /// Whether objects go to the data directory.
    pub const fn uses_local(self) -> bool {
        matches!(self, Self::Local | Self::Hybrid)
    }
}

/// A processing state of a media item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaStatus {
    /// Stored, waiting for a worker.
    Queued,
    /// A worker is making its variants.
    Processing,
    /// Every variant is stored.
    Ready,
    /// Processing failed; `failure_reason` says why.
    Failed,
}

impl MediaStatus {
    /// The column and wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Processing => "processing",
            Self::Ready => "ready",
            Self::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::Queued, Self::Processing, Self::Ready, Self::Failed]
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

/// A stored file, before its row exists.
#[derive(Clone, Debug)]
pub struct NewMediaItem {
    /// Its id (the object key was built from it).
    pub id: MediaId,
    /// The name the client gave.
    pub filename: String,
    /// Bytes stored.
    pub size_bytes: i64,
    /// The detected format.
    pub media_type: MediaType,
    /// Hex SHA-256 of the content.
    pub content_sha256: String,
    /// Where the original is.
    pub object_key: StorageKey,
}

/// A media item.
#[derive(Clone, Debug)]
pub struct MediaItem {
    /// Its id.
    pub id: MediaId,
    /// The upload that brought it.
    pub operation_id: OperationId,
    /// Live or sandbox.
    pub environment: Environment,
    /// The listing it belongs to.
    pub listing_id: Option<ListingId>,
    /// Its place in the upload.
    pub position: i32,
    /// The client's file name.
    pub filename: String,
    /// Bytes.
    pub size_bytes: i64,
    /// Detected format.
    pub media_type: MediaType,
    /// Hex SHA-256.
    pub content_sha256: String,
    /// The original's object key.
    pub object_key: StorageKey,
    /// Where it is kept.
    pub storage_strategy: StorageStrategy,
    /// Whether variants are made.
    pub enable_optimization: bool,
    /// Processing state.
    pub status: MediaStatus,
    /// Why processing failed.
    pub failure_reason: Option<String>,
    /// A video's length.
    pub duration_seconds: Option<f64>,
    /// The related entity's type, as the upload gave it.
    pub related_entity_type: Option<String>,
    /// The related entity's id, as the upload gave it.
    pub related_entity_id: Option<String>,
    /// Its variants, by name order of creation.
    pub variants: Vec<Variant>,
    /// Where cropped outputs centre; `None` until a worker looked at it.
    pub focal_point: Option<FocalPoint>,
    /// Its delivery profiles' outputs, by profile and name.
    pub outputs: Vec<MediaOutput>,
}

/// Who placed a focal point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FocalSource {
    /// The worker's saliency measure.
    Auto,
    /// A person, through `PATCH /media/{media_id}`.
    Manual,
}

impl FocalSource {
    /// The column and wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Manual => "manual",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::Auto, Self::Manual]
            .into_iter()
            .find(|source| source.as_str() == text)
    }
}

/// Where a photo's subject is: x and y from 0 to 1, from the top left of
/// the upright photo.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FocalPoint {
    /// 0 (left edge) to 1 (right edge).
    pub x: f64,
    /// 0 (top edge) to 1 (bottom edge).
    pub y: f64,
    /// Who placed it.
    pub source: FocalSource,
}

impl FocalPoint {
    /// Whether `value` is a coordinate (0 to 1, a number).
    pub fn is_coordinate(value: f64) -> bool {
        (0.0..=1.0).contains(&value)
    }
}

/// Where one output of a profile stands for a media item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputStatus {
    /// Waiting for a worker (new, or its profile or focal point changed).
    Pending,
    /// Stored.
    Ready,
    /// The worker could not make it; `failure_reason` says why.
    Failed,
}

impl OutputStatus {
    /// The column and wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Ready => "ready",
            Self::Failed => "failed",
        }
    }

    pub(super) fn parse(text: &str) -> Option<Self> {
        [Self::Pending, Self::Ready, Self::Failed]
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

/// One output of a delivery profile, rendered (or to be) for a media item.
#[derive(Clone, Debug, PartialEq)]
pub struct MediaOutput {
    /// The profile it belongs to.
    pub profile_id: crate::ids::DeliveryProfileId,
    /// The output's name in its profile.
    pub name: String,
    /// The profile's revision it was (or is being) made from.
    pub profile_revision: i64,
    /// Where it stands.
    pub status: OutputStatus,
    /// Its object key, once stored.
    pub object_key: Option<StorageKey>,
    /// `jpeg`, `webp` or `avif`.
    pub format: String,
    /// Pixels, once stored.
    pub width: Option<i32>,
    /// Pixels, once stored.
    pub height: Option<i32>,
    /// Bytes, once stored.
    pub size_bytes: Option<i64>,
    /// Why it failed.
    pub failure_reason: Option<String>,
}

/// One stored variant.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Variant {
    /// `thumbnail`, `web`, `mls`, `print`, `webp_web` or `webp_thumb`.
    pub name: String,
    /// Its object key.
    pub object_key: StorageKey,
    /// `jpeg` or `webp`.
    pub format: String,
    /// Pixels.
    pub width: i32,
    /// Pixels.
    pub height: i32,
    /// Bytes.
    pub size_bytes: i64,
}

#[derive(sqlx::FromRow)]
pub(super) struct ItemRow {
    id: MediaId,
    operation_id: OperationId,
    pub(super) is_sandbox: bool,
    listing_id: Option<ListingId>,
    position: i32,
    filename: String,
    size_bytes: i64,
    media_type: String,
    content_sha256: String,
    object_key: StorageKey,
    storage_strategy: String,
    enable_optimization: bool,
    status: String,
    failure_reason: Option<String>,
    duration_seconds: Option<f64>,
    related_entity_type: Option<String>,
    related_entity_id: Option<String>,
    focal_x: Option<f64>,
    focal_y: Option<f64>,
    focal_source: Option<String>,
}

pub(super) const ITEM_COLUMNS: &str = "id, operation_id, is_sandbox, listing_id, position, filename, size_bytes, \
     media_type, content_sha256, object_key, storage_strategy, enable_optimization, status, \
     failure_reason, duration_seconds, related_entity_type, related_entity_id, focal_x, focal_y, focal_source";

impl TryFrom<ItemRow> for MediaItem {
    type Error = StorageError;

    fn try_from(row: ItemRow) -> Result<Self> {
        let corrupt = |what: &str, value: &str| StorageError::Corrupt(format!("{what} {value}"));
        Ok(Self {
            media_type: MediaType::parse(&row.media_type)
                .ok_or_else(|| corrupt("media type", &row.media_type))?,
            storage_strategy: StorageStrategy::parse(&row.storage_strategy)
                .ok_or_else(|| corrupt("storage strategy", &row.storage_strategy))?,
            status: MediaStatus::parse(&row.status)
                .ok_or_else(|| corrupt("media status", &row.status))?,
            id: row.id,
            operation_id: row.operation_id,
            environment: Environment::from_sandbox_flag(row.is_sandbox),
            listing_id: row.listing_id,
            position: row.position,
            filename: row.filename,
            size_bytes: row.size_bytes,
            content_sha256: row.content_sha256,
            object_key: row.object_key,
            enable_optimization: row.enable_optimization,
            failure_reason: row.failure_reason,
            duration_seconds: row.duration_seconds,
            related_entity_type: row.related_entity_type,
            related_entity_id: row.related_entity_id,
            focal_point: match (row.focal_x, row.focal_y, row.focal_source.as_deref()) {
                (Some(x), Some(y), Some(source)) => Some(FocalPoint {
                    x,
                    y,
                    source: FocalSource::parse(source)
                        .ok_or_else(|| corrupt("focal point source", source))?,
                }),
                _ => None,
            },
            variants: Vec::new(),
            outputs: Vec::new(),
        })
    }
}
