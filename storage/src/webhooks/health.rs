//! An endpoint's health as its owner and the agency's other endpoints hear
//! of it: the owner is warned at [`WARN_AFTER`] failed deliveries in a row
//! and told when [`AUTO_DISABLE_AFTER`] disabled the endpoint;
//! `webhook.endpoint.disabled` and `webhook.endpoint.recovered` go to the
//! agency's other endpoints that subscribe (never to the endpoint itself).

use serde_json::{Value, json};

use super::delivery_record::Delivery;
use super::endpoint_record::{AUTO_DISABLE_AFTER, AUTO_DISABLED_REASON};
use crate::ids::WebhookEndpointId;
use crate::rules::events::{EventType, NewEvent};
use crate::{Environment, Tenant, Timestamp};

/// Failed deliveries in a row at which the owner is warned, before the
/// disable at [`AUTO_DISABLE_AFTER`].
pub const WARN_AFTER: i32 = 40;
/// Failed deliveries in a row after which the next success is reported as
/// `webhook.endpoint.recovered`.
pub const RECOVERED_AFTER: i32 = 5;

/// The notification kind of the warning.
pub const FAILING_NOTIFICATION: &str = "webhook_endpoint_failing";
/// The notification kind of the disable.
pub const DISABLED_NOTIFICATION: &str = "webhook_endpoint_disabled";

/// The endpoint a health event or notice is about.
pub(super) struct HealthSubject<'a> {
    /// Its agency and environment: where its health events are emitted.
    pub(super) tenant: Tenant,
    pub(super) endpoint_id: &'a WebhookEndpointId,
    pub(super) url: &'a str,
    pub(super) name: Option<&'a str>,
}

impl<'a> HealthSubject<'a> {
    /// The endpoint `delivery` went to, registered in the sandbox or not
    /// (`endpoint_is_sandbox`: its health events go to that environment,
    /// whichever environment the delivery's event came from).
    pub(super) fn of(
        delivery: &'a Delivery,
        endpoint_is_sandbox: bool,
        url: &'a str,
        name: Option<&'a str>,
    ) -> Self {
        Self {
            tenant: Tenant::new(
                delivery.agency_id.clone(),
                Environment::from_sandbox_flag(endpoint_is_sandbox),
            ),
            endpoint_id: &delivery.endpoint_id,
            url,
            name,
        }
    }
}

/// A notification to write for the owner.
pub(super) struct Notice {
    pub(super) kind: &'static str,
    pub(super) subject: String,
    pub(super) body: String,
}

impl HealthSubject<'_> {
    /// `webhook.endpoint.disabled` after `failures` in a row.
    pub(super) fn disabled(&self, failures: i32, at: Timestamp) -> NewEvent {
        NewEvent::new(
            EventType::WebhookEndpointDisabled,
            disabled_data(self.endpoint_id, self.url, self.name, failures, at),
        )
    }

    /// `webhook.endpoint.recovered` after `failures` in a row.
    pub(super) fn recovered(&self, failures: i32, at: Timestamp) -> NewEvent {
        NewEvent::new(
            EventType::WebhookEndpointRecovered,
            recovered_data(self.endpoint_id, self.url, self.name, failures, at),
        )
    }

    /// The owner's warning at [`WARN_AFTER`].
    pub(super) fn failing_notice(&self, failures: i32) -> Notice {
        Notice {
            kind: FAILING_NOTIFICATION,
            subject: format!("Webhook endpoint {} is failing", self.endpoint_id),
            body: format!(
                "Deliveries to webhook endpoint {id} ({url}) failed {failures} times in a row. \
                 At {AUTO_DISABLE_AFTER} it is disabled and receives nothing until re-enabled. \
                 Check that the receiver answers 2xx within 10 seconds and verifies the \
                 signature with the current secret; once it does, recover what it missed with \
                 POST /api/v1/webhooks/endpoints/{id}/recover.",
                id = self.endpoint_id,
                url = self.url,
            ),
        }
    }

    /// The owner's notice of the disable.
    pub(super) fn disabled_notice(&self, failures: i32) -> Notice {
        Notice {
            kind: DISABLED_NOTIFICATION,
            subject: format!("Webhook endpoint {} was disabled", self.endpoint_id),
            body: format!(
                "Deliveries to webhook endpoint {id} failed {failures} times in a row, so it \
                 was disabled ({AUTO_DISABLED_REASON}). Fix the receiver, then re-enable \
                 the endpoint; failed deliveries can be replayed, or all re-sent at once with \
                 POST /api/v1/webhooks/endpoints/{id}/recover.",
                id = self.endpoint_id,
            ),
        }
    }
}

/// The data of `webhook.endpoint.disabled`.
pub fn disabled_data(
    endpoint_id: &WebhookEndpointId,
    url: &str,
    name: Option<&str>,
    failures: i32,
    at: Timestamp,
) -> Value {
    json!({
        "endpoint_id": endpoint_id,
        "name": name,
        "url": url,
        "reason": AUTO_DISABLED_REASON,
        "consecutive_failures": failures,
        "disabled_at": at.to_rfc3339(),
    })
}

/// The data of `webhook.endpoint.recovered`.
pub fn recovered_data(
    endpoint_id: &WebhookEndpointId,
    url: &str,
    name: Option<&str>,
    failures: i32,
    at: Timestamp,
) -> Value {
    json!({
        "endpoint_id": endpoint_id,
        "name": name,
        "url": url,
        "failures_before_recovery": failures,
        "recovered_at": at.to_rfc3339(),
    })
}

/// Whether an event is about `endpoint_id` itself (a health event), which
/// that endpoint is not sent.
pub fn is_about(event_type: &str, data: &Value, endpoint_id: &WebhookEndpointId) -> bool {
    event_type.starts_with("webhook.endpoint.")
        && data.get("endpoint_id").and_then(Value::as_str) == Some(endpoint_id.as_str())
}
