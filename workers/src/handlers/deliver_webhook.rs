//! `webhook_delivery`: one attempt of one delivery. A failed attempt
//! schedules the next by the retry schedule (a new job with `run_at`); the
//! fifth failure fails the delivery. Each attempt number runs once: an
//! attempt already recorded makes a repeated job a no-op.

use std::collections::HashMap;
use std::time::Duration;

use platform::kinds::{DeliverWebhook, SendNotification};
use platform::{Job, PushOptions};
use storage::ids::DeliveryId;
use storage::webhooks::{
    AfterAttempt, AttemptOutcome, AttemptToRecord, BudgetSlot, DeliveryTarget, DueAttempt,
    EndpointStatus,
};

use super::{Handler, JobError, WorkerState};
use platform::webhooks::{self, schedule};

impl Handler for DeliverWebhook {
    /// Makes one attempt.
    async fn run(&self, state: &WorkerState, _attempt: usize) -> Result<(), JobError> {
        deliver(self, state, None).await
    }
}

/// Makes the first attempts of new deliveries here and now, each in a free
/// first-attempt slot of this process, without a round trip through the queue;
/// returns those no slot was free for, to be queued. Each starts with its
/// delivery's target from `targets` (read by the fan-out; taken out of the
/// map), or reads it when there is none. A first attempt made here is a run
/// of the delivery queue for the console and the metrics, its run id the
/// delivery's. Should it fail short of an attempt recorded (the store away),
/// it is queued to be retried like any job; should the process die first,
/// the delivery is overdue (or, its fan-out lost, its event undispatched) and
/// a sweep offers it again.
pub fn attempt_first_here(
    state: &WorkerState,
    deliveries: Vec<DueAttempt>,
    targets: &mut HashMap<DeliveryId, DeliveryTarget>,
) -> Vec<DueAttempt> {
    let mut queued = Vec::new();
    for due in deliveries {
        let Some(slot) = state.first_attempt_slots.try_take() else {
            queued.push(due);
            continue;
        };
        let target = targets.remove(&due.delivery_id);
        let state = state.clone();
        tokio::spawn(async move {
            // Held to the end, record and retry push included: a stopping
            // process waits for the slots to come back.
            let _slot = slot;
            let job = DeliverWebhook::of(due);
            let run = crate::console::RunOf {
                job_id: job.delivery_id.to_string(),
                queue: DeliverWebhook::KIND,
                attempt: 1,
                agency_id: job.agency(),
                endpoint_id: job.endpoint(),
                due_at: Some(state.platform.store.clock().now()),
            };
            let result = super::run_here(&state, run, deliver(&job, &state, target)).await;
            metrics::counter!("webhook_first_attempts_here_total").increment(1);
            if let Err(err) = result {
                tracing::info!(%err, delivery_id = %job.delivery_id, "a first attempt failed short of its record; queued to be retried");
                if let Err(err) = state.platform.queue.push(job, PushOptions::default()).await {
                    tracing::warn!(%err, "could not queue the retry; the overdue sweep will offer the delivery");
                }
            }
        });
    }
    queued
}

/// Makes `job`'s attempt, with its delivery's `target` when the caller has
/// it already (else read from the store).
async fn deliver(
    job: &DeliverWebhook,
    state: &WorkerState,
    target: Option<DeliveryTarget>,
) -> Result<(), JobError> {
    let store = &state.platform.store;
    let webhooks = store.webhooks();
    let target = match target {
        Some(target) => target,
        None => {
            let read = state
                .platform
                .delivery_batches
                .target(&job.delivery_id)
                .await
                .map_err(JobError)?;
            // None: purged by retention.
            let Some(target) = read else {
                return Ok(());
            };
            target
        }
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
    // An ordered endpoint: wait while an earlier delivery of the same
    // listing is pending or retrying; its end wakes this one.
    if let (Some(order_key), Some(event_seq)) = (&target.order_key, target.event_seq)
        && webhooks
            .wait_for_turn(&endpoint.id, &delivery.id, order_key, event_seq)
            .await?
    {
        metrics::counter!("webhook_deliveries_waiting_for_order_total").increment(1);
        return Ok(());
    }

    // The endpoint's hourly budget: a slot reserved when the delivery was
    // held back is spent already; otherwise this attempt spends one, or is
    // held back to the slot it reserves. Delayed, never dropped.
    let now = store.clock().now();
    let held_until = match target.held_until {
        Some(until) if until > now => Some(until),
        Some(_) => None,
        // An endpoint without a budget (as read with the delivery) spends
        // nothing: no write on its row for every attempt.
        None if endpoint.hourly_budget.is_none() => None,
        None => match webhooks.spend_budget(&endpoint.id, &delivery.id).await? {
            BudgetSlot::Now => None,
            BudgetSlot::HeldUntil(until) => {
                metrics::counter!("webhook_deliveries_deferred_total").increment(1);
                Some(until)
            }
        },
    };
    if let Some(until) = held_until {
        let options = PushOptions {
            run_at: Some(until),
            // Unique: a deferral never collides with an earlier one.
            ..PushOptions::offer(format!("deferred:{}", ulid::Ulid::generate()))
        };
        state
            .platform
            .queue
            .push(job.clone(), options)
            .await
            .map_err(|err| JobError(format!("deferring a held-back delivery: {err}")))?;
        return Ok(());
    }

    let (attempt, report) = webhooks::attempt_signed_by(
        store,
        &state.platform.webhooks.client,
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
                state.platform.webhooks.retry_speedup,
            )),
            None => AfterAttempt::Failed,
        }
    };
    let duration_ms = attempt.duration_ms;
    let recorded = state
        .platform
        .delivery_batches
        .record(AttemptToRecord {
            delivery: delivery.clone(),
            attempt,
            after,
        })
        .await
        .map_err(JobError)?;
    metrics::counter!("webhook_attempts_total", "outcome" => report.outcome.as_str()).increment(1);
    metrics::histogram!("webhook_attempt_duration_seconds")
        .record(Duration::from_millis(u64::try_from(duration_ms).unwrap_or(0)).as_secs_f64());
    if recorded.disabled_endpoint {
        tracing::warn!(
            endpoint_id = %endpoint.id,
            failures = recorded.consecutive_failures,
            "webhook endpoint disabled after consecutive failed deliveries"
        );
    }
    // The owner's warning or disable notice, e-mailed when a relay is set.
    if let (Some(notification_id), Some(_)) = (&recorded.notification_id, &state.platform.mailer) {
        let job = SendNotification {
            notification_id: notification_id.clone(),
        };
        if let Err(err) = state.platform.queue.push(job, PushOptions::default()).await {
            // Recorded and unsent: the sweep pushes it.
            tracing::warn!(%err, "could not push the owner's e-mail; the sweep will");
        }
    }
    if let Some(next) = recorded.next_in_order {
        let options = PushOptions::offer(format!("in-order:{}", ulid::Ulid::generate()));
        if let Err(err) = state
            .platform
            .queue
            .push(DeliverWebhook::of(next), options)
            .await
        {
            // Due now in the store: the overdue sweep offers it.
            tracing::warn!(%err, "could not wake the next ordered delivery; the sweep will");
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
        if let Err(err) = state.platform.queue.push(next, options).await {
            // The attempt is recorded with its due time; the overdue sweep pushes it.
            tracing::warn!(%err, delivery_id = %delivery.id, "could not schedule the next attempt; the sweep will");
        }
    }
    Ok(())
}
