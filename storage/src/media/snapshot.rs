//! Where an operation stands for its progress stream: the next progress
//! number, and a snapshot of every file.

use super::Media;
use super::operation::{FileSnapshot, OperationSnapshot};
use crate::db::on_pool;
use crate::ids::{MediaId, OperationId};
use crate::{Entity, Result, StorageError, Tenant};

impl Media<'_> {
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
    pub async fn snapshot(&self, tenant: &Tenant, id: &OperationId) -> Result<OperationSnapshot> {
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
        let files = rows
            .into_iter()
            .map(|(media_id, filename, status, failure_reason)| {
                let variants = variants
                    .iter()
                    .filter(|(owner, _)| *owner == media_id)
                    .map(|(_, name)| name.clone())
                    .collect();
                FileSnapshot {
                    media_id,
                    filename,
                    status,
                    failure_reason,
                    variants,
                }
            })
            .collect();
        Ok(OperationSnapshot {
            operation_id: operation.id,
            kind: operation.kind,
            status: operation.status,
            files,
        })
    }
}
