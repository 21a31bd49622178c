//! `webhook_recovery`: re-sends every delivery of an endpoint that failed
//! for good since a time, oldest first, one attempt each, at its own pace
//! ([`RESENDS_PER_SECOND`], apart from the endpoint's hourly budget, which
//! paces new events). Each re-send is a replay in the delivery log; the
//! recovery's counts are written as it goes, so its progress can be read. A
//! re-run after a crash skips what was re-sent. If the endpoint is disabled
//! or deleted meanwhile, the recovery stops, failed, and says why.

use std::time::Duration;

use platform::kinds::RecoverWebhookEndpoint;
use storage::webhooks::{AttemptOutcome, DeliveryKind, EndpointStatus, Recovery, RecoveryStatus};

use super::{Handler, JobError, WorkerState};
use platform::webhooks;

/// Re-sends a recovery makes per second at most.
pub const RESENDS_PER_SECOND: u32 = 20;
/// Deliveries read at a time.
const PAGE: u32 = 100;

impl Handler for RecoverWebhookEndpoint {
    async fn run(&self, state: &WorkerState, _attempt: usize) -> Result<(), JobError> {
        let webhooks = state.platform.store.webhooks();
        let Some(mut recovery) = webhooks.recovery_to_run(&self.recovery_id).await? else {
            return Ok(());
        };
        if recovery.status.is_final() {
            return Ok(());
        }
        recovery.status = RecoveryStatus::Running;
        webhooks.record_recovery(&recovery).await?;
        let pause = Duration::from_secs(1) / RESENDS_PER_SECOND;
        loop {
            let batch = webhooks.deliveries_to_recover(&recovery, PAGE).await?;
            if batch.is_empty() {
                break;
            }
            for failed in batch {
                if let Err(reason) = resend(state, &mut recovery, failed).await? {
                    recovery.status = RecoveryStatus::Failed;
                    recovery.error = Some(reason);
                    webhooks.record_recovery(&recovery).await?;
                    return Ok(());
                }
                webhooks.record_recovery(&recovery).await?;
                tokio::time::sleep(pause).await;
            }
        }
        recovery.status = RecoveryStatus::Completed;
        webhooks.record_recovery(&recovery).await?;
        Ok(())
    }
}

/// Re-sends one failed delivery as a replay and counts it; `Err` with the
/// reason when the endpoint can no longer receive.
async fn resend(
    state: &WorkerState,
    recovery: &mut Recovery,
    failed: storage::webhooks::Delivery,
) -> Result<Result<(), String>, JobError> {
    let webhooks = state.platform.store.webhooks();
    let Some(target) = webhooks.target(&failed.id).await? else {
        // Purged meanwhile: nothing left to re-send.
        return Ok(Ok(()));
    };
    let secrets = target.signing_secrets();
    let Some(endpoint) = target.endpoint else {
        return Ok(Err("the endpoint was deleted".to_owned()));
    };
    if endpoint.status == EndpointStatus::Disabled {
        return Ok(Err(
            "the endpoint was disabled: enable it, then recover again".to_owned(),
        ));
    }
    let mut template = failed.clone();
    template.replay_of = Some(failed.id.clone());
    let replay = webhooks
        .create_manual(&endpoint, DeliveryKind::Replay, &template)
        .await?;
    let report = webhooks::attempt_once_and_record(
        &state.platform.store,
        &state.platform.webhooks.client,
        &replay,
        &endpoint.url,
        webhooks::Signing {
            secrets: &secrets,
            scheme: endpoint.signature_scheme,
        },
    )
    .await?;
    if report.outcome == AttemptOutcome::Succeeded {
        recovery.succeeded += 1;
    } else {
        recovery.failed += 1;
    }
    recovery.resent += 1;
    metrics::counter!("webhook_recovery_resends_total", "outcome" => report.outcome.as_str())
        .increment(1);
    Ok(Ok(()))
}
