//! Media: upload operations, their items (one per uploaded file) and each
//! item's delivery variants. The bytes live in the object store; these rows
//! say where, what was detected, and how processing went. Every query is
//! scoped by the tenant, except the worker's reads by id (a job carries ids
//! it was given by a scoped request).

mod format;

use serde_json::{Value, json};

use crate::db::{in_transaction, on_pool};
use crate::events::{EventType, NewEvent};
use crate::ids::{ListingId, MediaId, OperationId};
use crate::outbox::insert_event;
use crate::{Entity, Environment, Result, StorageError, Store, Tenant, Timestamp};

pub use format::MediaType;

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

/// The object key of an item's original: `<agency>/<environment>/<media id>/original.<ext>`.
pub fn original_key(tenant: &Tenant, id: &MediaId, media_type: MediaType) -> String {
    format!(
        "{}/{}/{id}/original.{}",
        tenant.agency_id,
        tenant.environment.as_str(),
        media_type.extension()
    )
}

/// The object key of one variant, beside its original.
pub fn variant_key(tenant: &Tenant, id: &MediaId, name: &str, extension: &str) -> String {
    format!(
        "{}/{}/{id}/{name}.{extension}",
        tenant.agency_id,
        tenant.environment.as_str()
    )
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
    pub object_key: String,
}

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
    pub object_key: String,
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
}

/// One stored variant.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Variant {
    /// `thumbnail`, `web`, `mls`, `print`, `webp_web` or `webp_thumb`.
    pub name: String,
    /// Its object key.
    pub object_key: String,
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
struct ItemRow {
    id: MediaId,
    operation_id: OperationId,
    is_sandbox: bool,
    listing_id: Option<ListingId>,
    position: i32,
    filename: String,
    size_bytes: i64,
    media_type: String,
    content_sha256: String,
    object_key: String,
    storage_strategy: String,
    enable_optimization: bool,
    status: String,
    failure_reason: Option<String>,
    duration_seconds: Option<f64>,
    related_entity_type: Option<String>,
    related_entity_id: Option<String>,
}

const ITEM_COLUMNS: &str = "id, operation_id, is_sandbox, listing_id, position, filename, size_bytes, \
     media_type, content_sha256, object_key, storage_strategy, enable_optimization, status, \
     failure_reason, duration_seconds, related_entity_type, related_entity_id";

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
            variants: Vec::new(),
        })
    }
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
    pub archive_key: Option<String>,
    /// For a finished archive: its size.
    pub archive_size_bytes: Option<i64>,
    /// When it started.
    pub created_at: Timestamp,
}

/// An operation's columns.
type OperationRow = (
    OperationId,
    String,
    String,
    Option<String>,
    Option<String>,
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

/// Media repository; see [`Store::media`].
pub struct Media<'a> {
    pub(crate) store: &'a Store,
}

