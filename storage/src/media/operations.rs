//! Reading an operation: the tenant's, or by id alone for a signed download.

use super::operation::OperationRow;
use super::{Media, MediaOperation};
use crate::db::on_pool;
use crate::ids::OperationId;
use crate::{Entity, Environment, Result, StorageError, Tenant};

impl Media<'_> {
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
