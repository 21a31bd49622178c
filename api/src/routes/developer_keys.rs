//! API keys in the in-product developer settings, behind a session: list (never
//! a plaintext), the audit log, create (plaintext once), rotate (30 days of
//! overlap) and revoke (at once, on every replica sharing Redis).
//!
//! Agency administrators manage their own agency's keys. Platform identities
//! (`super_admin`, `admin`) name any agency with `agency_id`; a key they mint
//! acts as that agency's owner, exactly like the agency's own keys.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use storage::api_keys::{ApiKey, KeyAuditEntry, KeyFormat, NewApiKey, Scope};
use storage::ids::{AgencyId, ApiKeyId};
use storage::page::Position;
use storage::{Environment, StorageError};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::pagination::{CursorScope, PageOut, page_limit, page_of_all};
use crate::principal::SessionPrincipal;
use crate::state::AppState;

/// `agency_id` for platform identities acting for another agency.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AgencyQuery {
    /// The agency (platform identities only; default the caller's own).
    pub agency_id: Option<String>,
}

/// A page of the agency's keys or key events.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AgencyPageQuery {
    /// The agency (platform identities only; default the caller's own).
    pub agency_id: Option<String>,
    /// 1 to 200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// A key as the settings page shows it: never its plaintext or hash.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct KeyOut {
    /// Its id.
    pub id: String,
    /// The agency it belongs to.
    pub agency_id: String,
    /// Its name.
    pub name: String,
    /// Enough to recognise it (`sk_live_…a1b2`), not to use it.
    pub hint: String,
    /// `sk` or `ma`.
    pub format: String,
    /// Its scopes.
    pub scopes: Vec<String>,
    /// `live` or `sandbox`.
    pub environment: String,
    /// `active`, `rotating`, `revoked` or `expired`.
    pub status: String,
    /// The user its requests act as.
    pub created_by: Option<String>,
    /// RFC 3339 timestamps.
    pub created_at: String,
    /// When a rotation started.
    pub rotation_started_at: Option<String>,
    /// When a rotating key stops authenticating.
    pub expires_at: Option<String>,
    /// When it was revoked.
    pub revoked_at: Option<String>,
    /// Per-endpoint budgets replacing the defaults.
    pub rate_limit_overrides: BTreeMap<String, u32>,
}

impl From<ApiKey> for KeyOut {
    fn from(key: ApiKey) -> Self {
        Self {
            id: key.id.to_string(),
            agency_id: key.agency_id.to_string(),
            name: key.name,
            hint: key.hint,
            format: key.format.as_str().to_owned(),
            scopes: key.scopes.iter().map(|s| s.as_str().to_owned()).collect(),
            environment: key.environment.as_str().to_owned(),
            status: key.status.as_str().to_owned(),
            created_by: key.created_by.map(|id| id.to_string()),
            created_at: key.created_at.to_rfc3339(),
            rotation_started_at: key.rotation_started_at.map(|t| t.to_rfc3339()),
            expires_at: key.expires_at.map(|t| t.to_rfc3339()),
            revoked_at: key.revoked_at.map(|t| t.to_rfc3339()),
            rate_limit_overrides: key.rate_limit_overrides,
        }
    }
}

/// One audit record.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditOut {
    /// The key.
    pub key_id: String,
    /// `issued`, `rotated`, `revoked` or `expired`.
    pub action: String,
    /// The replacement of a rotation, or who issued the key.
    pub detail: Option<String>,
    /// When, RFC 3339.
    pub at: String,
}

impl From<KeyAuditEntry> for AuditOut {
    fn from(entry: KeyAuditEntry) -> Self {
        Self {
            key_id: entry.key_id.to_string(),
            action: entry.action,
            detail: entry.detail,
            at: entry.at.to_rfc3339(),
        }
    }
}

