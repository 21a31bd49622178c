//! Webhooks: the endpoints an agency registers, one delivery per (event,
//! endpoint), every attempt of a delivery, and the notification sent to an
//! agency's owner when an endpoint is disabled.
//!
//! Endpoints belong to the pool of the key that registered them (live or
//! sandbox), like every other row. A live endpoint chooses which events it
//! hears (`live`, `sandbox` or `both`); a sandbox endpoint hears sandbox
//! events only. Signing secrets are sealed with a key derived from the master
//! key and opened only to sign a delivery.

use std::collections::HashMap;

use serde_json::Value;
use sqlx::types::Json;

use crate::db::{in_transaction, on_pool};
use crate::ids::{AgencyId, EventId, UserId};
use crate::outbox::StoredEvent;
use crate::page::{Page, Position};
use crate::{Environment, Result, StorageError, Store, Tenant, Timestamp};

/// Which events an endpoint hears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointEnvironment {
    /// Live events only.
    Live,
    /// Sandbox events only.
    Sandbox,
    /// Both.
    Both,
}

impl EndpointEnvironment {
    /// The wire and column value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Sandbox => "sandbox",
            Self::Both => "both",
        }
    }

    /// Parses our value or the specification's labels ("Live events only",
    /// "Sandbox events only", "Both"), in any case.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "live" | "live events only" | "live_events_only" | "live only" => Some(Self::Live),
            "sandbox" | "sandbox events only" | "sandbox_events_only" | "sandbox only" => {
                Some(Self::Sandbox)
            }
            "both" => Some(Self::Both),
            _ => None,
        }
    }

    /// Whether an event of `environment` reaches such an endpoint.
    pub const fn hears(self, environment: Environment) -> bool {
        matches!(
            (self, environment),
            (Self::Both, _)
                | (Self::Live, Environment::Live)
                | (Self::Sandbox, Environment::Sandbox)
        )
    }
}

/// Whether an endpoint receives deliveries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointStatus {
    /// Deliveries are made.
    Enabled,
    /// Deliveries are not made until an owner re-enables it.
    Disabled,
}

impl EndpointStatus {
    /// The wire and column value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Enabled => "enabled",
            Self::Disabled => "disabled",
        }
    }
}

/// Why the platform disabled an endpoint after consecutive failed deliveries.
pub const AUTO_DISABLED_REASON: &str = "auto_disabled_consecutive_failures";
/// Why an owner's own disable is recorded.
pub const MANUALLY_DISABLED_REASON: &str = "disabled_by_owner";
/// Consecutive failed deliveries that disable an endpoint.
pub const AUTO_DISABLE_AFTER: i32 = 50;

/// A registered endpoint (never its secret).
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookEndpoint {
    /// `whe_…`.
    pub id: String,
    /// The owning agency.
    pub agency_id: AgencyId,
    /// The pool of the key that registered it.
    pub pool: Environment,
    /// Optional label.
    pub name: Option<String>,
    /// Where deliveries go (HTTPS).
    pub url: String,
    /// Canonical event types it hears; `None` hears every type, including
    /// types added later.
    pub event_types: Option<Vec<String>>,
    /// Which events it hears.
    pub environment: EndpointEnvironment,
    /// Enabled or disabled.
    pub status: EndpointStatus,
    /// Why it is disabled.
    pub disabled_reason: Option<String>,
    /// When it was disabled.
    pub disabled_at: Option<Timestamp>,
    /// Failed deliveries in a row (a success resets it).
    pub consecutive_failures: i32,
    /// The user whose key registered it.
    pub created_by: Option<UserId>,
    /// Registration time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

impl WebhookEndpoint {
    /// Whether an event of this type and environment is delivered here.
    pub fn subscribes_to(&self, event_type: &str, environment: Environment) -> bool {
        let pool_allows = self.pool == Environment::Live || environment == Environment::Sandbox;
        pool_allows
            && self.environment.hears(environment)
            && self
                .event_types
                .as_ref()
                .is_none_or(|types| types.iter().any(|t| t == event_type))
    }
}

#[derive(sqlx::FromRow)]
struct EndpointRow {
    id: String,
    agency_id: AgencyId,
    is_sandbox: bool,
    name: Option<String>,
    url: String,
    event_types: Option<Json<Vec<String>>>,
    environment: String,
    status: String,
    disabled_reason: Option<String>,
    disabled_at: Option<Timestamp>,
    consecutive_failures: i32,
    created_by: Option<UserId>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const ENDPOINT_COLUMNS: &str = "id, agency_id, is_sandbox, name, url, event_types, environment, status, \
     disabled_reason, disabled_at, consecutive_failures, created_by, created_at, updated_at";

impl TryFrom<EndpointRow> for WebhookEndpoint {
    type Error = StorageError;

    fn try_from(row: EndpointRow) -> Result<Self> {
        let environment = EndpointEnvironment::parse(&row.environment).ok_or_else(|| {
            StorageError::Corrupt(format!("endpoint environment {}", row.environment))
        })?;
        let status = match row.status.as_str() {
            "enabled" => EndpointStatus::Enabled,
            "disabled" => EndpointStatus::Disabled,
            other => return Err(StorageError::Corrupt(format!("endpoint status {other}"))),
        };
        Ok(Self {
            id: row.id,
            agency_id: row.agency_id,
            pool: Environment::from_sandbox_flag(row.is_sandbox),
            name: row.name,
            url: row.url,
            event_types: row.event_types.map(|types| types.0),
            environment,
            status,
            disabled_reason: row.disabled_reason,
            disabled_at: row.disabled_at,
            consecutive_failures: row.consecutive_failures,
            created_by: row.created_by,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

/// What registering an endpoint takes (validated by the caller).
#[derive(Clone, Debug)]
pub struct NewEndpoint {
    /// Optional label.
    pub name: Option<String>,
    /// HTTPS URL.
    pub url: String,
    /// Canonical types; `None` for every type.
    pub event_types: Option<Vec<String>>,
    /// Which events it hears.
    pub environment: EndpointEnvironment,
    /// The acting user.
    pub created_by: Option<UserId>,
}

/// A partial update; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct EndpointChanges {
    /// New label (`Some(None)` clears it).
    pub name: Option<Option<String>>,
    /// New URL.
    pub url: Option<String>,
    /// New subscription (`Some(None)` subscribes to every type).
    pub event_types: Option<Option<Vec<String>>>,
    /// New environment.
    pub environment: Option<EndpointEnvironment>,
}

/// A new signing secret: `whsec_` + 32 random bytes, base64url.
pub fn generate_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes[..]);
    format!("whsec_{}", crate::secrets::encode_token(&bytes))
}

/// What a delivery carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryKind {
    /// An outbox event fanned out.
    Event,
    /// An owner's replay of an earlier delivery.
    Replay,
    /// A test fire.
    TestFire,
}

impl DeliveryKind {
    /// The wire and column value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Event => "event",
            Self::Replay => "replay",
            Self::TestFire => "test_fire",
        }
    }

    fn parse(text: &str) -> Result<Self> {
        match text {
            "event" => Ok(Self::Event),
            "replay" => Ok(Self::Replay),
            "test_fire" => Ok(Self::TestFire),
            other => Err(StorageError::Corrupt(format!("delivery kind {other}"))),
        }
    }
}

