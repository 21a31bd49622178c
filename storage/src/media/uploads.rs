//! Recording an upload whose files are stored, and reading items: by
//! operation, by listing, one by id, and those whose job went missing.

use super::item::{ITEM_COLUMNS, ItemRow};
use super::{Media, MediaItem, NewMediaItem, QueuedItem, UploadOptions, Variant};
use crate::db::{Tx, in_transaction, on_pool, on_tx};
use crate::ids::{ListingId, MediaId, OperationId};
use crate::{Entity, Environment, Result, StorageError, Tenant, Timestamp};

/// Writes one queued item of `operation_id` in the caller's transaction, at
/// `position`, or after the operation's items so far when `None` (a
/// resumable upload's item, which its batch gains when it completes).
pub(super) async fn insert_item<'c>(
    tx: impl Into<Tx<'c>>,
    tenant: &Tenant,
    operation_id: &OperationId,
    position: Option<i32>,
    item: &NewMediaItem,
    options: &UploadOptions,
    now: Timestamp,
) -> Result<()> {
    on_tx!(tx.into(), conn => {
        sqlx::query(
            "insert into media_items (id, operation_id, agency_id, is_sandbox, listing_id, position,
                 filename, size_bytes, media_type, content_sha256, object_key, storage_strategy,
                 enable_optimization, related_entity_type, related_entity_id, status, created_at,
                 updated_at)
             values ($1, $2, $3, $4, $5,
                 coalesce($6, (select count(*) from media_items where operation_id = $2)),
                 $7, $8, $9, $10, $11, $12, $13, $14, $15, 'queued', $16, $16)",
        )
        .bind(&item.id)
        .bind(operation_id)
        .bind(&tenant.agency_id)
        .bind(tenant.environment.is_sandbox())
        .bind(&options.listing_id)
        .bind(position)
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
        .execute(&mut *conn)
        .await?;
    });
    Ok(())
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
                let position = i32::try_from(position).unwrap_or(i32::MAX);
                insert_item(
                    &mut *tx,
                    tenant,
                    operation_id,
                    Some(position),
                    item,
                    options,
                    now,
                )
                .await?;
            }
        });
        self.changed(tenant);
        self.operation_items(tenant, operation_id).await
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
        self.with_variants(tenant, rows).await
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
        self.with_variants(tenant, rows).await
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
        Ok(self.with_variants(tenant, vec![row]).await?.remove(0))
    }

    /// Attaches every item's variants, read in one query, and its outputs.
    async fn with_variants(&self, tenant: &Tenant, rows: Vec<ItemRow>) -> Result<Vec<MediaItem>> {
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
        self.attach_outputs(tenant, &mut items, &ids).await?;
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
        let item = self.with_variants(&tenant, vec![row.item]).await?.remove(0);
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
}
