//! `admin webhook-endpoints`: an operator's view of an agency's webhook
//! endpoints, changed under the same rules as the `/webhooks/endpoints`
//! routes so an operator cannot store what the API would refuse.

use clap::Args;
use platform::webhooks::AddressPolicy;
use serde_json::{Value, json};
use storage::{Environment, Tenant};

use super::error::AdminError;
use super::open::existing_agency;
use crate::config::StorageArgs;
use crate::routes::webhooks::endpoint_rules::EndpointEdit;
use crate::routes::webhooks::wire::EndpointOut;

/// What `admin webhook-endpoints` does.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum WebhookAction {
    /// The agency's endpoints.
    List,
    /// One endpoint.
    Get,
    /// Change its URL, event types, name, environment or signature scheme, under the checks of
    /// `PATCH /webhooks/endpoints/{id}`.
    Update,
    /// Disable one (reason `disabled_by_owner`).
    Disable,
    /// Re-enable one and reset its failure count.
    Enable,
    /// Replace its signing secret; the new one is printed once.
    RotateSecret,
    /// Delete one.
    Delete,
    /// Its latest deliveries with their attempts.
    Deliveries,
}

/// `admin webhook-endpoints`.
#[derive(Debug, Args)]
pub struct WebhookEndpoints {
    #[command(flatten)]
    storage: StorageArgs,
    /// What to do.
    #[arg(value_enum)]
    action: WebhookAction,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The agency's sandbox endpoints instead of its live ones.
    #[arg(long)]
    sandbox: bool,
    /// The endpoint (whe_…); every action but `list` needs it.
    #[arg(long)]
    endpoint: Option<String>,
    /// What `update` changes.
    #[command(flatten)]
    update: EndpointUpdate,
    /// `rotate-secret`: seconds the replaced secret keeps signing deliveries
    /// alongside the new one (0: it stops at once; at most 604800, 7 days).
    #[arg(long, default_value_t = storage::webhooks::DEFAULT_SECRET_OVERLAP_SECONDS)]
    previous_secret_expires_in: i64,
}

/// The flags of `admin webhook-endpoints update`; other actions refuse them.
#[derive(Debug, Args)]
pub struct EndpointUpdate {
    /// New HTTPS URL; its host must resolve to addresses deliveries may reach.
    #[arg(long)]
    url: Option<String>,
    /// An event type (canonical name or alias) to receive instead of the
    /// current ones; repeatable.
    #[arg(long = "event-type")]
    event_type: Vec<String>,
    /// Comma-separated event types, added to any --event-type.
    #[arg(long = "event-types", value_delimiter = ',')]
    event_types: Vec<String>,
    /// Receive every event type, including types added later.
    #[arg(long, conflicts_with_all = ["event_type", "event_types"])]
    all_event_types: bool,
    /// New label, at most 200 characters; an empty one clears it.
    #[arg(long)]
    name: Option<String>,
    /// live, sandbox or both ("Live events only", "Sandbox events only",
    /// "Both"); a --sandbox endpoint hears sandbox events only.
    #[arg(long)]
    environment: Option<String>,
    /// How deliveries are signed: spec (X-Webhook-Signature) or
    /// standard_webhooks (webhook-id, webhook-timestamp, webhook-signature).
    #[arg(long)]
    signature_scheme: Option<String>,
    /// Deliveries per hour (1 to 1000000); a change releases what the old
    /// budget held back.
    #[arg(long)]
    hourly_budget: Option<i64>,
    /// No hourly budget at all.
    #[arg(long, conflicts_with = "hourly_budget")]
    no_hourly_budget: bool,
    /// none, or listing: events about one listing delivered in commit order.
    #[arg(long)]
    ordering: Option<String>,
    /// Accept URLs on private, loopback and link-local networks, as
    /// `api serve --webhook-allow-private-networks` does; without it the
    /// strict production policy applies.
    #[arg(long, env = "WEBHOOK_ALLOW_PRIVATE_NETWORKS")]
    webhook_allow_private_networks: bool,
}

impl EndpointUpdate {
    /// The change asked for.
    fn edit(&self) -> EndpointEdit {
        let types: Vec<String> = self
            .event_type
            .iter()
            .chain(&self.event_types)
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect();
        let asked_types = !self.event_type.is_empty() || !self.event_types.is_empty();
        EndpointEdit {
            url: self.url.clone(),
            // Flags given but all blank reach the check as an empty list,
            // which it refuses, rather than being dropped silently.
            event_types: if self.all_event_types {
                Some(None)
            } else if asked_types {
                Some(Some(types))
            } else {
                None
            },
            name: self.name.clone().map(Some),
            environment: self.environment.clone(),
            signature_scheme: self.signature_scheme.clone(),
            hourly_budget: if self.no_hourly_budget {
                Some(None)
            } else {
                self.hourly_budget.map(|budget| Some(budget.into()))
            },
            ordering: self.ordering.clone(),
        }
    }

    /// The address policy the URL is checked under.
    fn policy(&self) -> AddressPolicy {
        AddressPolicy {
            allow_private_networks: self.webhook_allow_private_networks,
        }
    }
}

