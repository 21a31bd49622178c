//! `webhook_delivery`: one attempt of one delivery. A failed attempt
//! schedules the next by the retry schedule (a new job with `run_at`); the
//! fifth failure fails the delivery. Each attempt number runs once: an
//! attempt already recorded makes a repeated job a no-op.

use std::time::Duration;

use jobs::PushOptions;
use jobs::kinds::{DeliverWebhook, SendNotification};
use storage::webhooks::{AfterAttempt, AttemptOutcome, EndpointStatus};

use super::{Handler, JobError, WorkerState};
use crate::webhooks::{self, schedule};

/// Deliveries one endpoint receives per hour; more wait for a free slot.
pub const HOURLY_BUDGET: i64 = 1000;

impl Handler for DeliverWebhook {
    /// Makes one attempt.
    async fn run(&self, state: &WorkerState, _attempt: usize) -> Result<(), JobError> {
        deliver(self, state).await
    }
}

async fn deliver(job: &DeliverWebhook, state: &WorkerState) -> Result<(), JobError> {
    let store = &state.store;
    let webhooks = store.webhooks();
    let Some(target) = webhooks.target(&job.delivery_id).await? else {
        // Purged by retention.
        return Ok(());
    };
    let secrets = target.signing_secrets();
    let delivery = target.delivery;
    let number = i32::try_from(job.attempt).unwrap_or(i32::MAX);
    if delivery.status.is_final() || delivery.attempts >= number {
        return Ok(());
    }
    let (Some(endpoint), Some(_)) = (target.endpoint, target.secret) else {
        webhooks.abandon(&delivery.id).await?;
        return Ok(());
    };
    if endpoint.status == EndpointStatus::Disabled {
        // Failed deliveries of a disabled endpoint can be replayed once it is back.
        webhooks.abandon(&delivery.id).await?;
        return Ok(());
    }
    let now = store.clock().now();
    let hour_ago = now.plus_seconds(-3600);
    if webhooks.attempts_since(&endpoint.id, hour_ago).await? >= HOURLY_BUDGET {
        // Over the endpoint's hourly budget: wait until the oldest attempt
        // in the window leaves it. Delayed, never dropped.
        let oldest = webhooks
            .oldest_attempt_since(&endpoint.id, hour_ago)
            .await?
            .unwrap_or(now);
        let run_at = oldest.plus_seconds(3601);
        // Recorded, so the sweep does not take it for lost meanwhile.
        webhooks.defer(&delivery.id, run_at).await?;
        let options = PushOptions {
            run_at: Some(run_at),
            // Unique: a deferral never collides with an earlier one.
            ..PushOptions::offer(format!("deferred:{}", ulid::Ulid::generate()))
        };
        state
            .queue
            .push(job.clone(), options)
            .await
            .map_err(|err| JobError(format!("deferring over-budget delivery: {err}")))?;
        metrics::counter!("webhook_deliveries_deferred_total").increment(1);
        return Ok(());
    }

    let (attempt, report) = webhooks::attempt_signed_by(
        store,
        &state.webhooks.client,
        &delivery,
        &endpoint.url,
        webhooks::Signing {
            secrets: &secrets,
            scheme: endpoint.signature_scheme,
        },
        number,
    )
    .await;
    let after = if report.outcome == AttemptOutcome::Succeeded {
        AfterAttempt::Succeeded
    } else {
        match schedule::after_failure(job.attempt) {
            Some(wait) => AfterAttempt::RetryAt(webhooks::later(
                store.clock().now(),
                wait,
                state.webhooks.retry_speedup,
            )),
            None => AfterAttempt::Failed,
        }
    };
    let recorded = webhooks.record_attempt(&delivery, &attempt, after).await?;
    metrics::counter!("webhook_attempts_total", "outcome" => report.outcome.as_str()).increment(1);
    metrics::histogram!("webhook_attempt_duration_seconds").record(
        Duration::from_millis(u64::try_from(attempt.duration_ms).unwrap_or(0)).as_secs_f64(),
    );
    if recorded.disabled_endpoint {
        tracing::warn!(
            endpoint_id = %endpoint.id,
            failures = recorded.consecutive_failures,
            "webhook endpoint disabled after consecutive failed deliveries"
        );
        if let (Some(notification_id), Some(_)) = (&recorded.notification_id, &state.mailer) {
            let job = SendNotification {
                notification_id: notification_id.clone(),
            };
            if let Err(err) = state.queue.push(job, PushOptions::default()).await {
                // Recorded and unsent: the sweep pushes it.
                tracing::warn!(%err, "could not push the owner's e-mail; the sweep will");
            }
        }
    }
    if let (true, AfterAttempt::RetryAt(run_at)) = (recorded.recorded, after) {
        let next = DeliverWebhook {
            delivery_id: delivery.id.clone(),
            attempt: job.attempt + 1,
            endpoint_id: Some(delivery.endpoint_id.clone()),
        };
        let options = PushOptions {
            run_at: Some(run_at),
            ..PushOptions::default()
        };
        if let Err(err) = state.queue.push(next, options).await {
            // The attempt is recorded with its due time; the overdue sweep pushes it.
            tracing::warn!(%err, delivery_id = %delivery.id, "could not schedule the next attempt; the sweep will");
        }
    }
    Ok(())
}
