//! A webhook endpoint as stored: which events it hears, whether it is
//! enabled, its record and columns, and what creating or changing one takes.

use sqlx::types::Json;

use crate::ids::{AgencyId, UserId, WebhookEndpointId};
use crate::{Environment, Result, StorageError, Timestamp};

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

/// How an endpoint's deliveries are signed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SignatureScheme {
    /// The specification's headers: `X-Webhook-Signature: sha256=<hex>` over
    /// `<timestamp>.<body>`, keyed with the secret string's bytes.
    #[default]
    Spec,
    /// Standard Webhooks (standardwebhooks.com): `webhook-id`,
    /// `webhook-timestamp` and `webhook-signature: v1,<base64>` over
    /// `<id>.<timestamp>.<body>`, keyed with the secret's base64-decoded bytes,
    /// so receivers can verify with a Standard Webhooks library.
    StandardWebhooks,
}

impl SignatureScheme {
    /// The wire and column value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Spec => "spec",
            Self::StandardWebhooks => "standard_webhooks",
        }
    }

    /// Parses a wire value (`spec`, `standard_webhooks`; case and `-` or
    /// space for `_` do not matter).
    pub fn parse(text: &str) -> Option<Self> {
        match text
            .trim()
            .to_ascii_lowercase()
            .replace(['-', ' '], "_")
            .as_str()
        {
            "spec" => Some(Self::Spec),
            "standard_webhooks" | "standardwebhooks" => Some(Self::StandardWebhooks),
            _ => None,
        }
    }
}

/// In what order an endpoint's deliveries are made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeliveryOrdering {
    /// As soon as each can be: a retried delivery does not hold up others.
    #[default]
    None,
    /// Events about the same listing in commit order: a later one waits
    /// while an earlier one is pending or retrying; other listings go on.
    Listing,
}

impl DeliveryOrdering {
    /// The wire and column value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Listing => "listing",
        }
    }

    /// Parses a wire value (`none`, `listing`; case does not matter).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Some(Self::None),
            "listing" => Some(Self::Listing),
            _ => None,
        }
    }

    /// The key deliveries of an event with `data` are ordered by, if any.
    pub fn key_of(self, data: &serde_json::Value) -> Option<String> {
        match self {
            Self::None => None,
            Self::Listing => data
                .get("listing_number")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        }
    }
}

/// Why the platform disabled an endpoint after consecutive failed deliveries.
pub const AUTO_DISABLED_REASON: &str = "auto_disabled_consecutive_failures";
/// Why an owner's own disable is recorded.
pub const MANUALLY_DISABLED_REASON: &str = "disabled_by_owner";
/// How long a rotated signing secret keeps signing by default: a day.
pub const DEFAULT_SECRET_OVERLAP_SECONDS: i64 = 86_400;
/// The longest overlap a rotation may ask for: 7 days.
pub const MAX_SECRET_OVERLAP_SECONDS: i64 = 7 * 86_400;
/// Deliveries an endpoint receives per hour unless its owner sets otherwise
/// (the specification's limit).
pub const DEFAULT_HOURLY_BUDGET: i32 = 1000;
/// The largest hourly budget an endpoint may set (one delivery every 3.6 ms
/// once a burst is spent); more is turning the budget off.
pub const MAX_HOURLY_BUDGET: i32 = 1_000_000;
/// Consecutive failed deliveries that disable an endpoint.
pub const AUTO_DISABLE_AFTER: i32 = 50;

/// A registered endpoint (never its secret).
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookEndpoint {
    /// `whe_…`.
    pub id: WebhookEndpointId,
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
    /// Until when the secret replaced by the last rotation still signs
    /// deliveries too (none: no overlap).
    pub previous_secret_expires_at: Option<Timestamp>,
    /// How its deliveries are signed.
    pub signature_scheme: SignatureScheme,
    /// Deliveries it receives per hour, spent evenly with bursts of up to
    /// the whole budget; `None`: no budget.
    pub hourly_budget: Option<i32>,
    /// Deliveries its budget holds back now (filled by the reads that show
    /// an endpoint; zero where not).
    pub held_back: HeldBack,
    /// In what order its deliveries are made.
    pub ordering: DeliveryOrdering,
}

