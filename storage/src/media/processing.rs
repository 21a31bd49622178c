//! Processing an item (started, finished with its variants, failed) and
//! completing its upload, which emits `media.upload.completed`.

use serde_json::{Value, json};

use super::{Media, MediaItem, MediaStatus, Variant};
use crate::background::outbox::insert_event;
use crate::db::{in_transaction, on_pool};
use crate::ids::{MediaId, OperationId};
use crate::rules::events::{EventType, NewEvent};
use crate::{Result, Tenant, Timestamp};

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
        if pending {
            return Ok(None);
        }
        // A batch of resumable uploads is done once every upload it
        // announced was created and has ended; an upload in one request
        // (no announced count) once its items are.
        let uploads: (Option<i64>, i64, i64) = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select o.expected_items,
                        (select count(*) from uploads u where u.operation_id = o.id),
                        (select count(*) from uploads u where u.operation_id = o.id and u.state = 'receiving')
                 from media_operations o where o.agency_id = $1 and o.is_sandbox = $2 and o.id = $3",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(operation_id)
            .fetch_optional(pool)
            .await?
            .unwrap_or((None, 0, 0))
        });
        match uploads {
            (Some(expected), created, receiving) if created < expected || receiving > 0 => {
                return Ok(None);
            }
            (None, _, _) if items.is_empty() => return Ok(None),
            _ => {}
        }
        // Every item failed, or (a batch whose uploads all ended unfinished) none exists.
        let all_failed = items.iter().all(|item| item.status == MediaStatus::Failed);
        let status = if all_failed { "failed" } else { "completed" };
        let now = self.store.clock().now();
        let listing: Option<(String, String)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select l.id, l.listing_number from media_operations o join listings l on l.id = o.listing_id
                 where o.agency_id = $1 and o.is_sandbox = $2 and o.id = $3",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(operation_id)
            .fetch_optional(pool)
            .await?
        });
        let listing_number = listing.as_ref().map(|(_, number)| number.as_str());
        let data = upload_event_data(operation_id, listing_number, &items);
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
            if changed == 1
                && let Some((listing_id, listing_number)) = &listing
            {
                let counts: (i64, i64, i64) = sqlx::query_as(
                    "select
                         coalesce(sum(case when status = 'ready' then 1 else 0 end), 0),
                         coalesce(sum(case when status in ('queued', 'processing') then 1 else 0 end), 0),
                         coalesce(sum(case when status = 'failed' then 1 else 0 end), 0)
                     from media_items
                     where agency_id = $1 and is_sandbox = $2 and listing_id = $3",
                )
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(listing_id)
                .fetch_one(&mut *tx)
                .await?;
                let event = delivery_event(listing_number, counts, now);
                emitted.push(insert_event(&mut *tx, tenant, now, event).await?);
            }
            changed == 1
        });
        self.store.announce(&emitted);
        Ok(completed.then_some(items))
    }
}

/// Where a listing's media delivery stands once one of its uploads is
/// complete, from the counts of its items (ready, still processing, failed):
/// `partial` while any is processing, `completed` once none is and one at
/// least is ready, `failed` when every one failed.
fn delivery_event(
    listing_number: &str,
    (ready, pending, _failed): (i64, i64, i64),
    now: Timestamp,
) -> NewEvent {
    if pending > 0 {
        NewEvent::new(
            EventType::MediaDeliveryPartial,
            json!({
                "listing_number": listing_number,
                "delivered_count": ready,
                "pending_count": pending,
            }),
        )
    } else if ready > 0 {
        NewEvent::new(
            EventType::MediaDeliveryCompleted,
            json!({
                "listing_number": listing_number,
                "delivered_count": ready,
                "delivered_at": now.to_rfc3339(),
            }),
        )
    } else {
        NewEvent::new(
            EventType::MediaDeliveryFailed,
            json!({
                "listing_number": listing_number,
                "delivered_count": 0,
                "reason": "processing_error",
                "failed_at": now.to_rfc3339(),
            }),
        )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::event_catalog::CatalogEntry;

    fn valid(entry: &CatalogEntry, data: &Value) -> bool {
        jsonschema::draft202012::new(&entry.data_schema())
            .expect("the schema compiles")
            .is_valid(data)
    }

    #[test]
    fn a_listings_delivery_is_partial_completed_or_failed_by_its_items() {
        let now = Timestamp::from_micros(1_800_000_000_000_000);
        let cases = [
            ((3, 2, 1), EventType::MediaDeliveryPartial),
            ((3, 0, 1), EventType::MediaDeliveryCompleted),
            ((0, 0, 2), EventType::MediaDeliveryFailed),
        ];
        for (counts, expected) in cases {
            let event = delivery_event("K7M3QX9", counts, now);
            assert_eq!(event.event_type, expected, "{counts:?}");
            assert!(
                valid(expected.catalog_entry(), &event.data),
                "{}",
                event.data
            );
            assert_eq!(event.data["delivered_count"], counts.0);
        }
        let partial = delivery_event("K7M3QX9", (1, 4, 0), now);
        assert_eq!(partial.data["pending_count"], 4);
    }
}
