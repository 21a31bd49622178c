//! `admin create-key`, `list-keys`, `rotate-key` and `revoke-key`: an
//! agency's API keys, whose plaintext is shown only when one is issued.

use clap::Args;
use serde_json::{Value, json};
use storage::Environment;
use storage::api_keys::{KeyFormat, NewApiKey, Scope};
use storage::ids::ApiKeyId;

use super::budgets::parse_budgets;
use super::error::AdminError;
use super::open::existing_agency;
use crate::config::StorageArgs;

/// `admin create-key`.
#[derive(Debug, Args)]
pub struct CreateKey {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// A descriptive name.
    #[arg(long)]
    name: String,
    /// Comma-separated scopes; default listings:read.
    #[arg(long, value_delimiter = ',')]
    scopes: Vec<String>,
    /// Issue a sandbox key (sk_test_ / ma_test_ak_).
    #[arg(long)]
    sandbox: bool,
    /// Plaintext format: sk (sk_live_…) or ma (ma_live_ak_<ULID>).
    #[arg(long, default_value = "sk", value_parser = ["sk", "ma"])]
    format: String,
    /// ENDPOINT=PER_MINUTE, replacing that endpoint's per-key budget (repeatable).
    #[arg(long = "rate-limit")]
    rate_limits: Vec<String>,
}

/// `admin list-keys`, `rotate-key`, `revoke-key`.
#[derive(Debug, Args)]
pub struct KeyCommand {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The key id (key_…); required to rotate or revoke.
    #[arg(long)]
    key: Option<String>,
}

/// `admin create-key`.
pub(super) async fn create_key(args: CreateKey) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let scopes = args
        .scopes
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| {
            Scope::parse(s).ok_or_else(|| {
                let names: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
                AdminError::new(
                    "validation.failed",
                    format!("unknown scope {s}; scopes are {}", names.join(", ")),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let format = KeyFormat::parse(&args.format)
        .ok_or_else(|| AdminError::new("validation.failed", "format must be sk or ma"))?;
    let rate_limit_overrides = parse_budgets(
        "--rate-limit",
        &args.rate_limits,
        crate::endpoints::is_budgeted_name,
    )?;
    // Keys minted by an operator act as the agency's owner.
    let owner = store.agencies().owner(&agency).await?;
    let issued = store
        .api_keys()
        .issue(
            &agency,
            NewApiKey {
                name: args.name,
                scopes,
                environment: Environment::from_sandbox_flag(args.sandbox),
                format,
                created_by: Some(owner.id),
                rate_limit_overrides,
            },
        )
        .await?;
    Ok(json!({"key_id": issued.key.id, "key": issued.plaintext.expose()}))
}

fn key_json(key: &storage::api_keys::ApiKey) -> Value {
    json!({
        "key_id": key.id,
        "name": key.name,
        "hint": key.hint,
        "format": key.format.as_str(),
        "scopes": key.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "sandbox": key.environment.is_sandbox(),
        "status": key.status.as_str(),
        "created_by": key.created_by,
        "created_at": key.created_at.to_rfc3339(),
        "rotation_started_at": key.rotation_started_at.map(|t| t.to_rfc3339()),
        "expires_at": key.expires_at.map(|t| t.to_rfc3339()),
        "revoked_at": key.revoked_at.map(|t| t.to_rfc3339()),
    })
}

fn key_id_of(args: &KeyCommand) -> Result<ApiKeyId, AdminError> {
    let text = args
        .key
        .as_deref()
        .ok_or_else(|| AdminError::new("validation.failed", "--key is required"))?;
    ApiKeyId::parse(text).ok_or_else(|| AdminError::new("not_found", "no such key"))
}

/// `admin list-keys`.
pub(super) async fn list_keys(args: KeyCommand) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let keys = store.api_keys().list(&agency).await?;
    let audit = store.api_keys().audit_log(&agency).await?;
    Ok(json!({
        "items": keys.iter().map(key_json).collect::<Vec<_>>(),
        "audit": audit.iter().map(|entry| json!({
            "key_id": entry.key_id,
            "action": entry.action,
            "detail": entry.detail,
            "at": entry.at.to_rfc3339(),
        })).collect::<Vec<_>>(),
    }))
}

/// `admin rotate-key`.
pub(super) async fn rotate_key(args: KeyCommand) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let id = key_id_of(&args)?;
    let (old, new) = store.api_keys().rotate(&agency, &id).await?;
    Ok(json!({
        "key_id": new.key.id,
        "key": new.plaintext.expose(),
        "rotated": key_json(&old),
    }))
}

/// `admin revoke-key`.
pub(super) async fn revoke_key(args: KeyCommand) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let id = key_id_of(&args)?;
    let key = store.api_keys().revoke(&agency, &id).await?;
    if let Some(url) = args.storage.redis() {
        // Every replica forgets it now, not when its cache entry ages out.
        if let Err(err) = crate::revocation::publish(url, &key.id).await {
            tracing::warn!(%err, "could not announce the revocation; replicas drop the key within 30 seconds");
        }
    }
    Ok(json!({ "key_id": key.id, "status": key.status.as_str() }))
}
