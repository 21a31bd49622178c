//! `webhook_recovery`: re-sending what an endpoint missed.

use serde::{Deserialize, Serialize};
use storage::ids::{AgencyId, RecoveryId, WebhookEndpointId};

use super::job::Job;

/// Re-send, one at a time at its own pace, every delivery of an endpoint that
/// failed since a time (`POST /webhooks/endpoints/{id}/recover`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoverWebhookEndpoint {
    /// The recovery (`whr_…`), which records its progress.
    pub recovery_id: RecoveryId,
    /// The endpoint.
    pub endpoint_id: WebhookEndpointId,
    /// Its agency.
    pub agency_id: AgencyId,
}

impl Job for RecoverWebhookEndpoint {
    const KIND: &'static str = "webhook_recovery";
    const MAX_ATTEMPTS: usize = 5;
    const DEFAULT_CONCURRENCY: usize = 2;

    /// The recovery: pushed once.
    fn dedupe_key(&self) -> Option<String> {
        Some(format!("recovery:{}", self.recovery_id))
    }

    fn agency(&self) -> Option<String> {
        Some(self.agency_id.to_string())
    }

    fn endpoint(&self) -> Option<String> {
        Some(self.endpoint_id.to_string())
    }
}