/// Body of key creation.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyIn {
    /// A descriptive name, 1 to 100 characters.
    #[schema(min_length = 1, max_length = 100, pattern = r"[^\s\x85]")]
    pub name: String,
    /// Scopes; default `listings:read`.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// `live` (default) or `sandbox`.
    pub environment: Option<String>,
    /// `sk` (default) or `ma`.
    pub format: Option<String>,
    /// Per-endpoint budgets per minute, by endpoint name.
    #[serde(default)]
    pub rate_limit_overrides: BTreeMap<String, u32>,
    /// The agency (platform identities only; default the caller's own).
    pub agency_id: Option<String>,
}

/// A key with its plaintext, shown this once.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct IssuedKeyOut {
    /// The key.
    pub key: KeyOut,
    /// The plaintext; store it now, it is never shown again.
    pub secret: String,
    /// For a rotation: the old key, now `rotating` until its `expires_at`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotated: Option<KeyOut>,
}

/// The agency a key request acts on: the caller's own, or (for platform
/// identities only) the one named. The caller must administer it.
async fn managed_agency(
    state: &AppState,
    principal: &SessionPrincipal,
    requested: Option<&str>,
) -> Result<AgencyId, ApiError> {
    let user = principal.user();
    if !user.role.is_administrator() {
        return Err(ApiError::Forbidden(
            "Only an agency administrator manages API keys.".to_owned(),
        ));
    }
    let Some(requested) = requested else {
        return Ok(user.agency_id.clone());
    };
    let agency = AgencyId::parse(requested).ok_or(ApiError::NotFound(Resource::Agency))?;
    if agency == user.agency_id {
        return Ok(agency);
    }
    if !user.role.is_platform() {
        return Err(ApiError::Forbidden(
            "Only platform identities act for another agency.".to_owned(),
        ));
    }
    match state.store().agencies().get(&agency).await {
        Ok(_) => Ok(agency),
        Err(StorageError::NotFound(_)) => Err(ApiError::NotFound(Resource::Agency)),
        Err(err) => Err(err.into()),
    }
}

fn key_id(text: &str) -> Result<ApiKeyId, ApiError> {
    ApiKeyId::parse(text).ok_or(ApiError::NotFound(Resource::ApiKey))
}

/// The agency's keys (never a plaintext).
#[utoipa::path(
    get,
    path = "/agency/api-keys",
    tag = "developer",
    operation_id = "list_api_keys",
    params(AgencyPageQuery),
    responses(
        (status = 200, description = "A page of the keys, oldest first", body = PageOut<KeyOut>),
        (status = 401, description = "auth.session_required", body = ErrorEnvelope),
        (status = 403, description = "permission_denied: not an administrator of the agency", body = ErrorEnvelope),
        (status = 404, description = "agency_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: limit; invalid_cursor", body = ErrorEnvelope),
    ),
    security(("session_cookie" = []))
)]
pub(crate) async fn list_keys(
    State(state): State<AppState>,
    principal: SessionPrincipal,
    ApiQuery(query): ApiQuery<AgencyPageQuery>,
) -> Result<Json<PageOut<KeyOut>>, ApiError> {
    let limit = page_limit(query.limit)?;
    let agency = managed_agency(&state, &principal, query.agency_id.as_deref()).await?;
    let scope = agency_scope("api_keys", &agency);
    let after = state
        .cursors()
        .open_param(&scope, query.cursor.as_deref())?;
    let keys = state.store().api_keys().list(&agency).await?;
    let position = |key: &ApiKey| Position::after(key.created_at, key.id.as_str());
    let page = page_of_all(keys, position, after.as_ref(), limit);
    Ok(Json(state.cursors().envelope(&scope, page, KeyOut::from)))
}

/// The cursor scope of an agency's key collections (every environment).
fn agency_scope(collection: &'static str, agency: &AgencyId) -> CursorScope {
    CursorScope {
        collection,
        tenant: storage::Tenant::new(agency.clone(), Environment::Live),
        filters: String::new(),
    }
}