impl Media<'_> {
    /// Records an upload whose files are all stored: the operation and one
    /// queued item per file, in one transaction.
    pub async fn create_upload(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
        options: &UploadOptions,
        items: &[NewMediaItem],
    ) -> Result<Vec<MediaItem>> {
        let now = self.store.clock().now();
        in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "insert into media_operations (id, agency_id, is_sandbox, kind, listing_id, status, created_at)
                 values ($1, $2, $3, 'upload', $4, 'processing', $5)",
            )
            .bind(operation_id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(&options.listing_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            for (position, item) in items.iter().enumerate() {
                sqlx::query(
                    "insert into media_items (id, operation_id, agency_id, is_sandbox, listing_id, position,
                         filename, size_bytes, media_type, content_sha256, object_key, storage_strategy,
                         enable_optimization, related_entity_type, related_entity_id, status, created_at,
                         updated_at)
                     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 'queued', $16, $16)",
                )
                .bind(&item.id)
                .bind(operation_id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(&options.listing_id)
                .bind(i32::try_from(position).unwrap_or(i32::MAX))
                .bind(&item.filename)
                .bind(item.size_bytes)
                .bind(item.media_type.as_str())
                .bind(&item.content_sha256)
                .bind(&item.object_key)
                .bind(options.storage_strategy.as_str())
                .bind(options.enable_optimization)
                .bind(&options.related_entity_type)
                .bind(&options.related_entity_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            }
        });
        self.changed(tenant);
        self.operation_items(tenant, operation_id).await
    }

    /// A listing read shows media: forget the agency's cached reads after a
    /// change (other processes see it within the cache's one-second TTL).
    fn changed(&self, tenant: &Tenant) {
        self.store
            .listing_cache()
            .invalidate_agency(&tenant.agency_id);
    }

    /// The items of one of the tenant's operations, in upload order, with variants.
    pub async fn operation_items(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
    ) -> Result<Vec<MediaItem>> {
        let sql = format!(
            "select {ITEM_COLUMNS} from media_items
             where agency_id = $1 and is_sandbox = $2 and operation_id = $3 order by position"
        );
        let rows: Vec<ItemRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(operation_id)
                .fetch_all(pool)
                .await?
        });
        self.with_variants(rows).await
    }

    /// The items of one of the tenant's listings, oldest first, with variants.
    pub async fn listing_items(
        &self,
        tenant: &Tenant,
        listing_id: &ListingId,
    ) -> Result<Vec<MediaItem>> {
        let sql = format!(
            "select {ITEM_COLUMNS} from media_items
             where agency_id = $1 and is_sandbox = $2 and listing_id = $3 order by created_at, position"
        );
        let rows: Vec<ItemRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(listing_id)
                .fetch_all(pool)
                .await?
        });
        self.with_variants(rows).await
    }

    /// One of the tenant's items, with variants.
    pub async fn item(&self, tenant: &Tenant, id: &MediaId) -> Result<MediaItem> {
        let sql = format!(
            "select {ITEM_COLUMNS} from media_items where agency_id = $1 and is_sandbox = $2 and id = $3"
        );
        let row: Option<ItemRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        let row = row.ok_or(StorageError::NotFound(Entity::Media))?;
        Ok(self.with_variants(vec![row]).await?.remove(0))
    }

    /// Attaches every item's variants, read in one query.
    async fn with_variants(&self, rows: Vec<ItemRow>) -> Result<Vec<MediaItem>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            media_id: MediaId,
            #[sqlx(flatten)]
            variant: Variant,
        }
        let mut items = rows
            .into_iter()
            .map(MediaItem::try_from)
            .collect::<Result<Vec<_>>>()?;
        if items.is_empty() {
            return Ok(items);
        }
        let ids: Vec<String> = items.iter().map(|item| item.id.to_string()).collect();
        let ids = serde_json::to_string(&ids).unwrap_or_default();
        // The ids go in as one JSON array; both backends expand it in SQL.
        let rows: Vec<Row> = match self.store.db() {
            crate::Database::Sqlite(sqlite) => {
                sqlx::query_as(
                    "select media_id, name, object_key, format, width, height, size_bytes
                     from media_variants where media_id in (select value from json_each($1))
                     order by media_id, name",
                )
                .bind(&ids)
                .fetch_all(sqlite.pool())
                .await?
            }
            crate::Database::Postgres(pool) => {
                sqlx::query_as(
                    "select media_id, name, object_key, format, width, height, size_bytes
                     from media_variants
                     where media_id in (select jsonb_array_elements_text($1::jsonb))
                     order by media_id, name",
                )
                .bind(&ids)
                .fetch_all(pool)
                .await?
            }
        };
        for row in rows {
            if let Some(item) = items.iter_mut().find(|item| item.id == row.media_id) {
                item.variants.push(row.variant);
            }
        }
        Ok(items)
    }

    /// An item by id alone, for a signed download whose signature names the
    /// item's own tenant (checked by the caller).
    pub async fn item_by_id(&self, id: &MediaId) -> Result<(Tenant, MediaItem)> {
        let sql = format!("select agency_id, {ITEM_COLUMNS} from media_items where id = $1");
        #[derive(sqlx::FromRow)]
        struct Row {
            agency_id: crate::ids::AgencyId,
            #[sqlx(flatten)]
            item: ItemRow,
        }
        let row: Option<Row> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        let row = row.ok_or(StorageError::NotFound(Entity::Media))?;
        let tenant = Tenant::new(
            row.agency_id,
            Environment::from_sandbox_flag(row.item.is_sandbox),
        );
        let item = self.with_variants(vec![row.item]).await?.remove(0);
        Ok((tenant, item))
    }

    /// Items of any tenant still queued since before `before` (their job
    /// was never pushed, or lost), oldest first.
    pub async fn queued_before(&self, before: Timestamp, limit: u32) -> Result<Vec<QueuedItem>> {
        let rows: Vec<(MediaId, OperationId, crate::ids::AgencyId, bool)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select id, operation_id, agency_id, is_sandbox from media_items
                 where status = 'queued' and created_at < $1 order by created_at limit $2",
            )
            .bind(before)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(media_id, operation_id, agency, is_sandbox)| QueuedItem {
                media_id,
                operation_id,
                tenant: Tenant::new(agency, Environment::from_sandbox_flag(is_sandbox)),
            })
            .collect())
    }

    /// Marks an item as being processed (a retry finds it so too).
    pub async fn start_processing(&self, tenant: &Tenant, id: &MediaId) -> Result<()> {
        self.set_status(tenant, id, MediaStatus::Processing, None, None)
            .await
    }

    /// Stores an item's variants and marks it ready, in one transaction.
    pub async fn finish_item(
        &self,
        tenant: &Tenant,
        id: &MediaId,
        variants: &[Variant],
        duration_seconds: Option<f64>,
    ) -> Result<()> {
        let now = self.store.clock().now();
        in_transaction!(self.store.db(), |tx| {
            sqlx::query("delete from media_variants where media_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            for variant in variants {
                sqlx::query(
                    "insert into media_variants (media_id, name, object_key, format, width, height, size_bytes)
                     values ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(id)
                .bind(&variant.name)
                .bind(&variant.object_key)
                .bind(&variant.format)
                .bind(variant.width)
                .bind(variant.height)
                .bind(variant.size_bytes)
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query(
                "update media_items set status = 'ready', failure_reason = null, duration_seconds = $4,
                     updated_at = $5
                 where agency_id = $1 and is_sandbox = $2 and id = $3",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .bind(duration_seconds)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        });
        self.changed(tenant);
        Ok(())
    }

    /// Marks an item failed with a reason a client can read.
    pub async fn fail_item(&self, tenant: &Tenant, id: &MediaId, reason: &str) -> Result<()> {
        self.set_status(tenant, id, MediaStatus::Failed, Some(reason), None)
            .await
    }

    async fn set_status(
        &self,
        tenant: &Tenant,
        id: &MediaId,
        status: MediaStatus,
        reason: Option<&str>,
        duration_seconds: Option<f64>,
    ) -> Result<()> {
        let now = self.store.clock().now();
        crate::db::write_on_pool!(self.store.db(), pool => {
            sqlx::query(
                "update media_items set status = $4, failure_reason = $5,
                     duration_seconds = coalesce($6, duration_seconds), updated_at = $7
                 where agency_id = $1 and is_sandbox = $2 and id = $3",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .bind(status.as_str())
            .bind(reason)
            .bind(duration_seconds)
            .bind(now)
            .execute(&mut *pool)
            .await?;
        });
        self.changed(tenant);
        Ok(())
    }

    /// Completes an upload once none of its items is queued or processing:
    /// marks it completed (or failed when every item failed) and emits
    /// `media.upload.completed` in the same transaction. Returns the items
    /// when this call completed it, `None` when it was not done or another
    /// worker completed it first.
    pub async fn complete_upload_if_done(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
    ) -> Result<Option<Vec<MediaItem>>> {
        let items = self.operation_items(tenant, operation_id).await?;
        let pending = items
            .iter()
            .any(|item| matches!(item.status, MediaStatus::Queued | MediaStatus::Processing));
        if pending || items.is_empty() {
            return Ok(None);
        }
        let all_failed = items.iter().all(|item| item.status == MediaStatus::Failed);
        let status = if all_failed { "failed" } else { "completed" };
        let now = self.store.clock().now();
        let listing_number: Option<String> = on_pool!(self.store.db(), pool => {
            sqlx::query_scalar(
                "select l.listing_number from media_operations o join listings l on l.id = o.listing_id
                 where o.agency_id = $1 and o.is_sandbox = $2 and o.id = $3",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(operation_id)
            .fetch_optional(pool)
            .await?
        });
        let data = upload_event_data(operation_id, listing_number.as_deref(), &items);
        let mut emitted = Vec::new();
        let completed = in_transaction!(self.store.db(), |tx| {
            let changed = sqlx::query(
                "update media_operations set status = $4, completed_at = $5
                 where agency_id = $1 and is_sandbox = $2 and id = $3 and status = 'processing'",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(operation_id)
            .bind(status)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 1 && !all_failed {
                emitted.push(
                    insert_event(
                        &mut *tx,
                        tenant,
                        now,
                        NewEvent::new(EventType::MediaUploadCompleted, data),
                    )
                    .await?,
                );
            }
            changed == 1
        });
        self.store.announce(&emitted);
        Ok(completed.then_some(items))
    }

    /// The next progress number of an operation: several workers publish
    /// its states at once, and subscribers need one order.
    pub async fn next_progress_seq(&self, tenant: &Tenant, id: &OperationId) -> Result<u64> {
        let seq: Option<i64> = crate::db::write_on_pool!(self.store.db(), pool => {
            sqlx::query_scalar(
                "update media_operations set progress_seq = progress_seq + 1
                 where agency_id = $1 and is_sandbox = $2 and id = $3
                 returning progress_seq",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .fetch_optional(&mut *pool)
            .await?
        });
        let seq = seq.ok_or(StorageError::NotFound(Entity::Operation))?;
        Ok(u64::try_from(seq).unwrap_or(0))
    }

    /// Where an operation stands: its status and each file's status, failure
    /// reason and finished variants. Progress states carry it, so a late
    /// subscriber starts from the whole picture.
    pub async fn snapshot(&self, tenant: &Tenant, id: &OperationId) -> Result<Value> {
        let operation = self.operation(tenant, id).await?;
        let rows: Vec<(MediaId, String, String, Option<String>)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select id, filename, status, failure_reason from media_items
                 where agency_id = $1 and is_sandbox = $2 and operation_id = $3 order by position",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .fetch_all(pool)
            .await?
        });
        let variants: Vec<(MediaId, String)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select v.media_id, v.name from media_variants v join media_items i on i.id = v.media_id
                 where i.agency_id = $1 and i.is_sandbox = $2 and i.operation_id = $3 order by v.name",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .fetch_all(pool)
            .await?
        });
        let files: Vec<Value> = rows
            .into_iter()
            .map(|(media_id, filename, status, reason)| {
                let done: Vec<&str> = variants
                    .iter()
                    .filter(|(owner, _)| *owner == media_id)
                    .map(|(_, name)| name.as_str())
                    .collect();
                json!({
                    "media_id": media_id,
                    "filename": filename,
                    "status": status,
                    "failure_reason": reason,
                    "variants": done,
                })
            })
            .collect();
        Ok(json!({
            "operation_id": operation.id,
            "kind": operation.kind,
            "status": operation.status,
            "files": files,
        }))
    }

    /// Records an archive of the tenant's `media` (every id must be one of
    /// the tenant's items; the first that is not comes back as `NotFound`).
    pub async fn create_archive(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
        archive_name: &str,
        media: &[MediaId],
    ) -> Result<()> {
        for id in media {
            self.item(tenant, id).await?;
        }
        let now = self.store.clock().now();
        let ids = serde_json::to_string(media).unwrap_or_default();
        in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "insert into media_operations (id, agency_id, is_sandbox, kind, status, archive_name,
                     archive_media, created_at)
                 values ($1, $2, $3, 'archive', 'processing', $4, $5, $6)",
            )
            .bind(operation_id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(archive_name)
            .bind(&ids)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// The items an archive packs, in the order asked.
    pub async fn archive_items(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
    ) -> Result<Vec<MediaItem>> {
        let ids: Option<Option<String>> = on_pool!(self.store.db(), pool => {
            sqlx::query_scalar(
                "select archive_media from media_operations
                 where agency_id = $1 and is_sandbox = $2 and id = $3 and kind = 'archive'",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(operation_id)
            .fetch_optional(pool)
            .await?
        });
        let ids: Vec<MediaId> = ids
            .ok_or(StorageError::NotFound(Entity::Operation))?
            .and_then(|text| serde_json::from_str::<Vec<String>>(&text).ok())
            .unwrap_or_default()
            .iter()
            .filter_map(|id| MediaId::parse(id))
            .collect();
        let mut items = Vec::with_capacity(ids.len());
        for id in &ids {
            items.push(self.item(tenant, id).await?);
        }
        Ok(items)
    }

    /// Marks an archive written (its object and size) or failed, once:
    /// returns whether this call finished it (it was still processing).
    pub async fn finish_archive(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
        written: Option<(&str, i64)>,
    ) -> Result<bool> {
        let now = self.store.clock().now();
        let (status, key, size) = match written {
            Some((key, size)) => ("completed", Some(key), Some(size)),
            None => ("failed", None, None),
        };
        let changed = crate::db::write_on_pool!(self.store.db(), pool => {
            sqlx::query(
                "update media_operations set status = $4, archive_key = $5, archive_size_bytes = $6,
                     completed_at = $7
                 where agency_id = $1 and is_sandbox = $2 and id = $3 and kind = 'archive'
                   and status = 'processing'",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(operation_id)
            .bind(status)
            .bind(key)
            .bind(size)
            .bind(now)
            .execute(&mut *pool)
            .await?
            .rows_affected()
        });
        Ok(changed == 1)
    }

    /// An operation by id alone, with its tenant, for a signed download
    /// whose signature names that tenant (checked by the caller).
    pub async fn operation_by_id(&self, id: &OperationId) -> Result<(Tenant, MediaOperation)> {
        let owner: Option<(crate::ids::AgencyId, bool)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as("select agency_id, is_sandbox from media_operations where id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        let (agency, is_sandbox) = owner.ok_or(StorageError::NotFound(Entity::Operation))?;
        let tenant = Tenant::new(agency, Environment::from_sandbox_flag(is_sandbox));
        let operation = self.operation(&tenant, id).await?;
        Ok((tenant, operation))
    }

    /// One of the tenant's operations.
    pub async fn operation(&self, tenant: &Tenant, id: &OperationId) -> Result<MediaOperation> {
        let row: Option<OperationRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select id, kind, status, archive_name, archive_key, archive_size_bytes, created_at
                 from media_operations where agency_id = $1 and is_sandbox = $2 and id = $3",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .fetch_optional(pool)
            .await?
        });
        let (id, kind, status, archive_name, archive_key, archive_size_bytes, created_at) =
            row.ok_or(StorageError::NotFound(Entity::Operation))?;
        Ok(MediaOperation {
            id,
            kind,
            status,
            archive_name,
            archive_key,
            archive_size_bytes,
            created_at,
        })
    }
}

/// The `data` of `media.upload.completed`.
fn upload_event_data(
    operation_id: &OperationId,
    listing_number: Option<&str>,
    items: &[MediaItem],
) -> Value {
    let first = items.first();
    json!({
        "operation_id": operation_id,
        "listing_number": listing_number,
        "related_entity_type": first.and_then(|item| item.related_entity_type.as_deref()),
        "related_entity_id": first.and_then(|item| item.related_entity_id.as_deref()),
        "storage_strategy": first.map(|item| item.storage_strategy.as_str()),
        "files": items.iter().map(|item| json!({
            "file_id": item.id,
            "filename": item.filename,
            "content_type": item.media_type.content_type(),
            "size_bytes": item.size_bytes,
            "status": item.status.as_str(),
            "failure_reason": item.failure_reason,
            "variants": item.variants.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