/// An endpoint's deliveries held back by its hourly budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeldBack {
    /// How many.
    pub count: i64,
    /// When the first of them is released.
    pub next_release_at: Option<Timestamp>,
}

impl WebhookEndpoint {
    /// The end of the rotation overlap, if it is still running at `now`.
    pub fn overlap_until(&self, now: Timestamp) -> Option<Timestamp> {
        self.previous_secret_expires_at.filter(|until| *until > now)
    }

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
pub(super) struct EndpointRow {
    id: WebhookEndpointId,
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
    previous_secret_expires_at: Option<Timestamp>,
    signature_scheme: String,
    hourly_budget: Option<i32>,
    ordering: String,
}

pub(super) const ENDPOINT_COLUMNS: &str = "id, agency_id, is_sandbox, name, url, event_types, environment, status, \
     disabled_reason, disabled_at, consecutive_failures, created_by, created_at, updated_at, \
     previous_secret_expires_at, signature_scheme, hourly_budget, ordering";

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
        let ordering = DeliveryOrdering::parse(&row.ordering)
            .ok_or_else(|| StorageError::Corrupt(format!("endpoint ordering {}", row.ordering)))?;
        let signature_scheme = SignatureScheme::parse(&row.signature_scheme).ok_or_else(|| {
            StorageError::Corrupt(format!(
                "endpoint signature scheme {}",
                row.signature_scheme
            ))
        })?;
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
            previous_secret_expires_at: row.previous_secret_expires_at,
            signature_scheme,
            hourly_budget: row.hourly_budget,
            held_back: HeldBack::default(),
            ordering,
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
    /// How its deliveries are signed.
    pub signature_scheme: SignatureScheme,
    /// Deliveries per hour; `None`: no budget.
    pub hourly_budget: Option<i32>,
    /// In what order its deliveries are made.
    pub ordering: DeliveryOrdering,
    /// The acting user.
    pub created_by: Option<UserId>,
}

impl Default for NewEndpoint {
    /// No label, every event type, live events, the default options, no URL
    /// yet (set one).
    fn default() -> Self {
        Self {
            name: None,
            url: String::new(),
            event_types: None,
            environment: EndpointEnvironment::Live,
            signature_scheme: SignatureScheme::default(),
            hourly_budget: Some(DEFAULT_HOURLY_BUDGET),
            ordering: DeliveryOrdering::default(),
            created_by: None,
        }
    }
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
    /// New signature scheme.
    pub signature_scheme: Option<SignatureScheme>,
    /// New hourly budget (`Some(None)` turns it off). A change releases the
    /// deliveries the old budget held back.
    pub hourly_budget: Option<Option<i32>>,
    /// New ordering (a change wakes the deliveries waiting for their turn).
    pub ordering: Option<DeliveryOrdering>,
}

/// A new signing secret: `whsec_` + 32 random bytes in standard base64 (the
/// form Standard Webhooks libraries decode).
pub fn generate_secret() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes[..]);
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// The HMAC key of a secret under Standard Webhooks: the bytes its text after
/// `whsec_` encodes in base64 (standard, or the base64url of secrets issued
/// before 2026-11-26), or the text's own bytes when it is neither.
pub fn standard_webhooks_key(secret: &str) -> Vec<u8> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    STANDARD
        .decode(encoded)
        .or_else(|_| URL_SAFE_NO_PAD.decode(encoded))
        .unwrap_or_else(|_| secret.as_bytes().to_vec())
}

#[derive(sqlx::FromRow)]
/// An endpoint's row with its sealed signing secret.
pub(super) struct EndpointWithSecret {
    #[sqlx(flatten)]
    pub(super) endpoint: EndpointRow,
    pub(super) secret_sealed: String,
    pub(super) previous_secret_sealed: Option<String>,
}
