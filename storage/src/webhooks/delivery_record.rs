//! A delivery as stored: its kind and status, its record and columns, its
//! attempts, and what recording an attempt or a fan-out reports.

use std::collections::HashMap;

use serde_json::Value;
use sqlx::types::Json;

use super::endpoint_record::WebhookEndpoint;
use crate::background::outbox::StoredEvent;
use crate::db::Commit;
use crate::ids::{AgencyId, DeliveryId, EventId, NotificationId, WebhookEndpointId};
use crate::{Result, StorageError, Timestamp};

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

    /// The status a column value names.
    pub fn parse(text: &str) -> Result<Self> {
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
    pub id: DeliveryId,
    /// The endpoint.
    pub endpoint_id: WebhookEndpointId,
    /// The endpoint's agency.
    pub agency_id: AgencyId,
    /// Event, replay or test fire.
    pub kind: DeliveryKind,
    /// The delivery a replay repeats.
    pub replay_of: Option<DeliveryId>,
    /// `event_id` of the envelope (kept by replays).
    pub event_id: EventId,
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
pub(super) struct DeliveryRow {
    id: DeliveryId,
    pub(super) endpoint_id: WebhookEndpointId,
    agency_id: AgencyId,
    kind: String,
    replay_of: Option<DeliveryId>,
    event_id: EventId,
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

pub(super) const DELIVERY_COLUMNS: &str = "d.id, d.endpoint_id, d.agency_id, d.kind, d.replay_of, d.event_id, \
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

impl AfterAttempt {
    /// The delivery's status, next attempt time and completion time after
    /// this, at `now`.
    pub(super) fn moves_to(
        self,
        now: Timestamp,
    ) -> (DeliveryStatus, Option<Timestamp>, Option<Timestamp>) {
        match self {
            Self::Succeeded => (DeliveryStatus::Succeeded, None, Some(now)),
            Self::RetryAt(at) => (DeliveryStatus::Retrying, Some(at), None),
            Self::Failed => (DeliveryStatus::Failed, None, Some(now)),
        }
    }
}

/// An attempt of a delivery to record, with what follows it.
#[derive(Clone, Debug)]
pub struct AttemptToRecord {
    /// The delivery attempted.
    pub delivery: Delivery,
    /// The attempt.
    pub attempt: Attempt,
    /// What happens to the delivery next.
    pub after: AfterAttempt,
}

impl AttemptToRecord {
    /// Whether it moves its endpoint's health: replays and test fires are
    /// an owner's probes and do not.
    pub(super) fn counts(&self) -> bool {
        self.delivery.kind == DeliveryKind::Event
    }
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
    /// The notification raised for the owner: the warning at 40 failures in
    /// a row, or the notice of the disable.
    pub notification_id: Option<NotificationId>,
    /// The next delivery in order, woken because this one ended, for the
    /// caller to offer to the workers.
    pub next_in_order: Option<DueAttempt>,
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
    pub deliveries: Vec<DueAttempt>,
    /// What the first attempt of each new delivery needs, read in the
    /// fan-out's transaction: an attempt made in this process need neither
    /// read it again nor wait for the commit to see it. A delivery whose
    /// endpoint's secret does not open has none.
    pub targets: HashMap<DeliveryId, DeliveryTarget>,
    /// The fan-out's commit: await it before another process is told of
    /// the deliveries (a pushed job reads them from the store).
    pub commit: Commit,
}

/// An attempt of a delivery to push: which delivery, to which endpoint (the
/// queue shares its slots fairly between endpoints) and its number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DueAttempt {
    /// The delivery.
    pub delivery_id: DeliveryId,
    /// Its endpoint.
    pub endpoint_id: WebhookEndpointId,
    /// The attempt's number, from 1.
    pub attempt: i32,
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
    /// The secret its last rotation replaced, while the overlap runs.
    pub previous_secret: Option<String>,
    /// The slot its endpoint's hourly budget reserved for its next attempt,
    /// when it was held back.
    pub held_until: Option<Timestamp>,
    /// What it is delivered in order with (its listing, on an ordered endpoint).
    pub order_key: Option<String>,
    /// Its event's place in commit order.
    pub event_seq: Option<i64>,
}

impl DeliveryTarget {
    /// Every secret that signs an attempt now: the current one first.
    pub fn signing_secrets(&self) -> Vec<String> {
        self.secret
            .iter()
            .chain(self.previous_secret.iter())
            .cloned()
            .collect()
    }
}
