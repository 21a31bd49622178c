//! `api admin …`: operator commands. Each takes the storage settings of `serve`
//! (`--data-dir`, `DATABASE_URL`), works while the server runs, and prints one
//! JSON object on stdout. Failures print `{"error": {code, message}}` on stderr
//! and exit with status 1.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use storage::agencies::AgencyKind;
use storage::api_keys::{KeyFormat, NewApiKey, Scope};
use storage::availability::{DEFAULT_TIMEZONE, WorkingHours};
use storage::cancellation::FeeTier;
use storage::ids::{AgencyId, ApiKeyId, UserId};
use storage::listings::SANDBOX_PREFIX;
use storage::users::{NewUser, Role};
use storage::{Environment, StorageError, Store, Tenant, Timestamp};

use workers::handlers::WorkerState;
use workers::webhooks::AddressPolicy;

use crate::config::StorageArgs;
use crate::routes::webhooks::endpoint_rules::{EndpointEdit, FieldError};

/// How long a command waits for its events' dispatch jobs to be pushed.
const DISPATCH_FLUSH: std::time::Duration = std::time::Duration::from_secs(5);

/// Operator commands.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create an agency and its owner user → {"agency_id", "owner_user_id"}.
    CreateAgency(CreateAgency),
    /// Create a user in an agency → {"user_id"}.
    CreateUser(CreateUser),
    /// Set a user's password, read from standard input (never an argument) → {"user_id"}.
    SetPassword(SetPassword),
    /// Issue an API key; the plaintext is shown once → {"key_id", "key"}.
    CreateKey(CreateKey),
    /// An agency's keys (never their plaintext) and their audit log → {"items", "audit"}.
    ListKeys(KeyCommand),
    /// Rotate a key: a new one is shown once; the old one works 30 more days → {"key_id", "key", "rotated"}.
    RotateKey(KeyCommand),
    /// Revoke a key at once, on every replica sharing Redis → {"key_id", "status"}.
    RevokeKey(KeyCommand),
    /// Record the payment of a listing's invoice, activating and billing it → {"listing_number", "activated"}.
    RecordPayment(RecordPayment),
    /// Create or move a listing's shoot → {"listing_number", "scheduled_at"}.
    ScheduleShoot(ScheduleShoot),
    /// Set an owner's cancellation fee tiers → {"owner_user_id", "tiers"}.
    SetCancellationFees(SetCancellationFees),
    /// Set a photographer's weekly working hours → {"photographer_id", "hours", "timezone"}.
    SetWorkingHours(SetWorkingHours),
    /// Replace an agency's budgets → {"agency_id", "budgets"}.
    SetAgencyBudgets(SetAgencyBudgets),
    /// Push a canary job that reports its progress → {"operation_id", "job_id"}.
    EnqueueProbe(EnqueueProbe),
    /// Manage an agency's webhook endpoints: list, get, update, disable, enable,
    /// rotate-secret, delete, deliveries → {"items"} or {"endpoint"[, "secret"]}.
    WebhookEndpoints(WebhookEndpoints),
}

/// What `admin webhook-endpoints` does.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum WebhookAction {
    /// The agency's endpoints.
    List,
    /// One endpoint.
    Get,
    /// Change its URL, event types, name or environment, under the checks of
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
        }
    }

    /// The address policy the URL is checked under.
    fn policy(&self) -> AddressPolicy {
        AddressPolicy {
            allow_private_networks: self.webhook_allow_private_networks,
        }
    }
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

/// `admin enqueue-probe`.
#[derive(Debug, Args)]
pub struct EnqueueProbe {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency the probe reports its progress to (agc_…).
    #[arg(long)]
    agency: String,
    /// Report to the agency's sandbox.
    #[arg(long)]
    sandbox: bool,
    /// Steps the probe runs.
    #[arg(long, default_value_t = 3)]
    steps: u32,
    /// Milliseconds per step.
    #[arg(long, default_value_t = 200)]
    step_ms: u64,
}

/// `admin set-agency-budgets`.
#[derive(Debug, Args)]
pub struct SetAgencyBudgets {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// BUDGET=PER_MINUTE (agency_listing_reads=1000), repeatable; none restores the defaults.
    #[arg(long = "budget")]
    budgets: Vec<String>,
}

