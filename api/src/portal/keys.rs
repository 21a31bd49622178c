//! `/settings/keys`: the agency's API keys in the chosen environment, with
//! create (plaintext shown once), rotate and revoke, and the audit log.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use storage::api_keys::{ApiKey, KeyAuditEntry, Scope};

use super::{Chrome, PortalSession, page, unavailable, when, when_or_dash};
use crate::state::AppState;

/// How many audit records the page shows (newest).
const AUDIT_SHOWN: usize = 50;

pub(super) struct KeyRow {
    pub id: String,
    pub name: String,
    pub hint: String,
    pub scopes: String,
    pub status: &'static str,
    pub created: String,
    pub last_used: String,
    pub rotating_until: String,
    pub usable: bool,
    pub active: bool,
}

impl KeyRow {
    fn new(key: &ApiKey, now: storage::Timestamp) -> Self {
        let usable = key.check_usable(now).is_ok();
        Self {
            id: key.id.to_string(),
            name: key.name.clone(),
            hint: key.hint.clone(),
            scopes: key
                .scopes
                .iter()
                .map(|scope| scope.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            status: key.status.as_str(),
            created: when(key.created_at),
            last_used: when_or_dash(key.last_used_at),
            rotating_until: if key.rotation_started_at.is_some() {
                when_or_dash(key.expires_at)
            } else {
                "–".to_owned()
            },
            usable,
            active: usable && key.status == storage::api_keys::KeyStatus::Active,
        }
    }
}

pub(super) struct AuditRow {
    pub key: String,
    pub action: String,
    pub detail: String,
    pub at: String,
}

impl From<&KeyAuditEntry> for AuditRow {
    fn from(entry: &KeyAuditEntry) -> Self {
        Self {
            key: entry.key_id.to_string(),
            action: entry.action.clone(),
            detail: entry.detail.clone().unwrap_or_default(),
            at: when(entry.at),
        }
    }
}

#[derive(Template)]
#[template(path = "portal/keys.html")]
struct KeysPage {
    chrome: Chrome,
    keys: Vec<KeyRow>,
    audit: Vec<AuditRow>,
    scopes: Vec<&'static str>,
}

/// The agency's keys of the session's chosen environment.
pub(super) async fn keys_of(
    state: &AppState,
    portal: &PortalSession,
) -> Result<Vec<ApiKey>, storage::StorageError> {
    let agency = &portal.session.user.agency_id;
    Ok(state
        .store()
        .api_keys()
        .list(agency)
        .await?
        .into_iter()
        .filter(|key| key.environment == portal.environment)
        .collect())
}

/// `GET /settings/keys`.
pub(crate) async fn page_handler(State(state): State<AppState>, portal: PortalSession) -> Response {
    let chrome = portal.chrome(&state, "keys");
    if !chrome.is_admin {
        return page(
            StatusCode::OK,
            &KeysPage {
                chrome,
                keys: Vec::new(),
                audit: Vec::new(),
                scopes: Vec::new(),
            },
        );
    }
    let now = state.store().clock().now();
    let keys = match keys_of(&state, &portal).await {
        Ok(keys) => keys,
        Err(err) => return unavailable(&err),
    };
    let audit = match state
        .store()
        .api_keys()
        .audit_log(&portal.session.user.agency_id)
        .await
    {
        Ok(audit) => audit,
        Err(err) => return unavailable(&err),
    };
    let ids: std::collections::HashSet<_> = keys.iter().map(|key| key.id.clone()).collect();
    let audit = audit
        .iter()
        .rev()
        .filter(|entry| ids.contains(&entry.key_id))
        .take(AUDIT_SHOWN)
        .map(AuditRow::from)
        .collect();
    page(
        StatusCode::OK,
        &KeysPage {
            chrome,
            keys: keys.iter().map(|key| KeyRow::new(key, now)).collect(),
            audit,
            scopes: Scope::ALL.iter().map(|scope| scope.as_str()).collect(),
        },
    )
}