/// Where a delivery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Not attempted yet.
    Pending,
    /// Failed at least once; another attempt is scheduled.
    Retrying,
    /// A 2xx answer was received.
    Succeeded,
    /// Every attempt failed (or the endpoint went away).
    Failed,
}

impl DeliveryStatus {
    /// The wire and column value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Retrying => "retrying",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Result<Self> {
        match text {
            "pending" => Ok(Self::Pending),
            "retrying" => Ok(Self::Retrying),
            "succeeded" => Ok(Self::Succeeded),
            "failed" => Ok(Self::Failed),
            other => Err(StorageError::Corrupt(format!("delivery status {other}"))),
        }
    }

    /// Whether no further attempt will be made.
    pub const fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// One delivery of one event to one endpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// `whd_…`.
    pub id: String,
    /// The endpoint.
    pub endpoint_id: String,
    /// The endpoint's agency.
    pub agency_id: AgencyId,
    /// Event, replay or test fire.
    pub kind: DeliveryKind,
    /// The delivery a replay repeats.
    pub replay_of: Option<String>,
    /// `event_id` of the envelope (kept by replays).
    pub event_id: String,
    /// Canonical event type.
    pub event_type: String,
    /// Data-shape version.
    pub api_version: String,
    /// When the event happened (`timestamp` of the envelope).
    pub occurred_at: Timestamp,
    /// Sandbox activity.
    pub is_sandbox: bool,
    /// The event's data.
    pub data: Value,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made.
    pub attempts: i32,
    /// When the next attempt is due.
    pub next_attempt_at: Option<Timestamp>,
    /// Creation time.
    pub created_at: Timestamp,
    /// When it succeeded or failed for good.
    pub completed_at: Option<Timestamp>,
}

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: String,
    endpoint_id: String,
    agency_id: AgencyId,
    kind: String,
    replay_of: Option<String>,
    event_id: String,
    event_type: String,
    api_version: String,
    occurred_at: Timestamp,
    is_sandbox: bool,
    data: Json<Value>,
    status: String,
    attempts: i32,
    next_attempt_at: Option<Timestamp>,
    created_at: Timestamp,
    completed_at: Option<Timestamp>,
}

const DELIVERY_COLUMNS: &str = "d.id, d.endpoint_id, d.agency_id, d.kind, d.replay_of, d.event_id, \
     d.event_type, d.api_version, d.occurred_at, d.is_sandbox, d.data, d.status, d.attempts, \
     d.next_attempt_at, d.created_at, d.completed_at";

impl TryFrom<DeliveryRow> for Delivery {
    type Error = StorageError;

    fn try_from(row: DeliveryRow) -> Result<Self> {
        Ok(Self {
            id: row.id,
            endpoint_id: row.endpoint_id,
            agency_id: row.agency_id,
            kind: DeliveryKind::parse(&row.kind)?,
            replay_of: row.replay_of,
            event_id: row.event_id,
            event_type: row.event_type,
            api_version: row.api_version,
            occurred_at: row.occurred_at,
            is_sandbox: row.is_sandbox,
            data: row.data.0,
            status: DeliveryStatus::parse(&row.status)?,
            attempts: row.attempts,
            next_attempt_at: row.next_attempt_at,
            created_at: row.created_at,
            completed_at: row.completed_at,
        })
    }
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// A 2xx answer.
    Succeeded,
    /// Any other answer.
    HttpError,
    /// No answer within the timeout.
    Timeout,
    /// No connection (DNS, TCP, TLS).
    ConnectionFailed,
    /// Refused before connecting: the address is not one we deliver to.
    Refused,
}