/// `admin record-payment`.
#[derive(Debug, Args)]
pub struct RecordPayment {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The listing number (a `snd_` number is in the sandbox pool).
    #[arg(long)]
    listing: String,
    /// The payment provider's reference; generated when absent.
    #[arg(long)]
    reference: Option<String>,
}

/// `admin schedule-shoot`.
#[derive(Debug, Args)]
pub struct ScheduleShoot {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The listing number.
    #[arg(long)]
    listing: String,
    /// When the shoot starts, RFC 3339 (2026-12-01T15:00:00Z).
    #[arg(long)]
    at: String,
}

/// `admin set-cancellation-fees`.
#[derive(Debug, Args)]
pub struct SetCancellationFees {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The owner's user id (usr_…).
    #[arg(long)]
    owner: String,
    /// HOURS:AMOUNT (amount in cents of USD), repeatable; none restores the default tier.
    #[arg(long = "tier")]
    tiers: Vec<String>,
}

/// `admin set-working-hours`.
#[derive(Debug, Args)]
pub struct SetWorkingHours {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The photographer's user id (usr_…).
    #[arg(long)]
    photographer: String,
    /// DAY=HH:MM-HH:MM (DAY is mon … sun), repeatable; none restores the
    /// default week (Monday to Friday 09:00-17:00, America/Los_Angeles).
    #[arg(long = "hours")]
    hours: Vec<String>,
    /// The IANA time zone of the hours; default America/Los_Angeles.
    #[arg(long)]
    timezone: Option<String>,
}

/// `admin create-agency`.
#[derive(Debug, Args)]
pub struct CreateAgency {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency's name.
    #[arg(long)]
    name: String,
    /// media_agency or broker; the owner user gets this role.
    #[arg(long, default_value = "media_agency", value_parser = ["media_agency", "broker"])]
    kind: String,
}

/// `admin create-user`.
#[derive(Debug, Args)]
pub struct CreateUser {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// One of super_admin, admin, media_agency, broker, photographer, agent, assistant, viewer.
    #[arg(long)]
    role: String,
    /// Login email, unique on the platform.
    #[arg(long)]
    email: String,
    /// Display name.
    #[arg(long)]
    name: Option<String>,
    /// The manager's user id (usr_…), in the same agency.
    #[arg(long)]
    manager: Option<String>,
}

/// `admin set-password`.
#[derive(Debug, Args)]
pub struct SetPassword {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The user id (usr_…).
    #[arg(long)]
    user: String,
}

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

/// A failed admin command: a code and a message.
struct AdminError {
    code: &'static str,
    message: String,
}

impl AdminError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<StorageError> for AdminError {
    fn from(err: StorageError) -> Self {
        match err {
            StorageError::NotFound(what) => Self::new("not_found", format!("no such {what}")),
            StorageError::Conflict { field } => {
                Self::new("conflict", format!("{field} is already taken"))
            }
            StorageError::Invalid { field, reason } => {
                Self::new("validation.failed", format!("{field}: {reason}"))
            }
            StorageError::Fields(fields) => Self::new("validation.failed", format!("{fields:?}")),
            StorageError::Rule(rule) => Self::new("rule_violation", rule.to_string()),
            other => Self::new("server.internal", other.to_string()),
        }
    }
}

impl From<FieldError> for AdminError {
    fn from(err: FieldError) -> Self {
        Self::new("validation.failed", err.to_string())
    }
}

impl From<anyhow::Error> for AdminError {
    fn from(err: anyhow::Error) -> Self {
        Self::new("server.internal", format!("{err:#}"))
    }
}