/// Every key event of the agency: issued, rotated, revoked, expired.
#[utoipa::path(
    get,
    path = "/agency/api-keys/audit",
    tag = "developer",
    operation_id = "list_api_key_audit",
    params(AgencyPageQuery),
    responses(
        (status = 200, description = "A page of the audit log, oldest first", body = PageOut<AuditOut>),
        (status = 401, description = "auth.session_required", body = ErrorEnvelope),
        (status = 403, description = "permission_denied", body = ErrorEnvelope),
        (status = 404, description = "agency_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: limit; invalid_cursor", body = ErrorEnvelope),
    ),
    security(("session_cookie" = []))
)]
pub(crate) async fn key_audit(
    State(state): State<AppState>,
    principal: SessionPrincipal,
    ApiQuery(query): ApiQuery<AgencyPageQuery>,
) -> Result<Json<PageOut<AuditOut>>, ApiError> {
    let limit = page_limit(query.limit)?;
    let agency = managed_agency(&state, &principal, query.agency_id.as_deref()).await?;
    let scope = agency_scope("api_key_audit", &agency);
    let after = state
        .cursors()
        .open_param(&scope, query.cursor.as_deref())?;
    let entries = state.store().api_keys().audit_log(&agency).await?;
    // The log is kept in order; a record's place in it is its position.
    let numbered: Vec<(usize, KeyAuditEntry)> = entries.into_iter().enumerate().collect();
    let position = |(place, entry): &(usize, KeyAuditEntry)| Position {
        created_at: entry.at.as_micros(),
        id: format!("{place:012}"),
    };
    let page = page_of_all(numbered, position, after.as_ref(), limit);
    Ok(Json(state.cursors().envelope(
        &scope,
        page,
        |(_, entry)| AuditOut::from(entry),
    )))
}

/// Parses the body's choices, naming every bad field.
fn new_key_of(body: KeyIn) -> Result<NewApiKey, ApiError> {
    let mut problems = BTreeMap::new();
    let mut scopes = Vec::new();
    for (index, name) in body.scopes.iter().enumerate() {
        match Scope::parse(name.trim()) {
            Some(scope) => scopes.push(scope),
            None => {
                problems.insert(
                    format!("scopes[{index}]"),
                    "is not a known scope".to_owned(),
                );
            }
        }
    }
    let environment = match body.environment.as_deref() {
        None | Some("live") => Environment::Live,
        Some("sandbox") => Environment::Sandbox,
        Some(_) => {
            problems.insert(
                "environment".to_owned(),
                "must be live or sandbox".to_owned(),
            );
            Environment::Live
        }
    };
    let format = match body.format.as_deref() {
        None => KeyFormat::Sk,
        Some(text) => KeyFormat::parse(text).unwrap_or_else(|| {
            problems.insert("format".to_owned(), "must be sk or ma".to_owned());
            KeyFormat::Sk
        }),
    };
    for (name, limit) in &body.rate_limit_overrides {
        if !crate::endpoints::is_budgeted_name(name) {
            problems.insert(
                format!("rate_limit_overrides.{name}"),
                "is not an endpoint name".to_owned(),
            );
        } else if *limit == 0 {
            problems.insert(
                format!("rate_limit_overrides.{name}"),
                "must be at least 1".to_owned(),
            );
        }
    }
    if !problems.is_empty() {
        return Err(ApiError::Validation(problems));
    }
    Ok(NewApiKey {
        name: body.name,
        scopes,
        environment,
        format,
        created_by: None,
        rate_limit_overrides: body.rate_limit_overrides,
    })
}

