//! An upload or archive operation as stored and as its progress stream shows
//! it, what an upload asked for, and an item still waiting for its job.

use serde::{Deserialize, Serialize};

use crate::ids::{ListingId, MediaId, OperationId};
use crate::objects::StorageKey;
use crate::{Tenant, Timestamp};

use super::StorageStrategy;

/// What an upload request asked for, beside its files.
#[derive(Clone, Debug)]
pub struct UploadOptions {
    /// The listing the files belong to.
    pub listing_id: Option<ListingId>,
    /// Where the objects are kept.
    pub storage_strategy: StorageStrategy,
    /// Whether variants are made.
    pub enable_optimization: bool,
    /// A related entity's type, as given.
    pub related_entity_type: Option<String>,
    /// A related entity's id, as given.
    pub related_entity_id: Option<String>,
}

/// An upload or archive operation.
#[derive(Clone, Debug)]
pub struct MediaOperation {
    /// Its id.
    pub id: OperationId,
    /// `upload` or `archive`.
    pub kind: String,
    /// `processing`, `completed` or `failed`.
    pub status: String,
    /// For an archive: its name.
    pub archive_name: Option<String>,
    /// For a finished archive: its object.
    pub archive_key: Option<StorageKey>,
    /// For a finished archive: its size.
    pub archive_size_bytes: Option<i64>,
    /// When it started.
    pub created_at: Timestamp,
}

/// An operation's columns.
pub(super) type OperationRow = (
    OperationId,
    String,
    String,
    Option<String>,
    Option<StorageKey>,
    Option<i64>,
    Timestamp,
);

/// An item waiting for its processing job.
#[derive(Clone, Debug)]
pub struct QueuedItem {
    /// The item.
    pub media_id: MediaId,
    /// Its upload.
    pub operation_id: OperationId,
    /// Whose it is.
    pub tenant: Tenant,
}

/// An operation as its progress stream shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperationSnapshot {
    /// The operation.
    pub operation_id: OperationId,
    /// `upload` or `archive`.
    pub kind: String,
    /// `processing`, `completed` or `failed`.
    pub status: String,
    /// Each file of an upload, in upload order (none for an archive).
    pub files: Vec<FileSnapshot>,
}

/// One file of an operation's snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileSnapshot {
    /// The item.
    pub media_id: MediaId,
    /// The client's file name.
    pub filename: String,
    /// `queued`, `processing`, `ready` or `failed`.
    pub status: String,
    /// Why it failed.
    pub failure_reason: Option<String>,
    /// The variants made so far, by name.
    pub variants: Vec<String>,
}
