//! Finding keys: the presented key by its keyed hash (authentication), one
//! by id, the agency's list, and the audit log.

use std::collections::BTreeMap;

use sqlx::types::Json;

use super::record::{ApiKey, ApiKeyRow, Credential, KEY_COLUMNS, KeyAuditEntry};
use super::repository::ApiKeys;
use crate::db::on_pool;
use crate::ids::{AgencyId, ApiKeyId};
use crate::{Entity, Result, StorageError};

impl ApiKeys<'_> {
    /// Finds the key whose plaintext is `presented`, by its keyed hash, with its
    /// agency's budget overrides. The caller decides whether the key is usable
    /// (`ApiKey::check_usable`).
    pub async fn find_by_plaintext(&self, presented: &str) -> Result<Option<Credential>> {
        let hash = self.store.derived_keys().hash_api_key(presented);
        self.find_by_hash(&hash).await
    }

    /// Finds the key whose keyed hash is `hash` (see `DerivedKeys::hash_api_key`).
    pub async fn find_by_hash(&self, hash: &str) -> Result<Option<Credential>> {
        #[derive(sqlx::FromRow)]
        struct CredentialRow {
            #[sqlx(flatten)]
            key: ApiKeyRow,
            agency_rate_limit_overrides: Json<BTreeMap<String, u32>>,
            creator_role: Option<String>,
        }
        let columns: String = KEY_COLUMNS
            .split(", ")
            .map(|column| format!("k.{column}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "select {columns}, a.rate_limit_overrides as agency_rate_limit_overrides, u.role as creator_role
             from api_keys k join agencies a on a.id = k.agency_id left join users u on u.id = k.created_by
             where k.key_hash = $1"
        );
        let row: Option<CredentialRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(hash)
                .fetch_optional(pool)
                .await?
        });
        row.map(|row| {
            Ok(Credential {
                key: ApiKey::try_from(row.key)?,
                agency_rate_limit_overrides: row.agency_rate_limit_overrides.0,
                creator_role: row
                    .creator_role
                    .as_deref()
                    .and_then(crate::records::user::Role::parse),
            })
        })
        .transpose()
    }
    /// One key of `agency` (never its plaintext).
    pub async fn get(&self, agency: &AgencyId, id: &ApiKeyId) -> Result<ApiKey> {
        let sql = format!("select {KEY_COLUMNS} from api_keys where agency_id = $1 and id = $2");
        let row: Option<ApiKeyRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(agency)
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        row.ok_or(StorageError::NotFound(Entity::ApiKey))?
            .try_into()
    }

    /// Every key of `agency`, oldest first (never a plaintext).
    pub async fn list(&self, agency: &AgencyId) -> Result<Vec<ApiKey>> {
        let sql = format!(
            "select {KEY_COLUMNS} from api_keys where agency_id = $1 order by created_at, id"
        );
        let rows: Vec<ApiKeyRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(agency)
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(ApiKey::try_from).collect()
    }

    /// The audit log of `agency`'s keys, oldest first.
    pub async fn audit_log(&self, agency: &AgencyId) -> Result<Vec<KeyAuditEntry>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(
                "select key_id, action, detail, at from api_key_audit where agency_id = $1 order by at, id",
            )
            .bind(agency)
            .fetch_all(pool)
            .await?)
        })
    }
}
