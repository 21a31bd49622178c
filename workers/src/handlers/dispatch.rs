//! `outbox_dispatch`: fan committed events out and mark them dispatched, in
//! order. Runs at least once per event (the fast path and the sweep may both
//! push it); the guarded mark makes the fan-out happen once. A failure leaves
//! the events after it for the job's next attempt; those before it are done.

use std::time::Instant;

use apalis::prelude::{Attempt, BoxDynError, Data, TaskId};
use jobs::Job;
use jobs::kinds::DispatchEvents;

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
    for event_id in &job.event_ids {
        result = dispatch(event_id, &state).await;
        if result.is_err() {
            break;
        }
    }
    observe(DispatchEvents::KIND, started, &result);
    settle::<DispatchEvents>(attempt, result)
}

async fn dispatch(event_id: &str, state: &WorkerState) -> Result<(), JobError> {
    let outbox = state.store.outbox();
    let Some(event) = outbox.get(event_id).await? else {
        return Err(JobError(format!("event {event_id} does not exist")));
    };
    if event.dispatched_at.is_some() {
        return Ok(());
    }
    // Webhook fan-out joins here (one delivery per subscribed endpoint).
    if outbox.mark_dispatched(&event.event_id).await? {
        tracing::debug!(event_id = %event.event_id, event_type = %event.event_type, "event dispatched");
        metrics::counter!("events_dispatched_total", "event_type" => event.event_type).increment(1);
    }
    Ok(())
}
