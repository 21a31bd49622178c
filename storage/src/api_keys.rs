//! API keys: the two plaintext formats, scopes, issuing, and authentication by
//! keyed-hash lookup. The plaintext exists only in the value returned by
//! `issue`; the table holds its HMAC-SHA256 and a short hint.

use std::collections::BTreeMap;
use std::fmt;

use rand::RngExt;
use rand::distr::Alphanumeric;
use sqlx::types::Json;
use ulid::Ulid;

use crate::db::{on_pool, write_on_pool};
use crate::ids::{AgencyId, ApiKeyId, UserId};
use crate::{Entity, Environment, Result, StorageError, Store, Tenant, Timestamp};

/// Length of the random part of an `sk_` key (base62, about 190 bits).
const SK_RANDOM_LEN: usize = 32;
/// Shortest random part accepted as an `sk_` key.
const SK_RANDOM_MIN: usize = 24;
/// Longest random part accepted as an `sk_` key.
const SK_RANDOM_MAX: usize = 128;
/// Longest key name accepted.
const MAX_NAME_LEN: usize = 100;

/// The two plaintext formats of the specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFormat {
    /// `sk_live_…` / `sk_test_…` followed by random base62.
    Sk,
    /// `ma_live_ak_…` / `ma_test_ak_…` followed by a ULID.
    Ma,
}

impl KeyFormat {
    /// `sk` or `ma`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Sk => "sk",
            Self::Ma => "ma",
        }
    }

    /// Parses `sk` or `ma`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "sk" => Some(Self::Sk),
            "ma" => Some(Self::Ma),
            _ => None,
        }
    }

    const fn prefix(self, environment: Environment) -> &'static str {
        match (self, environment) {
            (Self::Sk, Environment::Live) => "sk_live_",
            (Self::Sk, Environment::Sandbox) => "sk_test_",
            (Self::Ma, Environment::Live) => "ma_live_ak_",
            (Self::Ma, Environment::Sandbox) => "ma_test_ak_",
        }
    }
}

/// The format and environment a presented string claims by its shape, or `None`
/// when it cannot be a key of ours at all (the "malformed" case).
pub fn key_shape(text: &str) -> Option<(KeyFormat, Environment)> {
    for format in [KeyFormat::Sk, KeyFormat::Ma] {
        for environment in [Environment::Live, Environment::Sandbox] {
            let Some(rest) = text.strip_prefix(format.prefix(environment)) else {
                continue;
            };
            let well_formed = match format {
                KeyFormat::Sk => {
                    (SK_RANDOM_MIN..=SK_RANDOM_MAX).contains(&rest.len())
                        && rest.bytes().all(|b| b.is_ascii_alphanumeric())
                }
                KeyFormat::Ma => rest.len() == ulid::ULID_LEN && Ulid::from_string(rest).is_ok(),
            };
            return well_formed.then_some((format, environment));
        }
    }
    None
}

/// What a key permits: the six scopes of the specification, and
/// `webhooks:write` for managing webhook endpoints (which the specification
/// names routes for but no scope).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Read listings and their orders.
    ListingsRead,
    /// Create listings, change status, cancel, patch sections.
    ListingsWrite,
    /// Upload media.
    MediaWrite,
    /// Read shoot availability.
    SchedulingRead,
    /// Read the agency's users.
    UsersRead,
    /// Change users' preferences (and, later, administer users).
    UsersWrite,
    /// Read the webhook event catalog, endpoints and deliveries.
    WebhooksRead,
    /// Register and manage webhook endpoints, replay deliveries, test fire.
    WebhooksWrite,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 8] = [
        Scope::ListingsRead,
        Scope::ListingsWrite,
        Scope::MediaWrite,
        Scope::SchedulingRead,
        Scope::UsersRead,
        Scope::UsersWrite,
        Scope::WebhooksRead,
        Scope::WebhooksWrite,
    ];

    /// The scope a key gets when none is asked for.
    pub const DEFAULT: Scope = Scope::ListingsRead;

    /// The wire name (`listings:read`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ListingsRead => "listings:read",
            Self::ListingsWrite => "listings:write",
            Self::MediaWrite => "media:write",
            Self::SchedulingRead => "scheduling:read",
            Self::UsersRead => "users:read",
            Self::UsersWrite => "users:write",
            Self::WebhooksRead => "webhooks:read",
            Self::WebhooksWrite => "webhooks:write",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|scope| scope.as_str() == text)
    }
}

