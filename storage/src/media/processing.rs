//! Processing an item (started, finished with its variants, failed) and
//! completing its upload, which emits `media.upload.completed`.

use serde_json::{Value, json};

use super::{Media, MediaItem, MediaStatus, Variant};
use crate::db::{in_transaction, on_pool};
use crate::events::{EventType, NewEvent};
use crate::ids::{MediaId, OperationId};
use crate::outbox::insert_event;
use crate::{Result, Tenant};

impl Media<'_> {
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