/// Runs an admin command and prints its result.
pub async fn run(command: AdminCommand) -> ExitCode {
    let result = match command {
        AdminCommand::CreateAgency(args) => create_agency(args).await,
        AdminCommand::CreateUser(args) => create_user(args).await,
        AdminCommand::SetPassword(args) => set_password(args).await,
        AdminCommand::CreateKey(args) => create_key(args).await,
        AdminCommand::RecordPayment(args) => record_payment(args).await,
        AdminCommand::ScheduleShoot(args) => schedule_shoot(args).await,
        AdminCommand::SetCancellationFees(args) => set_cancellation_fees(args).await,
        AdminCommand::SetWorkingHours(args) => set_working_hours(args).await,
        AdminCommand::SetAgencyBudgets(args) => set_agency_budgets(args).await,
        AdminCommand::EnqueueProbe(args) => enqueue_probe(args).await,
        AdminCommand::ListKeys(args) => list_keys(args).await,
        AdminCommand::RotateKey(args) => rotate_key(args).await,
        AdminCommand::RevokeKey(args) => revoke_key(args).await,
        AdminCommand::WebhookEndpoints(args) => webhook_endpoints(args).await,
    };
    match result {
        Ok(output) => {
            println!("{output}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!(
                "{}",
                json!({"error": {"code": err.code, "message": err.message}})
            );
            ExitCode::FAILURE
        }
    }
}

async fn existing_agency(store: &Store, id: &str) -> Result<AgencyId, AdminError> {
    let id = AgencyId::parse(id).ok_or_else(|| AdminError::new("not_found", "no such agency"))?;
    store.agencies().get(&id).await?;
    Ok(id)
}

async fn create_agency(args: CreateAgency) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let kind = AgencyKind::parse(&args.kind).ok_or_else(|| {
        AdminError::new("validation.failed", "kind must be media_agency or broker")
    })?;
    let (agency, owner) = store.agencies().create(&args.name, kind).await?;
    Ok(json!({"agency_id": agency.id, "owner_user_id": owner.id}))
}

async fn set_password(args: SetPassword) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let user =
        UserId::parse(&args.user).ok_or_else(|| AdminError::new("not_found", "no such user"))?;
    let mut password = String::new();
    std::io::stdin().read_line(&mut password).map_err(|err| {
        AdminError::new("validation.failed", format!("reading the password: {err}"))
    })?;
    let password = password.trim_end_matches(['\r', '\n']);
    store
        .accounts()
        .set_password(&agency, &user, password)
        .await?;
    Ok(json!({"user_id": user}))
}

async fn create_user(args: CreateUser) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let role = Role::parse(&args.role).ok_or_else(|| {
        let names: Vec<&str> = Role::ALL.iter().map(|r| r.as_str()).collect();
        AdminError::new(
            "validation.failed",
            format!("role must be one of {}", names.join(", ")),
        )
    })?;
    let manager_id = match args.manager.as_deref() {
        None => None,
        Some(text) => Some(
            UserId::parse(text)
                .ok_or_else(|| AdminError::new("validation.failed", "manager is not a user id"))?,
        ),
    };
    let user = store
        .users()
        .create(
            &agency,
            NewUser {
                role,
                email: Some(args.email),
                name: args.name,
                manager_id,
            },
        )
        .await?;
    Ok(json!({"user_id": user.id}))
}