/// Creates a key; its plaintext is in this answer only.
#[utoipa::path(
    post,
    path = "/agency/api-keys",
    tag = "developer",
    operation_id = "create_api_key",
    request_body = KeyIn,
    responses(
        (status = 201, description = "The key and its plaintext, shown once", body = IssuedKeyOut),
        (status = 401, description = "auth.session_required", body = ErrorEnvelope),
        (status = 403, description = "auth.csrf_failed or permission_denied", body = ErrorEnvelope),
        (status = 404, description = "agency_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed naming each bad field", body = ErrorEnvelope),
    ),
    security(("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn create_key(
    State(state): State<AppState>,
    principal: SessionPrincipal,
    ApiJson(body): ApiJson<KeyIn>,
) -> Result<(StatusCode, Json<IssuedKeyOut>), ApiError> {
    let agency = managed_agency(&state, &principal, body.agency_id.as_deref()).await?;
    let mut new = new_key_of(body)?;
    let caller = principal.user();
    // A key acts as its creator; minted for another agency, as that agency's owner.
    new.created_by = Some(if caller.agency_id == agency {
        caller.id.clone()
    } else {
        state.store().agencies().owner(&agency).await?.id
    });
    let issued = state
        .store()
        .api_keys()
        .issue_by(&agency, new, &caller.id)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(IssuedKeyOut {
            secret: issued.plaintext.expose().to_owned(),
            key: issued.key.into(),
            rotated: None,
        }),
    ))
}

/// Rotates a key: a new secret now, the old one still accepted for 30 days.
#[utoipa::path(
    post,
    path = "/agency/api-keys/{key_id}/rotate",
    tag = "developer",
    operation_id = "rotate_api_key",
    params(("key_id" = String, Path, description = "The key (key_…)"), AgencyQuery),
    responses(
        (status = 200, description = "The new key with its plaintext, and the old one as it now is", body = IssuedKeyOut),
        (status = 401, description = "auth.session_required", body = ErrorEnvelope),
        (status = 403, description = "auth.csrf_failed or permission_denied", body = ErrorEnvelope),
        (status = 404, description = "api_key_not_found, also for another agency's key", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: only an active key rotates", body = ErrorEnvelope),
    ),
    security(("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn rotate_key(
    State(state): State<AppState>,
    principal: SessionPrincipal,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<AgencyQuery>,
) -> Result<Json<IssuedKeyOut>, ApiError> {
    let agency = managed_agency(&state, &principal, query.agency_id.as_deref()).await?;
    let (old, new) = state
        .store()
        .api_keys()
        .rotate(&agency, &key_id(&id)?)
        .await?;
    tracing::info!(key_id = %old.id, replacement = %new.key.id, by = %principal.user().id, "key rotated");
    Ok(Json(IssuedKeyOut {
        secret: new.plaintext.expose().to_owned(),
        key: new.key.into(),
        rotated: Some(old.into()),
    }))
}

/// Revokes a key at once, in every API process.
#[utoipa::path(
    delete,
    path = "/agency/api-keys/{key_id}",
    tag = "developer",
    operation_id = "revoke_api_key",
    params(("key_id" = String, Path, description = "The key (key_…)"), AgencyQuery),
    responses(
        (status = 200, description = "The key, revoked", body = KeyOut),
        (status = 401, description = "auth.session_required", body = ErrorEnvelope),
        (status = 403, description = "auth.csrf_failed or permission_denied", body = ErrorEnvelope),
        (status = 404, description = "api_key_not_found, also for another agency's key", body = ErrorEnvelope),
    ),
    security(("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn revoke_key(
    State(state): State<AppState>,
    principal: SessionPrincipal,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<AgencyQuery>,
) -> Result<Json<KeyOut>, ApiError> {
    let agency = managed_agency(&state, &principal, query.agency_id.as_deref()).await?;
    let key = state
        .store()
        .api_keys()
        .revoke(&agency, &key_id(&id)?)
        .await?;
    crate::revocation::announce(&state, &key.id).await;
    tracing::info!(key_id = %key.id, by = %principal.user().id, "key revoked");
    Ok(Json(key.into()))
}