/// An endpoint as the API shows it (never its secret).
fn endpoint_json(endpoint: storage::webhooks::WebhookEndpoint) -> Value {
    json!(EndpointOut::from(endpoint))
}

/// `admin webhook-endpoints`.
pub(super) async fn webhook_endpoints(args: WebhookEndpoints) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let environment = if args.sandbox {
        Environment::Sandbox
    } else {
        Environment::Live
    };
    let tenant = Tenant::new(agency, environment);
    let webhooks = store.webhooks();
    let edit = args.update.edit();
    if !matches!(args.action, WebhookAction::Update) && !edit.is_empty() {
        return Err(AdminError::new(
            "validation.failed",
            "--url, --event-type(s), --name, --environment, --signature-scheme, --hourly-budget and --ordering only go with update",
        ));
    }
    if let WebhookAction::List = args.action {
        let mut items = Vec::new();
        let mut after = None;
        loop {
            let page = webhooks.list(&tenant, after.as_ref(), 200).await?;
            let next = page.next;
            items.extend(page.items.into_iter().map(endpoint_json));
            match next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        return Ok(json!({ "items": items }));
    }
    let id = args
        .endpoint
        .ok_or_else(|| AdminError::new("validation.failed", "--endpoint is required"))?;
    let not_found = || AdminError::new("webhook_endpoint_not_found", "no such webhook endpoint");
    let id = storage::ids::WebhookEndpointId::parse(&id).ok_or_else(not_found)?;
    let reason = storage::webhooks::MANUALLY_DISABLED_REASON;
    Ok(match args.action {
        WebhookAction::List => unreachable!("handled above"),
        WebhookAction::Get => {
            let endpoint = webhooks.get(&tenant, &id).await?.ok_or_else(not_found)?;
            json!({ "endpoint": endpoint_json(endpoint) })
        }
        WebhookAction::Update => {
            if edit.is_empty() {
                return Err(AdminError::new(
                    "validation.failed",
                    "update needs at least one of --url, --event-type, --event-types, --all-event-types, --name, --environment, --signature-scheme, --hourly-budget, --no-hourly-budget, --ordering",
                ));
            }
            // As the route: an unknown endpoint is not found before any
            // value is judged.
            webhooks.get(&tenant, &id).await?.ok_or_else(not_found)?;
            let changes = edit.check(args.update.policy(), &tenant).await?;
            let (endpoint, released) = webhooks
                .update(&tenant, &id, changes)
                .await?
                .ok_or_else(not_found)?;
            let released_count = released.len();
            if !released.is_empty() {
                let platform = super::open::open_platform(&args.storage).await?;
                platform::webhooks::offer_released(&platform.queue, released).await;
            }
            json!({ "endpoint": endpoint_json(endpoint), "released": released_count })
        }
        WebhookAction::Disable | WebhookAction::Enable => {
            let enable = matches!(args.action, WebhookAction::Enable);
            let endpoint = webhooks
                .set_enabled(&tenant, &id, enable, reason)
                .await?
                .ok_or_else(not_found)?;
            json!({ "endpoint": endpoint_json(endpoint) })
        }
        WebhookAction::RotateSecret => {
            let overlap = args.previous_secret_expires_in;
            if !(0..=storage::webhooks::MAX_SECRET_OVERLAP_SECONDS).contains(&overlap) {
                return Err(AdminError::new(
                    "validation.failed",
                    "--previous-secret-expires-in must be 0 to 604800 seconds (7 days)",
                ));
            }
            let (endpoint, secret) = webhooks
                .rotate_secret(&tenant, &id, overlap)
                .await?
                .ok_or_else(not_found)?;
            json!({ "endpoint": endpoint_json(endpoint), "secret": secret })
        }
        WebhookAction::Delete => {
            if !webhooks.delete(&tenant, &id).await? {
                return Err(not_found());
            }
            json!({ "endpoint": { "id": id, "deleted": true } })
        }
        WebhookAction::Deliveries => {
            webhooks.get(&tenant, &id).await?.ok_or_else(not_found)?;
            let page = webhooks.deliveries(&id, None, 50).await?;
            let ids: Vec<_> = page
                .items
                .iter()
                .map(|delivery| delivery.id.clone())
                .collect();
            let mut attempts_of = webhooks.attempts_of(&ids).await?;
            let mut items = Vec::new();
            for delivery in page.items {
                let attempts = attempts_of.remove(&delivery.id).unwrap_or_default();
                items.push(json!({
                    "id": delivery.id,
                    "event_id": delivery.event_id,
                    "event_type": delivery.event_type,
                    "kind": delivery.kind.as_str(),
                    "status": delivery.status.as_str(),
                    "attempts": attempts.iter().map(|a| json!({
                        "attempt": a.attempt,
                        "started_at": a.started_at.to_rfc3339(),
                        "outcome": a.outcome,
                        "status_code": a.status_code,
                        "duration_ms": a.duration_ms,
                        "response_excerpt": a.response_excerpt,
                        "error": a.error,
                    })).collect::<Vec<_>>(),
                }));
            }
            json!({ "items": items, "total": page.total })
        }
    })
}
