//! `outbox_dispatch`: fan committed events out and mark them dispatched, in
//! commit order. Runs at least once per event (the fast path and the sweep may
//! both push it); the guarded mark makes the fan-out happen once. A job's
//! events are fanned out in one transaction, so a failure leaves all of them
//! for the job's next attempt.

use jobs::PushOptions;
use jobs::kinds::{DeliverWebhook, DispatchEvents};
use storage::ids::EventId;
use storage::webhooks::DueAttempt;

use super::{Handler, JobError, WorkerState};

impl Handler for DispatchEvents {
    /// Dispatches a job's events, then pushes the deliveries that committed
    /// (even when some ids named no event: those fail the job afterwards).
    async fn run(&self, state: &WorkerState, _attempt: usize) -> Result<(), JobError> {
        let fan_out = state.store.webhooks().fan_out(&self.event_ids).await?;
        for event in &fan_out.dispatched {
            tracing::debug!(event_id = %event.event_id, event_type = %event.event_type, "event dispatched");
            metrics::counter!("events_dispatched_total", "event_type" => event.event_type.clone())
                .increment(1);
        }
        push_deliveries(state, fan_out.deliveries).await;
        if fan_out.missing.is_empty() {
            return Ok(());
        }
        let missing: Vec<&str> = fan_out.missing.iter().map(EventId::as_str).collect();
        Err(JobError(format!(
            "events {} do not exist",
            missing.join(", ")
        )))
    }
}

/// Makes the first attempt of each new delivery here while this process has
/// a free first-attempt slot, and pushes the rest. A failed push is logged, not
/// returned: the deliveries are committed and due, and the overdue sweep
/// pushes them.
async fn push_deliveries(state: &WorkerState, deliveries: Vec<DueAttempt>) {
    let deliveries = super::deliver::attempt_first_here(state, deliveries);
    if deliveries.is_empty() {
        return;
    }
    let jobs: Vec<_> = deliveries
        .into_iter()
        .map(|due| (DeliverWebhook::of(due), PushOptions::default()))
        .collect();
    if let Err(err) = state.queue.push_many(jobs).await {
        tracing::warn!(%err, "could not push webhook deliveries; the sweep will");
    }
}
