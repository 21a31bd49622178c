//! `outbox_dispatch`: fan committed events out and mark them dispatched, in
//! order. Runs at least once per event (the fast path and the sweep may both
//! push it); the guarded mark makes the fan-out happen once. A failure leaves
//! the events after it for the job's next attempt; those before it are done.

use std::time::Instant;

use apalis::prelude::{Attempt, BoxDynError, Data, TaskId};
use jobs::Job;
use jobs::PushOptions;
use jobs::kinds::{DeliverWebhook, DispatchEvents};

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
    let mut result = Ok(());
    let mut deliveries = Vec::new();
    for event_id in &job.event_ids {
        match dispatch(event_id, &state).await {
            Ok(ids) => deliveries.extend(ids),
            Err(err) => {
                result = Err(err);
                break;
            }
        }
    }
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

/// Fans one event out; returns the deliveries it created.
async fn dispatch(event_id: &str, state: &WorkerState) -> Result<Vec<String>, JobError> {
    let outbox = state.store.outbox();
    let Some(event) = outbox.get(event_id).await? else {
        return Err(JobError(format!("event {event_id} does not exist")));
    };
    if event.dispatched_at.is_some() {
        return Ok(Vec::new());
    }
    let Some(deliveries) = state.store.webhooks().fan_out(&event).await? else {
        return Ok(Vec::new());
    };
    tracing::debug!(event_id = %event.event_id, event_type = %event.event_type, deliveries = deliveries.len(), "event dispatched");
    metrics::counter!("events_dispatched_total", "event_type" => event.event_type).increment(1);
    Ok(deliveries)
}