impl AttemptOutcome {
    /// The wire and column value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::HttpError => "http_error",
            Self::Timeout => "timeout",
            Self::ConnectionFailed => "connection_failed",
            Self::Refused => "refused",
        }
    }
}

/// One attempt, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Attempt {
    /// 1 for the first.
    pub attempt: i32,
    /// The envelope's nonce for this attempt.
    pub nonce: String,
    /// When it started.
    pub started_at: Timestamp,
    /// How long it took.
    pub duration_ms: i32,
    /// `succeeded`, `http_error`, `timeout`, `connection_failed`, `refused`.
    pub outcome: String,
    /// The receiver's status code.
    pub status_code: Option<i32>,
    /// The start of the receiver's answer.
    pub response_excerpt: Option<String>,
    /// What went wrong, when no answer came.
    pub error: Option<String>,
}

/// What happens to a delivery after an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterAttempt {
    /// It succeeded.
    Succeeded,
    /// It failed; try again at this time.
    RetryAt(Timestamp),
    /// It failed for good.
    Failed,
}

/// What recording an attempt changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptRecorded {
    /// False when this attempt was already recorded (a job ran twice): nothing changed.
    pub recorded: bool,
    /// The endpoint's consecutive failures afterwards.
    pub consecutive_failures: i32,
    /// Whether this attempt disabled the endpoint.
    pub disabled_endpoint: bool,
    /// The notification raised for the owner when it did.
    pub notification_id: Option<String>,
}

/// What one fan-out of a batch of events did.
#[derive(Debug, Default)]
pub struct FanOut {
    /// The events this run dispatched, in commit order; events dispatched
    /// before are not among them.
    pub dispatched: Vec<StoredEvent>,
    /// The ids given that name no event.
    pub missing: Vec<EventId>,
    /// The new deliveries, due now, in event order.
    pub deliveries: Vec<String>,
}

/// A delivery with what its next attempt needs.
#[derive(Clone, Debug)]
pub struct DeliveryTarget {
    /// The delivery.
    pub delivery: Delivery,
    /// Its endpoint, `None` once deleted.
    pub endpoint: Option<WebhookEndpoint>,
    /// The endpoint's signing secret.
    pub secret: Option<String>,
}

/// A notification to a user (recorded; e-mailed when a mail relay is configured).
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Notification {
    /// `ntf_…`.
    pub id: String,
    /// The agency.
    pub agency_id: AgencyId,
    /// The recipient.
    pub user_id: Option<UserId>,
    /// What it is about (`webhook_endpoint_disabled`).
    pub kind: String,
    /// Subject line.
    pub subject: String,
    /// Text.
    pub body: String,
    /// When it was raised.
    pub created_at: Timestamp,
    /// About a sandbox resource: recorded, never e-mailed.
    pub is_sandbox: bool,
}

/// Webhook repository; see [`Store::webhooks`].
pub struct Webhooks<'a> {
    pub(crate) store: &'a Store,
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", ulid::Ulid::generate())
}

