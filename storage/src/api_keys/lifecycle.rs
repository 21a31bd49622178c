//! The end of a key: revoked by its owner, or expired when its rotation
//! overlap ends.

use super::ended;
use super::record::{ApiKey, ApiKeyRow, KEY_COLUMNS, audit};
use super::repository::ApiKeys;
use crate::ids::{AgencyId, ApiKeyId};
use crate::{Entity, Result, StorageError};

impl ApiKeys<'_> {
    /// Deactivates keys whose rotation overlap has ended (status `rotating`,
    /// `expires_at` passed): from then on they are `expired`. Idempotent.
    pub async fn expire_rotated(&self) -> Result<u64> {
        let now = self.store.clock().now();
        let expired: Vec<(ApiKeyId, AgencyId)> = crate::db::in_transaction!(
            self.store.db(),
            |tx| {
                let expired: Vec<(ApiKeyId, AgencyId)> = sqlx::query_as(
                "update api_keys set status = 'expired' where status = 'rotating' and expires_at <= $1
                 returning id, agency_id",
            )
            .bind(now)
            .fetch_all(&mut *tx)
            .await?;
                for (key, agency) in &expired {
                    audit!(&mut *tx, agency, key, "expired", None::<String>, now).await?;
                    ended::announce((&mut *tx).into(), key).await?;
                }
                expired
            }
        );
        Ok(expired.len() as u64)
    }
    /// Revokes a key of `agency` for good. Revoking twice is not an error.
    pub async fn revoke(&self, agency: &AgencyId, id: &ApiKeyId) -> Result<ApiKey> {
        let now = self.store.clock().now();
        let sql = format!(
            "update api_keys set status = 'revoked', revoked_at = coalesce(revoked_at, $3)
             where agency_id = $1 and id = $2
             returning {KEY_COLUMNS}"
        );
        let row: Option<ApiKeyRow> = crate::db::in_transaction!(self.store.db(), |tx| {
            let before: Option<String> =
                sqlx::query_scalar("select status from api_keys where agency_id = $1 and id = $2")
                    .bind(agency)
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?;
            let row: Option<ApiKeyRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(agency)
                .bind(id)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            if row.is_some() && before.as_deref() != Some("revoked") {
                audit!(&mut *tx, agency, id, "revoked", None::<String>, now).await?;
                ended::announce((&mut *tx).into(), id).await?;
            }
            row
        });
        row.ok_or(StorageError::NotFound(Entity::ApiKey))?
            .try_into()
    }
}
