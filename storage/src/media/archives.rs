//! Archive operations: recorded with the tenant's items they pack, read by
//! the worker, and finished once written (or failed).

use super::{Media, MediaItem, StorageKey};
use crate::db::{in_transaction, on_pool};
use crate::ids::{DeliveryProfileId, MediaId, OperationId};
use crate::{Entity, Result, StorageError, Tenant};

impl Media<'_> {
    /// Records an archive of the tenant's `media` (every id must be one of
    /// the tenant's items; the first that is not comes back as `NotFound`):
    /// their originals, or their outputs of `profile`.
    pub async fn create_archive(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
        archive_name: &str,
        media: &[MediaId],
        profile: Option<&DeliveryProfileId>,
    ) -> Result<()> {
        for id in media {
            self.item(tenant, id).await?;
        }
        let now = self.store.clock().now();
        let ids = serde_json::to_string(media).unwrap_or_default();
        in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "insert into media_operations (id, agency_id, is_sandbox, kind, status, archive_name,
                     archive_media, created_at, archive_profile_id)
                 values ($1, $2, $3, 'archive', 'processing', $4, $5, $6, $7)",
            )
            .bind(operation_id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(archive_name)
            .bind(&ids)
            .bind(now)
            .bind(profile)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// The profile whose outputs an archive packs; `None` for originals.
    pub async fn archive_profile(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
    ) -> Result<Option<DeliveryProfileId>> {
        let profile: Option<Option<DeliveryProfileId>> = on_pool!(self.store.db(), pool => {
            sqlx::query_scalar(
                "select archive_profile_id from media_operations
                 where agency_id = $1 and is_sandbox = $2 and id = $3 and kind = 'archive'",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(operation_id)
            .fetch_optional(pool)
            .await?
        });
        Ok(profile.flatten())
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
        written: Option<(&StorageKey, i64)>,
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
}
