//! Resumable uploads (tus 1.0): a batch (the operation whose progress a
//! shoot's client follows), the uploads in it, the parts each one received,
//! and the hand-over of a finished upload to the media pipeline as a queued
//! item of its batch. Every query is scoped by the tenant, except the expiry
//! sweep's, which reads across tenants and returns each row's tenant.
//!
//! The offset moves only by [`Media::commit_upload_part`], conditional on
//! the offset the part started at: of two requests racing for the same
//! bytes, one commits and the other is told it lost.

use super::uploads::insert_item;
use super::{Media, MediaItem, NewMediaItem, StorageStrategy, UploadOptions};
use crate::db::{in_transaction, on_pool};
use crate::ids::{AgencyId, ListingId, MediaId, OperationId, UploadId};
use crate::objects::StorageKey;
use crate::{Entity, Environment, Result, StorageError, Tenant, Timestamp};

/// Where a resumable upload stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UploadState {
    /// Taking bytes.
    Receiving,
    /// Every byte arrived; it is a media item now.
    Completed,
    /// Its client deleted it.
    Terminated,
    /// Abandoned: no bytes arrived before it expired.
    Expired,
}

impl UploadState {
    /// The column name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Receiving => "receiving",
            Self::Completed => "completed",
            Self::Terminated => "terminated",
            Self::Expired => "expired",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [
            Self::Receiving,
            Self::Completed,
            Self::Terminated,
            Self::Expired,
        ]
        .into_iter()
        .find(|state| state.as_str() == text)
    }
}

/// A direct upload's multipart upload in the object store: the client
/// sends its parts there by pre-signed URLs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectPlan {
    /// The store's multipart upload id.
    pub store_upload_id: String,
    /// The size of every part but the last.
    pub part_size: i64,
    /// The sha256 (hex) the client declared for the whole file.
    pub declared_sha256: String,
}

impl DirectPlan {
    /// How many parts a file of `length` bytes is sent in (at least one).
    pub fn part_count(&self, length: i64) -> i64 {
        if length <= 0 || self.part_size <= 0 {
            1
        } else {
            (length + self.part_size - 1) / self.part_size
        }
    }
}

/// An upload to create.
#[derive(Clone, Debug)]
pub struct NewUpload {
    /// Its id.
    pub id: UploadId,
    /// The media item it becomes.
    pub media_id: MediaId,
    /// Its total length in bytes.
    pub length: i64,
    /// The client's file name.
    pub filename: String,
    /// The type the client named (the format is judged by content).
    pub filetype: Option<String>,
    /// Listing, storage strategy, optimisation, related entity.
    pub options: UploadOptions,
    /// `Upload-Metadata` as sent.
    pub metadata: String,
    /// When it is abandoned unless bytes arrive.
    pub expires_at: Timestamp,
    /// For a direct upload, its multipart upload in the store; `None` for tus.
    pub direct: Option<DirectPlan>,
}

/// Which batch an upload joins.
#[derive(Clone, Debug)]
pub enum BatchChoice {
    /// One the client created for its shoot.
    Join(OperationId),
    /// A batch of its own (one file).
    Own,
}

/// A resumable upload.
#[derive(Clone, Debug)]
pub struct Upload {
    /// Its id.
    pub id: UploadId,
    /// The batch (operation) it belongs to.
    pub operation_id: OperationId,
    /// The media item it becomes.
    pub media_id: MediaId,
    /// The listing its item belongs to.
    pub listing_id: Option<ListingId>,
    /// Total length in bytes.
    pub length: i64,
    /// Bytes received and committed.
    pub offset: i64,
    /// The client's file name.
    pub filename: String,
    /// The type the client named.
    pub filetype: Option<String>,
    /// Where its item's objects go.
    pub storage_strategy: StorageStrategy,
    /// Whether variants are made.
    pub enable_optimization: bool,
    /// A related entity's type, as given.
    pub related_entity_type: Option<String>,
    /// A related entity's id, as given.
    pub related_entity_id: Option<String>,
    /// `Upload-Metadata` as sent.
    pub metadata: String,
    /// Where it stands.
    pub state: UploadState,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it is abandoned (receiving) or forgotten (ended).
    pub expires_at: Timestamp,
    /// For a direct upload, its multipart upload in the store; `None` for a
    /// tus upload, whose bytes come through the API.
    pub direct: Option<DirectPlan>,
    /// A tus upload's running sha256 over its first `offset` bytes (the
    /// hash's serialized state), when every part so far carried it on.
    pub sha256_state: Option<Vec<u8>>,
}

