//! Issuing keys and rotating one (its replacement issued, the old key kept
//! working for the overlap).

use sqlx::types::Json;

use super::format::{MAX_NAME_LEN, Plaintext, generate_plaintext, hint_of};
use super::record::{
    ApiKey, ApiKeyRow, IssuedKey, KEY_COLUMNS, KeyStatus, NewApiKey, ROTATION_OVERLAP_SECONDS,
    audit,
};
use super::repository::ApiKeys;
use super::scope::Scope;
use crate::db::write_on_pool;
use crate::ids::{AgencyId, ApiKeyId, UserId};
use crate::{Result, StorageError};

impl ApiKeys<'_> {
    /// Issues a key for `agency`. The returned plaintext is the only copy.
    pub async fn issue(&self, agency: &AgencyId, new: NewApiKey) -> Result<IssuedKey> {
        self.issue_audited(agency, new, None).await
    }

    /// Issues a key for `agency` on behalf of `actor` (a session user, possibly
    /// a platform identity of another agency), whom the audit log names.
    pub async fn issue_by(
        &self,
        agency: &AgencyId,
        new: NewApiKey,
        actor: &UserId,
    ) -> Result<IssuedKey> {
        self.issue_audited(agency, new, Some(format!("issued by {actor}")))
            .await
    }

    async fn issue_audited(
        &self,
        agency: &AgencyId,
        new: NewApiKey,
        detail: Option<String>,
    ) -> Result<IssuedKey> {
        let name = new.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_LEN {
            return Err(StorageError::Invalid {
                field: "name",
                reason: format!("must be 1 to {MAX_NAME_LEN} characters"),
            });
        }
        let mut scopes = if new.scopes.is_empty() {
            vec![Scope::DEFAULT]
        } else {
            new.scopes
        };
        scopes.sort();
        scopes.dedup();
        let now = self.store.clock().now();
        let plaintext = generate_plaintext(new.format, new.environment, now);
        let key = ApiKey {
            id: ApiKeyId::generate(),
            agency_id: agency.clone(),
            name: name.to_owned(),
            hint: hint_of(&plaintext, new.format, new.environment),
            format: new.format,
            scopes,
            environment: new.environment,
            status: KeyStatus::Active,
            created_by: new.created_by,
            created_at: now,
            rotation_started_at: None,
            expires_at: None,
            revoked_at: None,
            rate_limit_overrides: new.rate_limit_overrides,
            last_used_at: None,
        };
        let hash = self.store.derived_keys().hash_api_key(&plaintext);
        let scope_names: Vec<&str> = key.scopes.iter().map(|s| s.as_str()).collect();
        let inserted = write_on_pool!(self.store.db(), pool => {
            let inserted = sqlx::query(
                "insert into api_keys (id, agency_id, name, key_hash, key_hint, format, scopes,
                     is_sandbox, status, created_by, created_at, rate_limit_overrides)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            )
            .bind(&key.id)
            .bind(&key.agency_id)
            .bind(&key.name)
            .bind(&hash)
            .bind(&key.hint)
            .bind(key.format.as_str())
            .bind(Json(&scope_names))
            .bind(key.environment.is_sandbox())
            .bind(key.status.as_str())
            .bind(&key.created_by)
            .bind(key.created_at)
            .bind(Json(&key.rate_limit_overrides))
            .execute(&mut *pool)
            .await;
            match inserted {
                Ok(_) => audit!(&mut *pool, &key.agency_id, &key.id, "issued", detail.clone(), key.created_at)
                    .await
                    .map(|_| ()),
                Err(err) => Err(err),
            }
        });
        match inserted {
            Ok(_) => Ok(IssuedKey {
                key,
                plaintext: Plaintext(plaintext),
            }),
            Err(err) if StorageError::is_foreign_key_violation(&err) => {
                Err(StorageError::Invalid {
                    field: "agency_id",
                    reason: "does not name an agency".to_owned(),
                })
            }
            Err(err) => Err(err.into()),
        }
    }
    /// Rotates an active key of `agency`: a new key with the same name,
    /// scopes, environment, format and overrides is issued, and the old one
    /// keeps authenticating for [`ROTATION_OVERLAP_SECONDS`] (the expiry
    /// schedule then deactivates it). Returns the old key as now stored and
    /// the new one with its plaintext (shown once).
    pub async fn rotate(&self, agency: &AgencyId, id: &ApiKeyId) -> Result<(ApiKey, IssuedKey)> {
        let old = self.get(agency, id).await?;
        if old.status != KeyStatus::Active {
            return Err(StorageError::Invalid {
                field: "key",
                reason: format!("is {}; only an active key rotates", old.status.as_str()),
            });
        }
        let replacement = self
            .issue(
                agency,
                NewApiKey {
                    name: old.name.clone(),
                    scopes: old.scopes.clone(),
                    environment: old.environment,
                    format: old.format,
                    created_by: old.created_by.clone(),
                    rate_limit_overrides: old.rate_limit_overrides.clone(),
                },
            )
            .await?;
        let now = self.store.clock().now();
        let expires_at = now.plus_seconds(ROTATION_OVERLAP_SECONDS);
        let sql = format!(
            "update api_keys set status = 'rotating', rotation_started_at = $3, expires_at = $4
             where agency_id = $1 and id = $2 and status = 'active'
             returning {KEY_COLUMNS}"
        );
        let row: Option<ApiKeyRow> = crate::db::in_transaction!(self.store.db(), |tx| {
            let row: Option<ApiKeyRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(agency)
                .bind(id)
                .bind(now)
                .bind(expires_at)
                .fetch_optional(&mut *tx)
                .await?;
            if row.is_some() {
                audit!(
                    &mut *tx,
                    agency,
                    id,
                    "rotated",
                    Some(replacement.key.id.to_string()),
                    now
                )
                .await?;
            }
            row
        });
        let Some(row) = row else {
            // Rotated or revoked meanwhile: the replacement must not outlive that.
            self.revoke(agency, &replacement.key.id).await?;
            return Err(StorageError::Invalid {
                field: "key",
                reason: "changed while being rotated; try again".to_owned(),
            });
        };
        Ok((row.try_into()?, replacement))
    }
}
