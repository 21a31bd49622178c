//! Wire types shared by several webhook routes: the endpoint as every
//! endpoint route returns it, the delivery and its attempts as the delivery,
//! replay and test-fire routes return them, and the page query of the lists.

use serde::{Deserialize, Serialize};
use storage::webhooks::{Attempt, Delivery, WebhookEndpoint};
use utoipa::ToSchema;

/// A webhook endpoint (never its secret).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EndpointOut {
    /// `whe_…`.
    pub id: String,
    /// Optional label.
    pub name: Option<String>,
    /// HTTPS URL deliveries go to.
    pub url: String,
    /// Canonical event types it receives; `null` receives every type,
    /// including types added later.
    pub event_types: Option<Vec<String>>,
    /// `live`, `sandbox` or `both`: which events it receives.
    pub environment: String,
    /// `enabled` or `disabled`.
    pub status: String,
    /// Why it is disabled: `auto_disabled_consecutive_failures` or `disabled_by_owner`.
    pub disabled_reason: Option<String>,
    /// When it was disabled.
    pub disabled_at: Option<String>,
    /// Deliveries that failed for good in a row; 50 disables the endpoint.
    pub consecutive_failures: i32,
    /// Registration time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
    /// Until when the secret replaced by the last rotation still signs
    /// deliveries alongside the current one (a past time: the overlap has
    /// ended; `null`: the last rotation had none).
    pub previous_secret_expires_at: Option<String>,
    /// How deliveries are signed: `spec` (`X-Webhook-Signature`) or
    /// `standard_webhooks` (`webhook-id`, `webhook-timestamp`,
    /// `webhook-signature`).
    pub signature_scheme: String,
    /// Deliveries per hour (default 1000), spent evenly with bursts of up to
    /// the whole budget; `null`: no budget.
    pub hourly_budget: Option<i32>,
    /// Deliveries the hourly budget holds back now, released one slot at a
    /// time (`3600 s / hourly_budget` apart).
    pub held_back: HeldBackOut,
    /// `none`, or `listing`: events about one listing are delivered in
    /// commit order.
    pub ordering: String,
}

/// What an endpoint's hourly budget holds back.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HeldBackOut {
    /// How many deliveries.
    pub count: i64,
    /// When the next of them is released.
    pub next_release_at: Option<String>,
}

impl From<WebhookEndpoint> for EndpointOut {
    fn from(endpoint: WebhookEndpoint) -> Self {
        Self {
            id: endpoint.id.to_string(),
            name: endpoint.name,
            url: endpoint.url,
            event_types: endpoint.event_types,
            environment: endpoint.environment.as_str().to_owned(),
            status: endpoint.status.as_str().to_owned(),
            disabled_reason: endpoint.disabled_reason,
            disabled_at: endpoint.disabled_at.map(|t| t.to_rfc3339()),
            consecutive_failures: endpoint.consecutive_failures,
            created_at: endpoint.created_at.to_rfc3339(),
            updated_at: endpoint.updated_at.to_rfc3339(),
            previous_secret_expires_at: endpoint.previous_secret_expires_at.map(|t| t.to_rfc3339()),
            signature_scheme: endpoint.signature_scheme.as_str().to_owned(),
            hourly_budget: endpoint.hourly_budget,
            held_back: HeldBackOut {
                count: endpoint.held_back.count,
                next_release_at: endpoint.held_back.next_release_at.map(|t| t.to_rfc3339()),
            },
            ordering: endpoint.ordering.as_str().to_owned(),
        }
    }
}

/// An endpoint with its signing secret, shown once (registration, rotation).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EndpointWithSecretOut {
    /// The endpoint.
    #[serde(flatten)]
    pub endpoint: EndpointOut,
    /// The signing secret (`whsec_…`): HMAC-SHA256 key of the signature
    /// header. Shown only in this response.
    pub secret: String,
}

/// Query of the list routes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// The `next_cursor` of the previous page.
    pub(super) cursor: Option<String>,
    /// Page size, 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub(super) limit: Option<i64>,
}

/// One attempt of a delivery.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AttemptOut {
    /// 1 for the first.
    pub attempt: i32,
    /// When it started.
    pub started_at: String,
    /// How long it took.
    pub duration_ms: i32,
    /// `succeeded`, `http_error`, `timeout`, `connection_failed` or `refused`.
    pub outcome: String,
    /// The receiver's status code.
    pub status_code: Option<i32>,
    /// The start of the receiver's answer (at most 1 KiB).
    pub response_excerpt: Option<String>,
    /// What went wrong when no answer came.
    pub error: Option<String>,
    /// The envelope nonce of this attempt.
    pub nonce: String,
}

impl From<Attempt> for AttemptOut {
    fn from(attempt: Attempt) -> Self {
        Self {
            attempt: attempt.attempt,
            started_at: attempt.started_at.to_rfc3339(),
            duration_ms: attempt.duration_ms,
            outcome: attempt.outcome,
            status_code: attempt.status_code,
            response_excerpt: attempt.response_excerpt,
            error: attempt.error,
            nonce: attempt.nonce,
        }
    }
}

/// A delivery of an event to an endpoint.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryOut {
    /// `whd_…`.
    pub id: String,
    /// The endpoint.
    pub endpoint_id: String,
    /// `event`, `replay` or `test_fire`.
    pub kind: String,
    /// The delivery a replay repeats.
    pub replay_of: Option<String>,
    /// `event_id` of the envelope (`X-Event-Id`).
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// Sandbox activity.
    pub is_sandbox: bool,
    /// `pending`, `retrying`, `succeeded` or `failed`.
    pub status: String,
    /// Attempts made (at most 5).
    pub attempts: i32,
    /// When the next attempt is due.
    pub next_attempt_at: Option<String>,
    /// Creation time.
    pub created_at: String,
    /// When it succeeded or failed for good.
    pub completed_at: Option<String>,
    /// The attempts, oldest first (single-delivery reads only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_log: Option<Vec<AttemptOut>>,
}

impl DeliveryOut {
    pub(super) fn new(delivery: Delivery, attempts: Option<Vec<Attempt>>) -> Self {
        Self {
            id: delivery.id.to_string(),
            endpoint_id: delivery.endpoint_id.to_string(),
            kind: delivery.kind.as_str().to_owned(),
            replay_of: delivery.replay_of.map(|id| id.to_string()),
            event_id: delivery.event_id.to_string(),
            event_type: delivery.event_type,
            is_sandbox: delivery.is_sandbox,
            status: delivery.status.as_str().to_owned(),
            attempts: delivery.attempts,
            next_attempt_at: delivery.next_attempt_at.map(|t| t.to_rfc3339()),
            created_at: delivery.created_at.to_rfc3339(),
            completed_at: delivery.completed_at.map(|t| t.to_rfc3339()),
            attempt_log: attempts.map(|a| a.into_iter().map(AttemptOut::from).collect()),
        }
    }
}
