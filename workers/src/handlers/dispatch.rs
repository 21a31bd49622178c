//! `outbox_dispatch`: fan committed events out and mark them dispatched, in
//! commit order. Runs at least once per event (the fast path and the sweep may
//! both push it); the guarded mark makes the fan-out happen once. A job's
//! events are fanned out in one transaction, so a failure leaves all of them
//! for the job's next attempt.

use std::time::Instant;

use apalis::prelude::{Attempt, BoxDynError, Data, TaskId};
use jobs::Job;
use jobs::PushOptions;
use jobs::kinds::{DeliverWebhook, DispatchEvents};
use storage::ids::EventId;

use super::{JobError, WorkerState, begin, observe, settle};

/// Dispatches a job's events.
pub async fn dispatch_events(
    job: DispatchEvents,
    state: Data<WorkerState>,
    task_id: TaskId,
    attempt: Attempt,
) -> Result<(), BoxDynError> {
    let attempt = begin::<DispatchEvents>(&state, &task_id, &attempt).await?;
    let started = Instant::now();
    let (result, deliveries) = match state.store.webhooks().fan_out(&job.event_ids).await {
        Ok(fan_out) => {
            for event in &fan_out.dispatched {
                tracing::debug!(event_id = %event.event_id, event_type = %event.event_type, "event dispatched");
                metrics::counter!("events_dispatched_total", "event_type" => event.event_type.clone())
                    .increment(1);
            }
            let result = if fan_out.missing.is_empty() {
                Ok(())
            } else {
                Err(JobError(format!(
                    "events {} do not exist",
                    fan_out
                        .missing
                        .iter()
                        .map(EventId::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            };
            (result, fan_out.deliveries)
        }
        Err(err) => (Err(JobError::from(err)), Vec::new()),
    };
    if !deliveries.is_empty() {
        let jobs: Vec<_> = deliveries
            .into_iter()
            .map(|delivery_id| {
                let job = DeliverWebhook {
                    delivery_id,
                    attempt: 1,
                };
                let options = PushOptions {
                    idempotency_key: Some(job.idempotency_key()),
                    ..PushOptions::default()
                };
                (job, options)
            })
            .collect();
        if let Err(err) = state.queue.push_many(jobs).await {
            // The deliveries are committed and due; the overdue sweep pushes them.
            tracing::warn!(%err, "could not push webhook deliveries; the sweep will");
        }
    }
    observe(DispatchEvents::KIND, started, &result);
    settle::<DispatchEvents>(attempt, result)
}