/// Where a key is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyStatus {
    /// Authenticates.
    Active,
    /// Replaced by a newer key but still authenticates until `expires_at`.
    Rotating,
    /// Revoked for good.
    Revoked,
    /// Its rotation overlap ended.
    Expired,
}

impl KeyStatus {
    /// The column value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Rotating => "rotating",
            Self::Revoked => "revoked",
            Self::Expired => "expired",
        }
    }

    /// Parses a column value.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Active, Self::Rotating, Self::Revoked, Self::Expired]
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

/// A stored key (never its plaintext).
#[derive(Clone, Debug)]
pub struct ApiKey {
    /// Its id.
    pub id: ApiKeyId,
    /// The agency it is bound to.
    pub agency_id: AgencyId,
    /// A descriptive name.
    pub name: String,
    /// Recognisable fragment of the plaintext, e.g. `sk_live_…a1b2`.
    pub hint: String,
    /// Plaintext format.
    pub format: KeyFormat,
    /// What it permits.
    pub scopes: Vec<Scope>,
    /// Live or sandbox.
    pub environment: Environment,
    /// Lifecycle state.
    pub status: KeyStatus,
    /// The user who created it (the acting user of its requests).
    pub created_by: Option<UserId>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When a rotation replaced it.
    pub rotation_started_at: Option<Timestamp>,
    /// After this instant it no longer authenticates.
    pub expires_at: Option<Timestamp>,
    /// When it was revoked.
    pub revoked_at: Option<Timestamp>,
    /// Per-endpoint budgets (requests per minute) replacing the defaults.
    pub rate_limit_overrides: BTreeMap<String, u32>,
}

/// Why a key that was found does not authenticate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyUnusable {
    /// It was revoked.
    Revoked,
    /// Its expiry passed.
    Expired,
}

impl ApiKey {
    /// Whether the key authenticates at `now`.
    pub fn check_usable(&self, now: Timestamp) -> Result<(), KeyUnusable> {
        match self.status {
            KeyStatus::Revoked => Err(KeyUnusable::Revoked),
            KeyStatus::Expired => Err(KeyUnusable::Expired),
            _ if self.revoked_at.is_some() => Err(KeyUnusable::Revoked),
            _ if self.expires_at.is_some_and(|at| at <= now) => Err(KeyUnusable::Expired),
            KeyStatus::Active | KeyStatus::Rotating => Ok(()),
        }
    }

    /// Whether the key holds `scope`.
    pub fn has_scope(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    /// The tenant its requests act for.
    pub fn tenant(&self) -> Tenant {
        Tenant::new(self.agency_id.clone(), self.environment)
    }
}

#[derive(sqlx::FromRow)]
struct ApiKeyRow {
    id: ApiKeyId,
    agency_id: AgencyId,
    name: String,
    key_hint: String,
    format: String,
    scopes: Json<Vec<String>>,
    is_sandbox: bool,
    status: String,
    created_by: Option<UserId>,
    created_at: Timestamp,
    rotation_started_at: Option<Timestamp>,
    expires_at: Option<Timestamp>,
    revoked_at: Option<Timestamp>,
    rate_limit_overrides: Json<BTreeMap<String, u32>>,
}

impl TryFrom<ApiKeyRow> for ApiKey {
    type Error = StorageError;