impl Webhooks<'_> {
    /// Registers an endpoint; returns it and its signing secret (shown once).
    pub async fn create(
        &self,
        tenant: &Tenant,
        new: NewEndpoint,
    ) -> Result<(WebhookEndpoint, String)> {
        let id = new_id("whe_");
        let secret = generate_secret();
        let sealed = self.store.derived_keys().seal(&secret, &id);
        let now = self.store.clock().now();
        let sql = format!(
            "insert into webhook_endpoints (id, agency_id, is_sandbox, name, url, event_types,
                 environment, secret_sealed, status, consecutive_failures, created_by, created_at, updated_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, 'enabled', 0, $9, $10, $10)
             returning {ENDPOINT_COLUMNS}"
        );
        let row: EndpointRow = in_transaction!(self.store.db(), |tx| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(&new.name)
                .bind(&new.url)
                .bind(new.event_types.as_ref().map(Json))
                .bind(new.environment.as_str())
                .bind(&sealed)
                .bind(&new.created_by)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?
        });
        Ok((row.try_into()?, secret))
    }

    /// The tenant's endpoint.
    pub async fn get(&self, tenant: &Tenant, id: &str) -> Result<Option<WebhookEndpoint>> {
        let sql = format!(
            "select {ENDPOINT_COLUMNS} from webhook_endpoints
             where id = $1 and agency_id = $2 and is_sandbox = $3 and deleted_at is null"
        );
        let row: Option<EndpointRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .fetch_optional(pool)
                .await?
        });
        row.map(WebhookEndpoint::try_from).transpose()
    }

    /// The tenant's endpoints, oldest first.
    pub async fn list(
        &self,
        tenant: &Tenant,
        after: Option<&Position>,
        limit: u32,
    ) -> Result<Page<WebhookEndpoint>> {
        const WHERE: &str = "agency_id = $1 and is_sandbox = $2 and deleted_at is null";
        let list_sql = format!(
            "select {ENDPOINT_COLUMNS} from webhook_endpoints where {WHERE}
             and ($3 is null or (created_at, id) > ($3, $4))
             order by created_at, id limit $5"
        );
        let count_sql = format!("select count(*) from webhook_endpoints where {WHERE}");
        let limit = limit.min(crate::page::MAX_PAGE_SIZE);
        let (rows, total): (Vec<EndpointRow>, i64) = on_pool!(self.store.db(), pool => {
            let rows = sqlx::query_as(sqlx::AssertSqlSafe(list_sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(after.map(|p| p.created_at))
                .bind(after.map(|p| p.id.as_str()))
                .bind(i64::from(limit) + 1)
                .fetch_all(pool)
                .await?;
            let total = sqlx::query_scalar(sqlx::AssertSqlSafe(count_sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .fetch_one(pool)
                .await?;
            (rows, total)
        });
        let endpoints = rows
            .into_iter()
            .map(WebhookEndpoint::try_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::from_overfetch(endpoints, limit, total, |e| {
            Position::after(e.created_at, e.id.clone())
        }))
    }

    /// Applies a partial update; `None` when the tenant has no such endpoint.
    pub async fn update(
        &self,
        tenant: &Tenant,
        id: &str,
        changes: EndpointChanges,
    ) -> Result<Option<WebhookEndpoint>> {
        let now = self.store.clock().now();
        let sql = format!(
            "update webhook_endpoints set
                 name = case when $4 then $5 else name end,
                 url = coalesce($6, url),
                 event_types = case when $7 then $8 else event_types end,
                 environment = coalesce($9, environment),
                 updated_at = $10
             where id = $1 and agency_id = $2 and is_sandbox = $3 and deleted_at is null
             returning {ENDPOINT_COLUMNS}"
        );
        let row: Option<EndpointRow> = in_transaction!(self.store.db(), |tx| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(changes.name.is_some())
                .bind(changes.name.clone().flatten())
                .bind(&changes.url)
                .bind(changes.event_types.is_some())
                .bind(changes.event_types.clone().flatten().map(Json))
                .bind(changes.environment.map(EndpointEnvironment::as_str))
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?
        });
        row.map(WebhookEndpoint::try_from).transpose()
    }

    /// Disables (with `reason`) or re-enables an endpoint. Re-enabling
    /// clears the reason and the failure count.
    pub async fn set_enabled(
        &self,
        tenant: &Tenant,
        id: &str,
        enabled: bool,
        reason: &str,
    ) -> Result<Option<WebhookEndpoint>> {
        let now = self.store.clock().now();
        let sql = format!(
            "update webhook_endpoints set
                 status = case when $4 then 'enabled' else 'disabled' end,
                 disabled_reason = case when $4 then null
                     when status = 'disabled' then disabled_reason else $5 end,
                 disabled_at = case when $4 then null
                     when status = 'disabled' then disabled_at else $6 end,
                 consecutive_failures = case when $4 then 0 else consecutive_failures end,
                 updated_at = $6
             where id = $1 and agency_id = $2 and is_sandbox = $3 and deleted_at is null
             returning {ENDPOINT_COLUMNS}"
        );
        let row: Option<EndpointRow> = in_transaction!(self.store.db(), |tx| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(enabled)
                .bind(reason)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?
        });
        row.map(WebhookEndpoint::try_from).transpose()
    }

    /// Replaces the signing secret at once; returns the new one (shown once).
    pub async fn rotate_secret(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<Option<(WebhookEndpoint, String)>> {
        let secret = generate_secret();
        let sealed = self.store.derived_keys().seal(&secret, id);
        let now = self.store.clock().now();
        let sql = format!(
            "update webhook_endpoints set secret_sealed = $4, updated_at = $5
             where id = $1 and agency_id = $2 and is_sandbox = $3 and deleted_at is null
             returning {ENDPOINT_COLUMNS}"
        );
        let row: Option<EndpointRow> = in_transaction!(self.store.db(), |tx| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(&sealed)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?
        });
        row.map(|row| Ok((WebhookEndpoint::try_from(row)?, secret)))
            .transpose()
    }

    /// Deletes an endpoint: it disappears from the API and receives nothing
    /// more; its deliveries and attempts stay for the record until retention
    /// purges them.
    pub async fn delete(&self, tenant: &Tenant, id: &str) -> Result<bool> {
        let now = self.store.clock().now();
        let deleted = in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "update webhook_endpoints set deleted_at = $4, updated_at = $4
                 where id = $1 and agency_id = $2 and is_sandbox = $3 and deleted_at is null",
            )
            .bind(id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        });
        Ok(deleted == 1)
    }

    /// The sealed secret as stored (for checks that it is not plaintext).
    pub async fn sealed_secret(&self, id: &str) -> Result<Option<String>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_scalar("select secret_sealed from webhook_endpoints where id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?)
        })
    }

    /// Fans a batch of events out, in one transaction: each event not yet
    /// dispatched is marked dispatched and gets one delivery per subscribed,
    /// enabled endpoint of its agency. Events dispatched before are left out,
    /// so a second run creates nothing. One claim statement and one endpoint
    /// read per agency serve the whole batch, whatever its size.
    pub async fn fan_out(&self, event_ids: &[EventId]) -> Result<FanOut> {
        if event_ids.is_empty() {
            return Ok(FanOut::default());
        }
        let now = self.store.clock().now();
        let ids = serde_json::to_string(event_ids)
            .map_err(|err| StorageError::Corrupt(format!("event ids: {err}")))?;
        // The ids go in as one JSON array; both backends expand it in SQL.
        let backend = self.store.db().backend();
        let id_list = |placeholder: &str| match backend {
            crate::db::Backend::Sqlite => format!("select value from json_each({placeholder})"),
            crate::db::Backend::Postgres => {
                format!("select jsonb_array_elements_text({placeholder}::jsonb)")
            }
        };
        let claim_sql = format!(
            "update events set dispatched_at = $1
             where event_id in ({}) and dispatched_at is null
             returning {}",
            id_list("$2"),
            crate::outbox::EVENT_COLUMNS
        );
        let known_sql = format!(
            "select event_id from events where event_id in ({})",
            id_list("$1")
        );
        let endpoints_sql = format!(
            "select {ENDPOINT_COLUMNS} from webhook_endpoints
             where agency_id = $1 and deleted_at is null"
        );
        // A disabled endpoint gets its delivery failed at once, without an
        // attempt: a record its owner can replay after re-enabling.
        let insert_sql =
            "insert into webhook_deliveries (id, endpoint_id, agency_id, kind, event_id,
                 event_type, api_version, occurred_at, is_sandbox, data, status, attempts,
                 next_attempt_at, created_at, completed_at)
             values ($1, $2, $3, 'event', $4, $5, $6, $7, $8, $9,
                     case when $11 then 'pending' else 'failed' end, 0,
                     case when $11 then $10 end, $10,
                     case when $11 then null else $10 end)
             on conflict do nothing";
        let fan_out = in_transaction!(self.store.db(), |tx| {
            let claimed: Vec<crate::outbox::EventRow> =
                sqlx::query_as(sqlx::AssertSqlSafe(claim_sql.clone()))
                    .bind(now)
                    .bind(&ids)
                    .fetch_all(&mut *tx)
                    .await?;
            let mut dispatched: Vec<StoredEvent> =
                claimed.into_iter().map(StoredEvent::from).collect();
            dispatched.sort_by_key(|event| event.seq);
            let missing = if dispatched.len() < event_ids.len() {
                // Some were dispatched before (a sweep and the fast path both
                // pushed them), or do not exist at all.
                let known: Vec<EventId> =
                    sqlx::query_scalar(sqlx::AssertSqlSafe(known_sql.clone()))
                        .bind(&ids)
                        .fetch_all(&mut *tx)
                        .await?;
                event_ids
                    .iter()
                    .filter(|id| !known.contains(id))
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            };
            let mut endpoints_of: HashMap<AgencyId, Vec<WebhookEndpoint>> = HashMap::new();
            let mut deliveries = Vec::new();
            for event in &dispatched {
                if !endpoints_of.contains_key(&event.agency_id) {
                    let rows: Vec<EndpointRow> =
                        sqlx::query_as(sqlx::AssertSqlSafe(endpoints_sql.clone()))
                            .bind(&event.agency_id)
                            .fetch_all(&mut *tx)
                            .await?;
                    let endpoints = rows
                        .into_iter()
                        .map(WebhookEndpoint::try_from)
                        .collect::<Result<Vec<_>>>()?;
                    endpoints_of.insert(event.agency_id.clone(), endpoints);
                }
                let endpoints = endpoints_of
                    .get(&event.agency_id)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                for endpoint in endpoints {
                    if !endpoint.subscribes_to(&event.event_type, event.environment) {
                        continue;
                    }
                    let id = new_id("whd_");
                    let inserted = sqlx::query(insert_sql)
                        .bind(&id)
                        .bind(&endpoint.id)
                        .bind(&event.agency_id)
                        .bind(&event.event_id)
                        .bind(&event.event_type)
                        .bind(&event.api_version)
                        .bind(event.occurred_at)
                        .bind(event.environment.is_sandbox())
                        .bind(Json(&event.data))
                        .bind(now)
                        .bind(endpoint.status == EndpointStatus::Enabled)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                    if inserted == 1 && endpoint.status == EndpointStatus::Enabled {
                        deliveries.push(id);
                    }
                }
            }
            FanOut {
                dispatched,
                missing,
                deliveries,
            }
        });
        Ok(fan_out)
    }

    /// A one-off delivery to the tenant's endpoint (a replay or a test fire),
    /// due now.
    pub async fn create_manual(
        &self,
        endpoint: &WebhookEndpoint,
        kind: DeliveryKind,
        template: &Delivery,
    ) -> Result<Delivery> {
        let now = self.store.clock().now();
        let id = new_id("whd_");
        let sql = format!(
            "insert into webhook_deliveries (id, endpoint_id, agency_id, kind, replay_of, event_id,
                 event_type, api_version, occurred_at, is_sandbox, data, status, attempts,
                 next_attempt_at, created_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', 0, $12, $12)
             returning {}",
            DELIVERY_COLUMNS.replace("d.", "")
        );
        let row: DeliveryRow = in_transaction!(self.store.db(), |tx| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&id)
                .bind(&endpoint.id)
                .bind(&endpoint.agency_id)
                .bind(kind.as_str())
                .bind(&template.replay_of)
                .bind(&template.event_id)
                .bind(&template.event_type)
                .bind(&template.api_version)
                .bind(template.occurred_at)
                .bind(template.is_sandbox)
                .bind(Json(&template.data))
                .bind(now)
                .fetch_one(&mut *tx)
                .await?
        });
        row.try_into()
    }

    /// A delivery of one of the tenant's endpoints.
    pub async fn delivery(&self, tenant: &Tenant, id: &str) -> Result<Option<Delivery>> {
        let sql = format!(
            "select {DELIVERY_COLUMNS} from webhook_deliveries d
             join webhook_endpoints e on e.id = d.endpoint_id
             where d.id = $1 and e.agency_id = $2 and e.is_sandbox = $3 and e.deleted_at is null"
        );
        let row: Option<DeliveryRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .fetch_optional(pool)
                .await?
        });
        row.map(Delivery::try_from).transpose()
    }

    /// An endpoint's deliveries, newest first.
    pub async fn deliveries(
        &self,
        endpoint_id: &str,
        before: Option<&Position>,
        limit: u32,
    ) -> Result<Page<Delivery>> {
        let list_sql = format!(
            "select {DELIVERY_COLUMNS} from webhook_deliveries d where d.endpoint_id = $1
             and ($2 is null or (d.created_at, d.id) < ($2, $3))
             order by d.created_at desc, d.id desc limit $4"
        );
        let limit = limit.min(crate::page::MAX_PAGE_SIZE);
        let (rows, total): (Vec<DeliveryRow>, i64) = on_pool!(self.store.db(), pool => {
            let rows = sqlx::query_as(sqlx::AssertSqlSafe(list_sql))
                .bind(endpoint_id)
                .bind(before.map(|p| p.created_at))
                .bind(before.map(|p| p.id.as_str()))
                .bind(i64::from(limit) + 1)
                .fetch_all(pool)
                .await?;
            let total = sqlx::query_scalar("select count(*) from webhook_deliveries where endpoint_id = $1")
                .bind(endpoint_id)
                .fetch_one(pool)
                .await?;
            (rows, total)
        });
        let deliveries = rows
            .into_iter()
            .map(Delivery::try_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::from_overfetch(deliveries, limit, total, |d| {
            Position::after(d.created_at, d.id.clone())
        }))
    }

    /// A delivery's attempts, in order.
    pub async fn attempts(&self, delivery_id: &str) -> Result<Vec<Attempt>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(
                "select attempt, nonce, started_at, duration_ms, outcome, status_code,
                        response_excerpt, error
                 from webhook_attempts where delivery_id = $1 order by attempt",
            )
            .bind(delivery_id)
            .fetch_all(pool)
            .await?)
        })
    }

    /// A delivery with its endpoint and secret, whoever's it is (workers).
    pub async fn target(&self, delivery_id: &str) -> Result<Option<DeliveryTarget>> {
        let delivery_sql =
            format!("select {DELIVERY_COLUMNS} from webhook_deliveries d where d.id = $1");
        let endpoint_sql = format!(
            "select {ENDPOINT_COLUMNS}, secret_sealed from webhook_endpoints
             where id = $1 and deleted_at is null"
        );
        let found: Option<(DeliveryRow, Option<(EndpointRow, String)>)> = on_pool!(self.store.db(), pool => {
            let delivery: Option<DeliveryRow> = sqlx::query_as(sqlx::AssertSqlSafe(delivery_sql))
                .bind(delivery_id)
                .fetch_optional(pool)
                .await?;
            match delivery {
                None => None,
                Some(delivery) => {
                    let endpoint: Option<EndpointWithSecret> = sqlx::query_as(sqlx::AssertSqlSafe(endpoint_sql))
                        .bind(&delivery.endpoint_id)
                        .fetch_optional(pool)
                        .await?;
                    Some((delivery, endpoint.map(|e| (e.endpoint, e.secret_sealed))))
                }
            }
        });
        let Some((delivery, endpoint)) = found else {
            return Ok(None);
        };
        let delivery = Delivery::try_from(delivery)?;
        let (endpoint, secret) = match endpoint {
            None => (None, None),
            Some((row, sealed)) => {
                let endpoint = WebhookEndpoint::try_from(row)?;
                let secret = self.store.derived_keys().open(&sealed, &endpoint.id);
                if secret.is_none() {
                    return Err(StorageError::Corrupt(format!(
                        "the signing secret of {} does not open",
                        endpoint.id
                    )));
                }
                (Some(endpoint), secret)
            }
        };
        Ok(Some(DeliveryTarget {
            delivery,
            endpoint,
            secret,
        }))
    }

    /// Attempts made to an endpoint since `since` (its hourly inbound budget).
    pub async fn attempts_since(&self, endpoint_id: &str, since: Timestamp) -> Result<i64> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_scalar(
                "select count(*) from webhook_attempts where endpoint_id = $1 and started_at >= $2",
            )
            .bind(endpoint_id)
            .bind(since)
            .fetch_one(pool)
            .await?)
        })
    }

    /// The start of the oldest attempt to an endpoint since `since`: an hour
    /// after it, the hourly budget frees a slot.
    pub async fn oldest_attempt_since(
        &self,
        endpoint_id: &str,
        since: Timestamp,
    ) -> Result<Option<Timestamp>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_scalar(
                "select min(started_at) from webhook_attempts where endpoint_id = $1 and started_at >= $2",
            )
            .bind(endpoint_id)
            .bind(since)
            .fetch_one(pool)
            .await?)
        })
    }

    /// Records attempt number `attempt.attempt` of a delivery and moves the
    /// delivery and its endpoint on, in one transaction. An attempt recorded
    /// before (a job that ran twice) changes nothing. A delivery failing for
    /// good raises the endpoint's failure count; at [`AUTO_DISABLE_AFTER`] the
    /// endpoint is disabled and its agency's owner notified. A success resets
    /// the count.
    pub async fn record_attempt(
        &self,
        delivery: &Delivery,
        attempt: &Attempt,
        after: AfterAttempt,
    ) -> Result<AttemptRecorded> {
        let now = self.store.clock().now();
        let (status, next_at, completed_at) = match after {
            AfterAttempt::Succeeded => (DeliveryStatus::Succeeded, None, Some(now)),
            AfterAttempt::RetryAt(at) => (DeliveryStatus::Retrying, Some(at), None),
            AfterAttempt::Failed => (DeliveryStatus::Failed, None, Some(now)),
        };
        let result = in_transaction!(self.store.db(), |tx| {
            let inserted = sqlx::query(
                "insert into webhook_attempts (delivery_id, attempt, endpoint_id, nonce, started_at,
                     duration_ms, outcome, status_code, response_excerpt, error)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                 on conflict do nothing",
            )
            .bind(&delivery.id)
            .bind(attempt.attempt)
            .bind(&delivery.endpoint_id)
            .bind(&attempt.nonce)
            .bind(attempt.started_at)
            .bind(attempt.duration_ms)
            .bind(&attempt.outcome)
            .bind(attempt.status_code)
            .bind(&attempt.response_excerpt)
            .bind(&attempt.error)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                AttemptRecorded {
                    recorded: false,
                    consecutive_failures: 0,
                    disabled_endpoint: false,
                    notification_id: None,
                }
            } else {
                sqlx::query(
                    "update webhook_deliveries set status = $2, attempts = $3, next_attempt_at = $4,
                         completed_at = $5
                     where id = $1",
                )
                .bind(&delivery.id)
                .bind(status.as_str())
                .bind(attempt.attempt)
                .bind(next_at)
                .bind(completed_at)
                .execute(&mut *tx)
                .await?;
                // Replays and test fires are an owner's probes: they do not
                // move the endpoint's health.
                let counts = delivery.kind == DeliveryKind::Event;
                let mut notification_id = None;
                let (failures, disabled) = match after {
                    AfterAttempt::Succeeded if counts => {
                        sqlx::query(
                            "update webhook_endpoints set consecutive_failures = 0 where id = $1",
                        )
                        .bind(&delivery.endpoint_id)
                        .execute(&mut *tx)
                        .await?;
                        (0, false)
                    }
                    AfterAttempt::Failed if counts => {
                        let counted: Option<(i32, String)> = sqlx::query_as(
                            "update webhook_endpoints set consecutive_failures = consecutive_failures + 1
                             where id = $1 and deleted_at is null
                             returning consecutive_failures, status",
                        )
                        .bind(&delivery.endpoint_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                        // A deleted endpoint counts nothing and is disabled by nobody.
                        let (failures, status) = counted.unwrap_or((0, String::new()));
                        let disable = failures >= AUTO_DISABLE_AFTER && status == "enabled";
                        if disable {
                            sqlx::query(
                                "update webhook_endpoints set status = 'disabled', disabled_reason = $2,
                                     disabled_at = $3, updated_at = $3
                                 where id = $1",
                            )
                            .bind(&delivery.endpoint_id)
                            .bind(AUTO_DISABLED_REASON)
                            .bind(now)
                            .execute(&mut *tx)
                            .await?;
                            let owner: Option<UserId> = sqlx::query_scalar(
                                "select u.id from users u join agencies a on a.id = u.agency_id
                                 where u.agency_id = $1 and u.role = a.kind and u.is_active
                                 order by u.created_at, u.id limit 1",
                            )
                            .bind(&delivery.agency_id)
                            .fetch_optional(&mut *tx)
                            .await?;
                            let id = new_id("ntf_");
                            sqlx::query(
                                "insert into notifications (id, agency_id, user_id, kind, subject, body, created_at,
                                     is_sandbox)
                                 values ($1, $2, $3, 'webhook_endpoint_disabled', $4, $5, $6,
                                     (select is_sandbox from webhook_endpoints where id = $7))",
                            )
                            .bind(&id)
                            .bind(&delivery.agency_id)
                            .bind(owner)
                            .bind(format!("Webhook endpoint {} was disabled", delivery.endpoint_id))
                            .bind(format!(
                                "Deliveries to webhook endpoint {} failed {failures} times in a row, so it \
                                 was disabled ({AUTO_DISABLED_REASON}). Fix the receiver, then re-enable \
                                 the endpoint; failed deliveries can be replayed.",
                                delivery.endpoint_id
                            ))
                            .bind(now)
                            .bind(&delivery.endpoint_id)
                            .execute(&mut *tx)
                            .await?;
                            notification_id = Some(id);
                        }
                        (failures, disable)
                    }
                    _ => (0, false),
                };
                AttemptRecorded {
                    recorded: true,
                    consecutive_failures: failures,
                    disabled_endpoint: disabled,
                    notification_id,
                }
            }
        });
        Ok(result)
    }

    /// Gives up a delivery without an attempt (its endpoint was deleted or disabled).
    pub async fn abandon(&self, delivery_id: &str) -> Result<bool> {
        let now = self.store.clock().now();
        let updated = in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "update webhook_deliveries set status = 'failed', next_attempt_at = null, completed_at = $2
                 where id = $1 and status in ('pending', 'retrying')",
            )
            .bind(delivery_id)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        });
        Ok(updated == 1)
    }

    /// Deliveries whose next attempt was due before `before` but has not
    /// been made (a lost push, a dead job): `(delivery id, attempt number)`,
    /// oldest first. Their due time moves to `offered_again_at`, so a
    /// delivery the sweep just offered leaves the head of the line and is
    /// offered again only then. Replays and test fires left pending (their
    /// request went away mid-attempt) are failed.
    pub async fn sweep_overdue(
        &self,
        before: Timestamp,
        offered_again_at: Timestamp,
        limit: u32,
    ) -> Result<Vec<(String, i32)>> {
        let now = self.store.clock().now();
        let rows = in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "update webhook_deliveries set status = 'failed', next_attempt_at = null, completed_at = $2
                 where kind <> 'event' and status = 'pending' and created_at < $1",
            )
            .bind(before)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            let rows: Vec<(String, i32)> = sqlx::query_as(
                "update webhook_deliveries set next_attempt_at = $2
                 where id in (
                     select id from webhook_deliveries
                     where status in ('pending', 'retrying') and next_attempt_at < $1
                       and kind = 'event'
                     order by next_attempt_at limit $3)
                 returning id, attempts + 1",
            )
            .bind(before)
            .bind(offered_again_at)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
            rows
        });
        Ok(rows)
    }

    /// Moves a delivery's next attempt to `at` (held back by its endpoint's
    /// hourly budget).
    pub async fn defer(&self, delivery_id: &str, at: Timestamp) -> Result<()> {
        in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "update webhook_deliveries set next_attempt_at = $2
                 where id = $1 and status in ('pending', 'retrying')",
            )
            .bind(delivery_id)
            .bind(at)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// Deletes finished deliveries (and their attempts) completed before
    /// `before`, at most `limit`; returns how many.
    pub async fn purge_finished(&self, before: Timestamp, limit: u32) -> Result<u64> {
        // Attempts go with their delivery (on delete cascade).
        let deleted = in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "delete from webhook_deliveries where id in (
                     select id from webhook_deliveries where completed_at < $1 limit $2)",
            )
            .bind(before)
            .bind(i64::from(limit))
            .execute(&mut *tx)
            .await?
            .rows_affected()
        });
        Ok(deleted)
    }

    /// A notification with its recipient's e-mail address, if any.
    pub async fn notification_to_send(
        &self,
        id: &str,
    ) -> Result<Option<(Notification, Option<String>, Option<Timestamp>)>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            #[sqlx(flatten)]
            notification: Notification,
            email: Option<String>,
            sent_at: Option<Timestamp>,
        }
        let row: Option<Row> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select n.id, n.agency_id, n.user_id, n.kind, n.subject, n.body, n.created_at, n.is_sandbox,
                        u.email, n.sent_at
                 from notifications n left join users u on u.id = n.user_id
                 where n.id = $1",
            )
            .bind(id)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|r| (r.notification, r.email, r.sent_at)))
    }

    /// Records that a notification was e-mailed.
    pub async fn mark_notification_sent(&self, id: &str) -> Result<()> {
        let now = self.store.clock().now();
        in_transaction!(self.store.db(), |tx| {
            sqlx::query("update notifications set sent_at = $2 where id = $1 and sent_at is null")
                .bind(id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        });
        Ok(())
    }

    /// Notifications raised before `before` whose recipient has an e-mail
    /// address and which were not e-mailed yet.
    pub async fn unsent_notifications(&self, before: Timestamp, limit: u32) -> Result<Vec<String>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_scalar(
                "select n.id from notifications n join users u on u.id = n.user_id
                 where n.sent_at is null and n.created_at < $1 and u.email is not null
                 order by n.created_at limit $2",
            )
            .bind(before)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?)
        })
    }

    /// The agency's notifications, newest first.
    pub async fn notifications(&self, agency_id: &AgencyId) -> Result<Vec<Notification>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(
                "select id, agency_id, user_id, kind, subject, body, created_at, is_sandbox
                 from notifications where agency_id = $1 order by created_at desc, id desc",
            )
            .bind(agency_id)
            .fetch_all(pool)
            .await?)
        })
    }
}

#[derive(sqlx::FromRow)]
struct EndpointWithSecret {
    #[sqlx(flatten)]
    endpoint: EndpointRow,
    secret_sealed: String,
}