async fn create_key(args: CreateKey) -> Result<Value, AdminError> {
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

/// The tenant a listing number belongs to: `snd_` numbers are the sandbox pool.
fn listing_tenant(agency: AgencyId, listing_number: &str) -> Tenant {
    let environment = if listing_number
        .to_ascii_lowercase()
        .starts_with(SANDBOX_PREFIX)
    {
        Environment::Sandbox
    } else {
        Environment::Live
    };
    Tenant::new(agency, environment)
}

/// The platform of a command that writes events: they are dispatched before
/// the command exits (the outbox sweep would otherwise pick them up).
async fn open_platform(storage: &StorageArgs) -> Result<WorkerState, AdminError> {
    Ok(workers::cli::open(storage).await?)
}

async fn record_payment(args: RecordPayment) -> Result<Value, AdminError> {
    let platform = open_platform(&args.storage).await?;
    let store = platform.store.clone();
    let agency = existing_agency(&store, &args.agency).await?;
    let tenant = listing_tenant(agency, &args.listing);
    let payment = store
        .orders()
        .record_payment(&tenant, &args.listing, args.reference)
        .await?;
    platform.dispatch.flush(DISPATCH_FLUSH).await;
    Ok(
        json!({"listing_number": payment.listing.listing_number, "activated": payment.listing.is_activated()}),
    )
}

async fn schedule_shoot(args: ScheduleShoot) -> Result<Value, AdminError> {
    let platform = open_platform(&args.storage).await?;
    let store = platform.store.clone();
    let agency = existing_agency(&store, &args.agency).await?;
    let at = chrono::DateTime::parse_from_rfc3339(&args.at).map_err(|_| {
        AdminError::new(
            "validation.failed",
            "--at must be an RFC 3339 time, e.g. 2026-12-01T15:00:00Z",
        )
    })?;
    let tenant = listing_tenant(agency, &args.listing);
    let scheduled = store
        .appointments()
        .schedule(
            &tenant,
            &args.listing,
            Timestamp::from(at.with_timezone(&chrono::Utc)),
        )
        .await?;
    platform.dispatch.flush(DISPATCH_FLUSH).await;
    Ok(json!({
        "listing_number": scheduled.appointment.listing_number,
        "scheduled_at": scheduled.appointment.scheduled_at.to_rfc3339(),
    }))
}

async fn set_cancellation_fees(args: SetCancellationFees) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let owner = UserId::parse(&args.owner)
        .ok_or_else(|| AdminError::new("validation.failed", "owner is not a user id"))?;
    let tiers = args
        .tiers
        .iter()
        .map(|text| {
            let parsed = text.split_once(':').and_then(|(hours, amount)| {
                Some((hours.trim().parse().ok()?, amount.trim().parse().ok()?))
            });
            parsed
                .map(|(hours_before, amount)| FeeTier {
                    hours_before,
                    amount,
                    currency: "USD".to_owned(),
                })
                .ok_or_else(|| {
                    AdminError::new(
                        "validation.failed",
                        format!("tier {text:?} is not HOURS:AMOUNT"),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    store
        .cancellation_fees()
        .set(&agency, &owner, &tiers)
        .await?;
    let tiers = store.cancellation_fees().for_owner(&agency, &owner).await?;
    Ok(json!({
        "owner_user_id": owner,
        "tiers": tiers.iter().map(|t| json!({"hours_before": t.hours_before, "amount": t.amount, "currency": t.currency})).collect::<Vec<_>>(),
    }))
}

async fn set_working_hours(args: SetWorkingHours) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let photographer = UserId::parse(&args.photographer)
        .ok_or_else(|| AdminError::new("not_found", "no such user"))?;
    if args.hours.is_empty() && args.timezone.is_some() {
        // The default week has its own zone; a zone alone would be ignored.
        return Err(AdminError::new(
            "validation.failed",
            "--timezone needs at least one --hours",
        ));
    }
    let blocks = args
        .hours
        .iter()
        .map(|text| {
            WorkingHours::parse(text).ok_or_else(|| {
                AdminError::new(
                    "validation.failed",
                    format!("--hours {text:?} is not DAY=HH:MM-HH:MM (mon=09:00-17:00)"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let timezone = args.timezone.as_deref().unwrap_or(DEFAULT_TIMEZONE);
    let week = store
        .availability()
        .set_working_hours(&agency, &photographer, &blocks, timezone)
        .await?;
    Ok(json!({
        "photographer_id": photographer,
        "hours": week.blocks.iter().map(|b| b.to_spec()).collect::<Vec<_>>(),
        "timezone": week.timezone.name(),
    }))
}

/// Parses repeated NAME=PER_MINUTE flags, accepting only names `known` admits.
fn parse_budgets(
    flag: &str,
    texts: &[String],
    known: impl Fn(&str) -> bool,
) -> Result<std::collections::BTreeMap<String, u32>, AdminError> {
    let mut budgets = std::collections::BTreeMap::new();
    for text in texts {
        let parsed = text
            .split_once('=')
            .and_then(|(name, limit)| Some((name.trim(), limit.trim().parse::<u32>().ok()?)));
        match parsed {
            Some((name, limit)) if limit > 0 && known(name) => {
                budgets.insert(name.to_owned(), limit);
            }
            _ => {
                return Err(AdminError::new(
                    "validation.failed",
                    format!(
                        "{flag} {text:?} must be NAME=PER_MINUTE with a known name and a positive budget"
                    ),
                ));
            }
        }
    }
    Ok(budgets)
}

async fn set_agency_budgets(args: SetAgencyBudgets) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let budgets = parse_budgets("--budget", &args.budgets, |name| {
        crate::endpoints::AGENCY_BUDGETS
            .iter()
            .any(|b| b.name == name)
    })?;
    store
        .agencies()
        .set_rate_limit_overrides(&agency, &budgets)
        .await?;
    Ok(json!({"agency_id": agency, "budgets": budgets}))
}

fn endpoint_json(endpoint: &storage::webhooks::WebhookEndpoint) -> Value {
    json!({
        "id": endpoint.id,
        "name": endpoint.name,
        "url": endpoint.url,
        "event_types": endpoint.event_types,
        "environment": endpoint.environment.as_str(),
        "status": endpoint.status.as_str(),
        "disabled_reason": endpoint.disabled_reason,
        "consecutive_failures": endpoint.consecutive_failures,
        "created_at": endpoint.created_at.to_rfc3339(),
    })
}

async fn webhook_endpoints(args: WebhookEndpoints) -> Result<Value, AdminError> {
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
            "--url, --event-type(s), --name and --environment only go with update",
        ));
    }
    if let WebhookAction::List = args.action {
        let mut items = Vec::new();
        let mut after = None;
        loop {
            let page = webhooks.list(&tenant, after.as_ref(), 200).await?;
            items.extend(page.items.iter().map(endpoint_json));
            match page.next {
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
    let reason = storage::webhooks::MANUALLY_DISABLED_REASON;
    Ok(match args.action {
        WebhookAction::List => unreachable!("handled above"),
        WebhookAction::Get => {
            let endpoint = webhooks.get(&tenant, &id).await?.ok_or_else(not_found)?;
            json!({ "endpoint": endpoint_json(&endpoint) })
        }
        WebhookAction::Update => {
            if edit.is_empty() {
                return Err(AdminError::new(
                    "validation.failed",
                    "update needs at least one of --url, --event-type, --event-types, --all-event-types, --name, --environment",
                ));
            }
            // As the route: an unknown endpoint is not found before any
            // value is judged.
            webhooks.get(&tenant, &id).await?.ok_or_else(not_found)?;
            let changes = edit.check(args.update.policy(), &tenant).await?;
            let endpoint = webhooks
                .update(&tenant, &id, changes)
                .await?
                .ok_or_else(not_found)?;
            json!({ "endpoint": endpoint_json(&endpoint) })
        }
        WebhookAction::Disable | WebhookAction::Enable => {
            let enable = matches!(args.action, WebhookAction::Enable);
            let endpoint = webhooks
                .set_enabled(&tenant, &id, enable, reason)
                .await?
                .ok_or_else(not_found)?;
            json!({ "endpoint": endpoint_json(&endpoint) })
        }
        WebhookAction::RotateSecret => {
            let (endpoint, secret) = webhooks
                .rotate_secret(&tenant, &id)
                .await?
                .ok_or_else(not_found)?;
            json!({ "endpoint": endpoint_json(&endpoint), "secret": secret })
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
            let mut items = Vec::new();
            for delivery in page.items {
                let attempts = webhooks.attempts(&delivery.id).await?;
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

async fn list_keys(args: KeyCommand) -> Result<Value, AdminError> {
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

async fn rotate_key(args: KeyCommand) -> Result<Value, AdminError> {
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

async fn revoke_key(args: KeyCommand) -> Result<Value, AdminError> {
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

async fn enqueue_probe(args: EnqueueProbe) -> Result<Value, AdminError> {
    let platform = open_platform(&args.storage).await?;
    let agency = existing_agency(&platform.store, &args.agency).await?;
    if args.steps == 0 || args.steps > 10_000 {
        return Err(AdminError::new(
            "validation.failed",
            "--steps must be 1 to 10000",
        ));
    }
    let operation_id = format!("op_{}", ulid::Ulid::generate());
    let probe = jobs::kinds::Probe {
        operation_id: operation_id.clone(),
        agency_id: agency.to_string(),
        is_sandbox: args.sandbox,
        steps: args.steps,
        step_ms: args.step_ms,
    };
    let job_id = platform
        .queue
        .push(probe, jobs::PushOptions::default())
        .await
        .map_err(|err| AdminError::new("server.internal", err.to_string()))?;
    Ok(json!({"operation_id": operation_id, "job_id": job_id}))
}