    fn try_from(row: ApiKeyRow) -> Result<Self> {
        let corrupt = |what: &str| StorageError::Corrupt(format!("api key {}: {what}", row.id));
        let format = KeyFormat::parse(&row.format).ok_or_else(|| corrupt("format"))?;
        let status = KeyStatus::parse(&row.status).ok_or_else(|| corrupt("status"))?;
        let scopes = row
            .scopes
            .0
            .iter()
            .map(|s| Scope::parse(s).ok_or_else(|| corrupt("scope")))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            id: row.id,
            agency_id: row.agency_id,
            name: row.name,
            hint: row.key_hint,
            format,
            scopes,
            environment: Environment::from_sandbox_flag(row.is_sandbox),
            status,
            created_by: row.created_by,
            created_at: row.created_at,
            rotation_started_at: row.rotation_started_at,
            expires_at: row.expires_at,
            revoked_at: row.revoked_at,
            rate_limit_overrides: row.rate_limit_overrides.0,
        })
    }
}

const KEY_COLUMNS: &str = "id, agency_id, name, key_hint, format, scopes, is_sandbox, status, \
     created_by, created_at, rotation_started_at, expires_at, revoked_at, rate_limit_overrides";

/// Records one event of a key's life in `api_key_audit`.
macro_rules! audit {
    ($executor:expr, $agency:expr, $key:expr, $action:expr, $detail:expr, $at:expr) => {
        sqlx::query(
            "insert into api_key_audit (id, agency_id, key_id, action, detail, at)
             values ($1, $2, $3, $4, $5, $6)",
        )
        .bind(format!("kau_{}", Ulid::generate()))
        .bind($agency)
        .bind($key)
        .bind($action)
        .bind($detail)
        .bind($at)
        .execute($executor)
    };
}

/// One event of a key's life.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyAuditEntry {
    /// The key.
    pub key_id: ApiKeyId,
    /// `issued`, `rotated`, `revoked` or `expired`.
    pub action: String,
    /// More about it (the replacement of a rotated key).
    pub detail: Option<String>,
    /// When.
    pub at: Timestamp,
}

/// How long a rotated key keeps authenticating beside its replacement.
pub const ROTATION_OVERLAP_SECONDS: i64 = 30 * 86_400;

/// A key's plaintext. Shown once; `Debug` never prints it.
pub struct Plaintext(String);

impl Plaintext {
    /// The plaintext, for the one response that shows it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Plaintext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Plaintext(<redacted>)")
    }
}

/// A key found by its plaintext, with what authentication needs from its agency.
#[derive(Clone, Debug)]
pub struct Credential {
    /// The key.
    pub key: ApiKey,
    /// The agency's budget overrides (budget name → requests per minute).
    pub agency_rate_limit_overrides: BTreeMap<String, u32>,
    /// The role of the user who created the key: a key of a platform
    /// identity (`super_admin`, `admin`) is an operator's key.
    pub creator_role: Option<crate::records::user::Role>,
}

/// A newly issued key and its plaintext.
#[derive(Debug)]
pub struct IssuedKey {
    /// The stored record.
    pub key: ApiKey,
    /// The plaintext, which is not stored anywhere.
    pub plaintext: Plaintext,
}

/// What to issue.
#[derive(Clone, Debug)]
pub struct NewApiKey {
    /// A descriptive name (required).
    pub name: String,
    /// Scopes; empty means the default scope.
    pub scopes: Vec<Scope>,
    /// Live or sandbox.
    pub environment: Environment,
    /// Plaintext format.
    pub format: KeyFormat,
    /// The acting user of the key's requests.
    pub created_by: Option<UserId>,
    /// Per-endpoint budgets.
    pub rate_limit_overrides: BTreeMap<String, u32>,
}

