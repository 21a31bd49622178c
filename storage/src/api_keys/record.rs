//! A key as stored: its status and record, why it may not be used, what
//! issuing one takes and gives back, and the audit of its life.

use std::collections::BTreeMap;

use sqlx::types::Json;

use super::format::{KeyFormat, Plaintext};
use super::scope::Scope;
use crate::ids::{AgencyId, ApiKeyId, UserId};
use crate::{Environment, Result, StorageError, Tenant, Timestamp};

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
    /// When it last authenticated a request (to the minute).
    pub last_used_at: Option<Timestamp>,
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
pub(super) struct ApiKeyRow {
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
    last_used_at: Option<Timestamp>,
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
            last_used_at: row.last_used_at,
        })
    }
}

pub(super) const KEY_COLUMNS: &str = "id, agency_id, name, key_hint, format, scopes, is_sandbox, status, \
     created_by, created_at, rotation_started_at, expires_at, revoked_at, rate_limit_overrides, last_used_at";

/// Records one event of a key's life in `api_key_audit`.
macro_rules! audit {
    ($executor:expr, $agency:expr, $key:expr, $action:expr, $detail:expr, $at:expr) => {
        sqlx::query(
            "insert into api_key_audit (id, agency_id, key_id, action, detail, at)
             values ($1, $2, $3, $4, $5, $6)",
        )
        .bind(format!("kau_{}", ulid::Ulid::generate()))
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
pub(super) use audit;

/// How long a rotated key keeps authenticating beside its replacement.
pub const ROTATION_OVERLAP_SECONDS: i64 = 30 * 86_400;

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
