//! Media: upload operations, their items (one per uploaded file) and each
//! item's delivery variants. The bytes live in the object store under the
//! keys [`StorageKey`] builds; these rows say where, what was detected, and
//! how processing went. Every query is scoped by the tenant, except the
//! worker's reads by id (a job carries ids it was given by a scoped request).
//!
//! One file per part: the records (`item`, `operation`, `format`), recording
//! and reading uploads (`uploads`), processing an item and completing its
//! upload (`processing`), progress numbers and snapshots (`snapshot`),
//! archives (`archives`), operations (`operations`), resumable uploads
//! with their batches (`resumable`) and the agency's delivery profiles
//! (`profiles`).

mod archives;
mod format;
mod item;
mod operation;
mod operations;
mod outputs;
mod processing;
mod profiles;
mod resumable;
mod snapshot;
mod sweeps;
mod uploads;

pub use format::MediaType;
pub use item::{
    FocalPoint, FocalSource, MediaItem, MediaOutput, MediaStatus, NewMediaItem, OutputStatus,
    StorageStrategy, Variant,
};
pub use operation::{FileSnapshot, MediaOperation, OperationSnapshot, QueuedItem, UploadOptions};
pub use outputs::{RecordedOutput, renders_outputs};
pub(crate) use profiles::WATERMARK_CANDIDATES_SQL;
pub use profiles::{DeliveryProfile, MAX_WATERMARK_CANDIDATES, WatermarkCandidate};
pub use resumable::{
    Batch, BatchChoice, Created, DirectPlan, ExpiredUpload, JoinRefusal, NewUpload, Upload,
    UploadPart, UploadState,
};
pub(crate) use sweeps::UNSWEPT_PROFILES_SQL;
pub use sweeps::UnsweptProfile;

pub use crate::objects::StorageKey;
pub(crate) use outputs::PHOTOS_AFTER_SQL;
pub(crate) use resumable::{UPLOADS_ENDED, UPLOADS_RECEIVING, uploads_due_sql};

/// The longest file name an upload may carry, in bytes of UTF-8: what common
/// file systems allow for one name, and what a listing read repeats for every
/// item.
pub const MAX_FILENAME_BYTES: usize = 255;
use crate::{Store, Tenant};

/// Media repository; see [`Store::media`].
pub struct Media<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Uploads, their media items and variants.
    pub fn media(&self) -> Media<'_> {
        Media { store: self }
    }
}

impl Media<'_> {
    /// A listing read shows media: forget the agency's cached reads after a
    /// change (other processes see it within the cache's one-second TTL).
    fn changed(&self, tenant: &Tenant) {
        self.store
            .listing_cache()
            .invalidate_agency(&tenant.agency_id);
    }
}