/// The bytes one request added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadPart {
    /// The offset its first byte has in the upload.
    pub start: i64,
    /// Its length.
    pub length: i64,
    /// Its object: the upload's one file on this host's disk
    /// ([`StorageKey::upload_file`]), or an object of its own.
    pub object_key: StorageKey,
}

impl UploadPart {
    /// Where its bytes lie in its object: at their offset in the upload's
    /// one file (`file`), from the start of an object of their own.
    pub fn range_in_object(&self, file: &StorageKey) -> std::ops::Range<u64> {
        let length = u64::try_from(self.length).unwrap_or_default();
        let start = if &self.object_key == file {
            u64::try_from(self.start).unwrap_or_default()
        } else {
            0
        };
        start..start + length
    }
}

/// A batch as an upload joining it finds it.
#[derive(Clone, Debug)]
pub struct Batch {
    /// Its operation.
    pub id: OperationId,
    /// The listing its items belong to.
    pub listing_id: Option<ListingId>,
    /// How many files it announced.
    pub expected_items: i64,
    /// How many uploads were created in it so far.
    pub created: i64,
    /// Whether it still takes uploads (its operation is processing).
    pub open: bool,
}

/// Why an upload could not join its batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinRefusal {
    /// The batch has every upload it announced.
    Full {
        /// How many it announced.
        expected: i64,
    },
    /// The batch ended (every upload it announced has ended).
    Ended,
    /// The upload names another listing than its batch.
    OtherListing,
}

/// What creating an upload came to.
#[derive(Clone, Debug)]
pub enum Created {
    /// Created.
    Upload(Box<Upload>),
    /// Refused by its batch.
    Refused(JoinRefusal),
}

/// An upload past its expiry, found by the sweep.
#[derive(Clone, Debug)]
pub struct ExpiredUpload {
    /// Whose.
    pub tenant: Tenant,
    /// Which.
    pub id: UploadId,
    /// Its batch.
    pub operation_id: OperationId,
    /// A direct upload's multipart upload in the store, unless it completed
    /// (then the store has made it the object and holds no parts).
    pub store_upload_id: Option<String>,
}

#[derive(sqlx::FromRow)]
struct UploadRow {
    id: UploadId,
    operation_id: OperationId,
    media_id: MediaId,
    listing_id: Option<ListingId>,
    upload_length: i64,
    upload_offset: i64,
    filename: String,
    filetype: Option<String>,
    storage_strategy: String,
    enable_optimization: bool,
    related_entity_type: Option<String>,
    related_entity_id: Option<String>,
    metadata: String,
    state: String,
    created_at: Timestamp,
    expires_at: Timestamp,
    store_upload_id: Option<String>,
    part_size: Option<i64>,
    declared_sha256: Option<String>,
    sha256_state: Option<Vec<u8>>,
}

const UPLOAD_COLUMNS: &str = "id, operation_id, media_id, listing_id, upload_length, upload_offset,
     filename, filetype, storage_strategy, enable_optimization, related_entity_type,
     related_entity_id, metadata, state, created_at, expires_at, store_upload_id, part_size,
     declared_sha256, sha256_state";

fn upload_of(row: UploadRow) -> Result<Upload> {
    let strategy = row.storage_strategy;
    let state = row.state;
    let direct = match (row.store_upload_id, row.part_size, row.declared_sha256) {
        (Some(store_upload_id), Some(part_size), Some(declared_sha256)) => Some(DirectPlan {
            store_upload_id,
            part_size,
            declared_sha256,
        }),
        _ => None,
    };
    Ok(Upload {
        storage_strategy: StorageStrategy::parse(&strategy)
            .ok_or_else(|| StorageError::Corrupt(format!("storage strategy {strategy}")))?,
        state: UploadState::parse(&state)
            .ok_or_else(|| StorageError::Corrupt(format!("upload state {state}")))?,
        id: row.id,
        operation_id: row.operation_id,
        media_id: row.media_id,
        listing_id: row.listing_id,
        length: row.upload_length,
        offset: row.upload_offset,
        filename: row.filename,
        filetype: row.filetype,
        enable_optimization: row.enable_optimization,
        related_entity_type: row.related_entity_type,
        related_entity_id: row.related_entity_id,
        metadata: row.metadata,
        created_at: row.created_at,
        expires_at: row.expires_at,
        direct,
        sha256_state: row.sha256_state,
    })
}