fn generate_plaintext(format: KeyFormat, environment: Environment, now: Timestamp) -> String {
    let prefix = format.prefix(environment);
    match format {
        KeyFormat::Sk => {
            let random: String = rand::rng()
                .sample_iter(Alphanumeric)
                .take(SK_RANDOM_LEN)
                .map(char::from)
                .collect();
            format!("{prefix}{random}")
        }
        KeyFormat::Ma => {
            // The ULID's 80 random bits come from the thread CSPRNG.
            let millis = u64::try_from(now.as_micros() / 1000).unwrap_or(0);
            let ulid = Ulid::from_parts(millis, rand::random::<u128>());
            format!("{prefix}{ulid}")
        }
    }
}

fn hint_of(plaintext: &str, format: KeyFormat, environment: Environment) -> String {
    let tail: String = plaintext
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{}…{tail}", format.prefix(environment))
}

/// API key repository; see [`Store::api_keys`].
pub struct ApiKeys<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// API keys: issuing and authenticating.
    pub fn api_keys(&self) -> ApiKeys<'_> {
        ApiKeys { store: self }
    }
}

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
                }
                expired
            }
        );
        Ok(expired.len() as u64)
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
            }
            row
        });
        row.ok_or(StorageError::NotFound(Entity::ApiKey))?
            .try_into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_have_the_shape_of_their_format() {
        let now = Timestamp::from_micros(1_790_000_000_000_000);
        for format in [KeyFormat::Sk, KeyFormat::Ma] {
            for environment in [Environment::Live, Environment::Sandbox] {
                let key = generate_plaintext(format, environment, now);
                assert_eq!(key_shape(&key), Some((format, environment)), "{key}");
            }
        }
        let sk = generate_plaintext(KeyFormat::Sk, Environment::Live, now);
        assert_eq!(sk.len(), "sk_live_".len() + SK_RANDOM_LEN);
        let ma = generate_plaintext(KeyFormat::Ma, Environment::Sandbox, now);
        assert!(ma.starts_with("ma_test_ak_") && ma.len() == 11 + 26);
    }

    #[test]
    fn malformed_strings_have_no_shape() {
        for bad in [
            "",
            "sk_live_",
            "sk_live_short",
            "sk_prod_abcdefghijklmnopqrstuvwxyz012345",
            "sk_live_abcdefghijklmnopqrstuvwx-yz012345",
            "ma_live_ak_NOTAULID",
            "ma_live_ak_01ARZ3NDEKTSV4RRFFQ69G5FAVX",
            "Bearer sk_live_abcdefghijklmnopqrstuvwxyz012345",
        ] {
            assert_eq!(key_shape(bad), None, "{bad}");
        }
    }

    #[test]
    fn hint_shows_prefix_and_last_four_only() {
        let hint = hint_of(
            "sk_live_abcdefghijklmnopqrstuvwxyz012345",
            KeyFormat::Sk,
            Environment::Live,
        );
        assert_eq!(hint, "sk_live_…2345");
    }

    #[test]
    fn usability_follows_status_and_expiry() {
        let now = Timestamp::from_micros(1_000_000);
        let mut key = ApiKey {
            id: ApiKeyId::generate(),
            agency_id: AgencyId::generate(),
            name: "k".into(),
            hint: "h".into(),
            format: KeyFormat::Sk,
            scopes: vec![Scope::ListingsRead],
            environment: Environment::Live,
            status: KeyStatus::Active,
            created_by: None,
            created_at: now,
            rotation_started_at: None,
            expires_at: None,
            revoked_at: None,
            rate_limit_overrides: BTreeMap::new(),
        };
        assert_eq!(key.check_usable(now), Ok(()));
        key.status = KeyStatus::Rotating;
        key.expires_at = Some(now.plus_seconds(1));
        assert_eq!(key.check_usable(now), Ok(()));
        assert_eq!(
            key.check_usable(now.plus_seconds(1)),
            Err(KeyUnusable::Expired)
        );
        key.status = KeyStatus::Revoked;
        assert_eq!(key.check_usable(now), Err(KeyUnusable::Revoked));
    }
}
