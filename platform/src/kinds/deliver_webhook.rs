//! `webhook_delivery`: one attempt of one webhook delivery.

use serde::{Deserialize, Serialize};
use storage::ids::{DeliveryId, WebhookEndpointId};

use super::job::Job;

/// Make attempt `attempt` of a webhook delivery. The HTTP retry schedule is
/// the delivery's own (each failed attempt pushes the next with `run_at`);
/// the job's attempts only cover a worker failing before it recorded one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliverWebhook {
    /// The delivery (`whd_…`).
    pub delivery_id: DeliveryId,
    /// Which attempt, from 1.
    pub attempt: u32,
    /// The delivery's endpoint (`whe_…`): endpoints take turns. Absent from
    /// jobs pushed before the field existed; those go first in, first out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<WebhookEndpointId>,
}

impl Job for DeliverWebhook {
    const KIND: &'static str = "webhook_delivery";
    const MAX_ATTEMPTS: usize = 5;
    /// Attempts wait on receivers, not on the core. As many as write
    /// pacing's default backlog (100, `WEBHOOK_BACKLOG_LIMIT`) and more: a
    /// paced burst's first attempts then fit the process's first-attempt
    /// slots (as many again) instead of spilling into the queue. The api
    /// crate asserts this at compile time, and `api serve` warns when a
    /// configured backlog limit outgrows the configured slots.
    const DEFAULT_CONCURRENCY: usize = 128;

    /// The attempt: each attempt number of a delivery is pushed once.
    fn dedupe_key(&self) -> Option<String> {
        Some(format!("{}:{}", self.delivery_id, self.attempt))
    }

    /// Its endpoint: a slow or busy endpoint does not hold up the others.
    fn fairness_key(&self) -> Option<String> {
        self.endpoint_id.as_ref().map(ToString::to_string)
    }

    fn endpoint(&self) -> Option<String> {
        self.endpoint_id.as_ref().map(ToString::to_string)
    }
}

impl DeliverWebhook {
    /// The job of a due attempt.
    pub fn of(due: storage::webhooks::DueAttempt) -> Self {
        Self {
            delivery_id: due.delivery_id,
            attempt: u32::try_from(due.attempt).unwrap_or(1),
            endpoint_id: Some(due.endpoint_id),
        }
    }
}