/// The uploads still taking bytes (`uploads_by_expiry` serves their sweep).
pub(crate) const UPLOADS_RECEIVING: &str = "state = 'receiving'";

/// The uploads that ended (`uploads_ended_by_expiry`, a partial index of
/// exactly this condition, serves their sweep).
pub(crate) const UPLOADS_ENDED: &str = "state <> 'receiving'";

/// The expiry sweep's read of uploads in `states` due by `$1`, oldest
/// first, at most `$2`, across tenants.
pub(crate) fn uploads_due_sql(states: &str) -> String {
    format!(
        "select agency_id, is_sandbox, id, operation_id,
                case when state <> 'completed' then store_upload_id end
         from uploads
         where {states} and expires_at <= $1 order by expires_at limit $2"
    )
}

impl Media<'_> {
    /// Opens a batch for `file_count` resumable uploads (of a listing, or of
    /// none): the operation whose progress stream follows them all.
    pub async fn create_batch(
        &self,
        tenant: &Tenant,
        listing_id: Option<&ListingId>,
        file_count: i64,
    ) -> Result<OperationId> {
        let id = OperationId::generate();
        let now = self.store.clock().now();
        in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "insert into media_operations (id, agency_id, is_sandbox, kind, listing_id, status,
                     created_at, expected_items)
                 values ($1, $2, $3, 'upload', $4, 'processing', $5, $6)",
            )
            .bind(&id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(listing_id)
            .bind(now)
            .bind(file_count)
            .execute(&mut *tx)
            .await?;
        });
        Ok(id)
    }

    /// One of the tenant's batches.
    pub async fn batch(&self, tenant: &Tenant, id: &OperationId) -> Result<Batch> {
        let row: Option<(Option<ListingId>, Option<i64>, String, i64)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select o.listing_id, o.expected_items, o.status,
                        (select count(*) from uploads u where u.operation_id = o.id)
                 from media_operations o
                 where o.agency_id = $1 and o.is_sandbox = $2 and o.id = $3 and o.kind = 'upload'",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .fetch_optional(pool)
            .await?
        });
        match row {
            Some((listing_id, Some(expected_items), status, created)) => Ok(Batch {
                id: id.clone(),
                listing_id,
                expected_items,
                created,
                open: status == "processing",
            }),
            // An upload of one request is no batch to join.
            _ => Err(StorageError::NotFound(Entity::Operation)),
        }
    }

    /// Creates an upload in its batch: a batch of its own, or the client's
    /// (checked again in the transaction, so a full batch stays full
    /// however many creations race).
    pub async fn create_resumable(
        &self,
        tenant: &Tenant,
        batch: &BatchChoice,
        upload: &NewUpload,
    ) -> Result<Created> {
        let now = self.store.clock().now();
        let refused =
            in_transaction!(self.store.db(), |tx| {
                let operation_id = match batch {
                    BatchChoice::Own => {
                        let id = OperationId::generate();
                        sqlx::query(
                        "insert into media_operations (id, agency_id, is_sandbox, kind, listing_id,
                             status, created_at, expected_items)
                         values ($1, $2, $3, 'upload', $4, 'processing', $5, 1)",
                    )
                    .bind(&id)
                    .bind(&tenant.agency_id)
                    .bind(tenant.environment.is_sandbox())
                    .bind(&upload.options.listing_id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                        Ok(id)
                    }
                    BatchChoice::Join(id) => {
                        // Taking the batch's row first serialises racing joins.
                        let row: Option<(Option<ListingId>, Option<i64>, String)> = sqlx::query_as(
                            "update media_operations set status = status
                         where agency_id = $1 and is_sandbox = $2 and id = $3 and kind = 'upload'
                         returning listing_id, expected_items, status",
                        )
                        .bind(&tenant.agency_id)
                        .bind(tenant.environment.is_sandbox())
                        .bind(id)
                        .fetch_optional(&mut *tx)
                        .await?;
                        let Some((listing_id, Some(expected), status)) = row else {
                            return Err(StorageError::NotFound(Entity::Operation));
                        };
                        let created: i64 = sqlx::query_scalar(
                            "select count(*) from uploads where operation_id = $1",
                        )
                        .bind(id)
                        .fetch_one(&mut *tx)
                        .await?;
                        if status != "processing" {
                            Err(JoinRefusal::Ended)
                        } else if created >= expected {
                            Err(JoinRefusal::Full { expected })
                        } else if upload.options.listing_id.is_some()
                            && upload.options.listing_id != listing_id
                        {
                            Err(JoinRefusal::OtherListing)
                        } else {
                            Ok(id.clone())
                        }
                    }
                };
                match operation_id {
                    Err(refusal) => Some(refusal),
                    Ok(operation_id) => {
                        sqlx::query(
                        "insert into uploads (id, agency_id, is_sandbox, operation_id, media_id,
                             listing_id, upload_length, upload_offset, filename, filetype,
                             storage_strategy, enable_optimization, related_entity_type,
                             related_entity_id, metadata, state, created_at, expires_at,
                             transport, store_upload_id, part_size, declared_sha256)
                         values ($1, $2, $3, $4, $5,
                             coalesce($6, (select listing_id from media_operations where id = $4)),
                             $7, 0, $8, $9, $10, $11, $12, $13, $14, 'receiving', $15, $16,
                             $17, $18, $19, $20)",
                    )
                    .bind(&upload.id)
                    .bind(&tenant.agency_id)
                    .bind(tenant.environment.is_sandbox())
                    .bind(&operation_id)
                    .bind(&upload.media_id)
                    .bind(&upload.options.listing_id)
                    .bind(upload.length)
                    .bind(&upload.filename)
                    .bind(&upload.filetype)
                    .bind(upload.options.storage_strategy.as_str())
                    .bind(upload.options.enable_optimization)
                    .bind(&upload.options.related_entity_type)
                    .bind(&upload.options.related_entity_id)
                    .bind(&upload.metadata)
                    .bind(now)
                    .bind(upload.expires_at)
                    .bind(if upload.direct.is_some() { "direct" } else { "tus" })
                    .bind(upload.direct.as_ref().map(|plan| &plan.store_upload_id))
                    .bind(upload.direct.as_ref().map(|plan| plan.part_size))
                    .bind(upload.direct.as_ref().map(|plan| &plan.declared_sha256))
                    .execute(&mut *tx)
                    .await?;
                        None
                    }
                }
            });
        match refused {
            Some(refusal) => Ok(Created::Refused(refusal)),
            None => Ok(Created::Upload(Box::new(
                self.resumable(tenant, &upload.id).await?,
            ))),
        }
    }

    /// One of the tenant's uploads, in any state.
    pub async fn resumable(&self, tenant: &Tenant, id: &UploadId) -> Result<Upload> {
        let sql = format!(
            "select {UPLOAD_COLUMNS} from uploads where agency_id = $1 and is_sandbox = $2 and id = $3"
        );
        let row: Option<UploadRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        upload_of(row.ok_or(StorageError::NotFound(Entity::Upload))?)
    }

    /// Commits a stored part: the offset moves from `part.start` to its end
    /// and the expiry to `expires_at`, if the upload is still receiving at
    /// `part.start`. `false` when it is not (another request's part landed
    /// first, or the upload ended): the part's object, when it is one of
    /// its own, is then the caller's to remove.
    /// `sha256_state` is the running hash over the upload's bytes up to the
    /// part's end (`None` when it was not carried on).
    pub async fn commit_upload_part(
        &self,
        tenant: &Tenant,
        id: &UploadId,
        part: &UploadPart,
        sha256_state: Option<&[u8]>,
        expires_at: Timestamp,
    ) -> Result<bool> {
        let committed = in_transaction!(self.store.db(), |tx| {
            let moved = sqlx::query(
                "update uploads set upload_offset = $4 + $5, expires_at = $6, sha256_state = $7
                 where agency_id = $1 and is_sandbox = $2 and id = $3 and state = 'receiving'
                   and upload_offset = $4 and upload_offset + $5 <= upload_length",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .bind(part.start)
            .bind(part.length)
            .bind(expires_at)
            .bind(sha256_state)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if moved == 1 {
                sqlx::query(
                    "insert into upload_parts (upload_id, start_offset, length, object_key)
                     values ($1, $2, $3, $4)",
                )
                .bind(id)
                .bind(part.start)
                .bind(part.length)
                .bind(&part.object_key)
                .execute(&mut *tx)
                .await?;
            }
            moved == 1
        });
        Ok(committed)
    }

    /// The committed parts of one of the tenant's uploads, in order.
    pub async fn upload_parts(&self, tenant: &Tenant, id: &UploadId) -> Result<Vec<UploadPart>> {
        let rows: Vec<(i64, i64, StorageKey)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select p.start_offset, p.length, p.object_key
                 from upload_parts p join uploads u on u.id = p.upload_id
                 where u.agency_id = $1 and u.is_sandbox = $2 and p.upload_id = $3
                 order by p.start_offset",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(start, length, object_key)| UploadPart {
                start,
                length,
                object_key,
            })
            .collect())
    }

    /// Hands a fully received upload to the media pipeline: its item, queued,
    /// in its batch, and the upload completed (kept until `forget_at`), in
    /// one transaction. `None` when the upload was not receiving all its
    /// bytes any more (another request completed it, or it ended).
    pub async fn complete_resumable(
        &self,
        tenant: &Tenant,
        upload: &Upload,
        item: &NewMediaItem,
        forget_at: Timestamp,
    ) -> Result<Option<MediaItem>> {
        let now = self.store.clock().now();
        let completed = in_transaction!(self.store.db(), |tx| {
            let changed = sqlx::query(
                "update uploads set state = 'completed', ended_at = $4, expires_at = $5,
                     upload_offset = upload_length
                 where agency_id = $1 and is_sandbox = $2 and id = $3 and state = 'receiving'
                   and (upload_offset = upload_length or transport = 'direct')",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(&upload.id)
            .bind(now)
            .bind(forget_at)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 1 {
                sqlx::query("delete from upload_parts where upload_id = $1")
                    .bind(&upload.id)
                    .execute(&mut *tx)
                    .await?;
                let options = UploadOptions {
                    listing_id: upload.listing_id.clone(),
                    storage_strategy: upload.storage_strategy,
                    enable_optimization: upload.enable_optimization,
                    related_entity_type: upload.related_entity_type.clone(),
                    related_entity_id: upload.related_entity_id.clone(),
                };
                insert_item(
                    &mut *tx,
                    tenant,
                    &upload.operation_id,
                    None,
                    item,
                    &options,
                    now,
                )
                .await?;
            }
            changed == 1
        });
        if !completed {
            return Ok(None);
        }
        self.changed(tenant);
        Ok(Some(self.item(tenant, &item.id).await?))
    }

    /// Ends a receiving upload without an item (its client deleted it, or it
    /// expired: then only if its expiry passed, so bytes that just arrived
    /// keep it), kept until `forget_at` so its URL says so. `false` when it
    /// was not receiving (or not expired).
    pub async fn end_resumable(
        &self,
        tenant: &Tenant,
        id: &UploadId,
        state: UploadState,
        forget_at: Timestamp,
    ) -> Result<bool> {
        let now = self.store.clock().now();
        let ended = in_transaction!(self.store.db(), |tx| {
            let changed = sqlx::query(
                "update uploads set state = $4, ended_at = $5, expires_at = $6
                 where agency_id = $1 and is_sandbox = $2 and id = $3 and state = 'receiving'
                   and ($4 <> 'expired' or expires_at <= $5)",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .bind(state.as_str())
            .bind(now)
            .bind(forget_at)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 1 {
                sqlx::query("delete from upload_parts where upload_id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            changed == 1
        });
        Ok(ended)
    }

    /// Receiving uploads whose expiry passed, oldest first, across tenants.
    pub async fn expired_uploads(&self, now: Timestamp, limit: u32) -> Result<Vec<ExpiredUpload>> {
        self.uploads_due(UPLOADS_RECEIVING, now, limit).await
    }

    /// Ended uploads whose keeping ended by `now`, oldest first, across tenants.
    pub async fn forgettable_uploads(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<ExpiredUpload>> {
        self.uploads_due(UPLOADS_ENDED, now, limit).await
    }

    /// Uploads in `states` whose `expires_at` passed by `now`, oldest first.
    async fn uploads_due(
        &self,
        states: &'static str,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<ExpiredUpload>> {
        let sql = uploads_due_sql(states);
        let rows: Vec<(AgencyId, bool, UploadId, OperationId, Option<String>)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        });
        Ok(rows
            .into_iter()
            .map(
                |(agency, is_sandbox, id, operation_id, store_upload_id)| ExpiredUpload {
                    tenant: Tenant::new(agency, Environment::from_sandbox_flag(is_sandbox)),
                    id,
                    operation_id,
                    store_upload_id,
                },
            )
            .collect())
    }

    /// Forgets ended uploads (their bytes already deleted).
    pub async fn forget_uploads(&self, ids: &[UploadId]) -> Result<u64> {
        let forgotten = in_transaction!(self.store.db(), |tx| {
            let mut forgotten = 0;
            for id in ids {
                sqlx::query("delete from upload_parts where upload_id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                forgotten +=
                    sqlx::query("delete from uploads where id = $1 and state <> 'receiving'")
                        .bind(id)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
            }
            forgotten
        });
        Ok(forgotten)
    }
}
