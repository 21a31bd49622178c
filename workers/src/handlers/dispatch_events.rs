//! `outbox_dispatch`: fan committed events out and mark them dispatched, in
//! commit order. Runs at least once per event (the fast path and the sweep may
//! both push it); the guarded mark makes the fan-out happen once. A job's
//! events are fanned out in one transaction, so a failure leaves all of them
//! for the job's next attempt.
//!
//! The fast path of a process whose workers consume this queue does the same
//! without a job ([`DispatchInProcess`]): the events it announces are fanned
//! out here, in commit order, a batch at a time.

use std::sync::Arc;

use futures::future::BoxFuture;
use platform::kinds::{DeliverWebhook, DispatchEvents};
use platform::{Job, PushOptions};
use storage::ids::EventId;
use storage::webhooks::DueAttempt;

use super::{Handler, JobError, WorkerState};
use crate::pause::Gate;

impl Handler for DispatchEvents {
    /// Dispatches a job's events, then pushes the deliveries that committed
    /// (even when some ids named no event: those fail the job afterwards).
    async fn run(&self, state: &WorkerState, _attempt: usize) -> Result<(), JobError> {
        let missing = fan_out(state, &self.event_ids).await?;
        if missing.is_empty() {
            return Ok(());
        }
        let missing: Vec<&str> = missing.iter().map(EventId::as_str).collect();
        Err(JobError(format!(
            "events {} do not exist",
            missing.join(", ")
        )))
    }
}

/// Fans `event_ids` out and starts their deliveries' first attempts;
/// returns the ids that named no event once the fan-out is on disk.
///
/// First attempts made here start before the fan-out's commit, with what
/// the fan-out read: should the commit be lost (the process dies, the batch
/// fails), the events stay undispatched and are fanned out again, so the
/// receiver may hear an event twice (under its one event id, sent as
/// `X-Event-Id` or `webhook-id` for its idempotency), never not at all. Pushed
/// deliveries wait for the commit: the worker that takes one reads it.
async fn fan_out(state: &WorkerState, event_ids: &[EventId]) -> Result<Vec<EventId>, JobError> {
    let mut fan_out = state.platform.store.webhooks().fan_out(event_ids).await?;
    let queued =
        super::deliver_webhook::attempt_first_here(state, fan_out.deliveries, &mut fan_out.targets);
    fan_out.commit.durable().await?;
    for event in &fan_out.dispatched {
        tracing::debug!(event_id = %event.event_id, event_type = %event.event_type, "event dispatched");
        metrics::counter!("events_dispatched_total", "event_type" => event.event_type.clone())
            .increment(1);
    }
    push_deliveries(state, queued).await;
    Ok(fan_out.missing)
}

/// Pushes the deliveries no first-attempt slot was free for. A failed push
/// is logged, not returned: the deliveries are committed and due, and the
/// overdue sweep pushes them.
async fn push_deliveries(state: &WorkerState, deliveries: Vec<DueAttempt>) {
    if deliveries.is_empty() {
        return;
    }
    let jobs: Vec<_> = deliveries
        .into_iter()
        .map(|due| (DeliverWebhook::of(due), PushOptions::default()))
        .collect();
    if let Err(err) = state.platform.queue.push_many(jobs).await {
        tracing::warn!(%err, "could not push webhook deliveries; the sweep will");
    }
}

/// The fast path's dispatch in a process whose workers consume the dispatch
/// queue: the events its store announces are fanned out here rather than
/// pushed as jobs for these same workers to fetch. Declines (the events are
/// pushed) while the queue is paused or the process quieted; a batch that
/// fails is pushed, to be retried as a job. Each batch is a run of the
/// dispatch queue for the console, under its first event's id.
pub struct DispatchInProcess {
    state: WorkerState,
    gate: Arc<Gate>,
}

impl DispatchInProcess {
    /// Dispatches with `state`, declining while `gate` is shut.
    pub fn new(state: WorkerState, gate: Arc<Gate>) -> Self {
        Self { state, gate }
    }
}

impl platform::dispatch::DispatchHere for DispatchInProcess {
    fn dispatch(&self, event_ids: Vec<EventId>) -> BoxFuture<'static, Vec<EventId>> {
        if self.gate.is_paused() {
            return Box::pin(std::future::ready(event_ids));
        }
        let state = self.state.clone();
        Box::pin(async move {
            // The run goes by its first event's id: no job has one.
            let Some(first) = event_ids.first() else {
                return event_ids;
            };
            let run = crate::console::RunOf {
                job_id: first.to_string(),
                queue: DispatchEvents::KIND,
                attempt: 1,
                agency_id: None,
                endpoint_id: None,
                due_at: Some(state.platform.store.clock().now()),
            };
            match super::run_here(&state, run, fan_out(&state, &event_ids)).await {
                Ok(missing) => {
                    if !missing.is_empty() {
                        // Announced after their commit: only a purge since
                        // could have taken them.
                        tracing::warn!(count = missing.len(), "announced events no longer exist");
                    }
                    Vec::new()
                }
                Err(err) => {
                    tracing::warn!(%err, count = event_ids.len(), "could not dispatch here; the events go to the dispatch queue");
                    event_ids
                }
            }
        })
    }
}
