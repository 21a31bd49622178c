//! `outbox_dispatch`: fan one committed event out and mark it dispatched. Runs
//! at least once per event (the fast path and the sweep may both push it); the
//! guarded mark makes the fan-out happen once.

use std::time::Instant;

use apalis::prelude::{Attempt, BoxDynError, Data, TaskId};
use jobs::Job;
use jobs::kinds::DispatchEvent;

use super::{JobError, WorkerState, begin, observe, settle};

/// Dispatches one event.
pub async fn dispatch_event(
    job: DispatchEvent,
    state: Data<WorkerState>,
    task_id: TaskId,
    attempt: Attempt,
) -> Result<(), BoxDynError> {
    let attempt = begin::<DispatchEvent>(&state, &task_id, &attempt).await?;
    let started = Instant::now();
    let result = dispatch(&job, &state).await;
    observe(DispatchEvent::KIND, started, &result);
    settle::<DispatchEvent>(attempt, result)
}

async fn dispatch(job: &DispatchEvent, state: &WorkerState) -> Result<(), JobError> {
    let outbox = state.store.outbox();
    let Some(event) = outbox.get(&job.event_id).await? else {
        return Err(JobError(format!("event {} does not exist", job.event_id)));
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
