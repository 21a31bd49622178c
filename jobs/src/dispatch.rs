//! The fast path of the outbox: once a transaction that wrote events commits,
//! they are pushed for dispatch at once. Pushes are batched: whatever events
//! arrived meanwhile go into one job (up to [`DispatchEvents::MAX_EVENTS`]),
//! in one queue transaction, so a burst of writes costs a few jobs rather than
//! one per event. Dispatching an event twice (the sweep may push it again) is
//! harmless: marking it dispatched is guarded. What the fast path misses, a
//! crash right after the commit say, the outbox sweep re-dispatches.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use storage::ids::EventId;
use storage::outbox::OutboxListener;
use tokio::sync::{Notify, mpsc};

use crate::kinds::{DispatchEvents, Job};
use crate::queue::{JobQueue, PushOptions};

/// Most events pushed in one queue transaction.
const BATCH: usize = 1024;

/// Pushes dispatch jobs for committed events.
#[derive(Clone)]
pub struct DispatchOnCommit {
    sender: mpsc::UnboundedSender<EventId>,
    outstanding: Arc<(AtomicUsize, Notify)>,
}

impl DispatchOnCommit {
    /// Starts the pusher on the current runtime.
    pub fn start(queue: JobQueue) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        let outstanding = Arc::new((AtomicUsize::new(0), Notify::new()));
        tokio::spawn(push_batches(queue, receiver, outstanding.clone()));
        Self {
            sender,
            outstanding,
        }
    }

    /// Waits (at most `timeout`) until every announced event was pushed, for
    /// short-lived processes such as operator commands.
    pub async fn flush(&self, timeout: Duration) {
        let (count, notify) = &*self.outstanding;
        let _ = tokio::time::timeout(timeout, async {
            while count.load(Ordering::SeqCst) > 0 {
                notify.notified().await;
            }
        })
        .await;
    }
}

impl OutboxListener for DispatchOnCommit {
    fn events_committed(&self, event_ids: &[EventId]) {
        for id in event_ids {
            self.outstanding.0.fetch_add(1, Ordering::SeqCst);
            if self.sender.send(id.clone()).is_err() {
                // The pusher is gone (shutting down); the sweep will dispatch it.
                self.outstanding.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

async fn push_batches(
    queue: JobQueue,
    mut receiver: mpsc::UnboundedReceiver<EventId>,
    outstanding: Arc<(AtomicUsize, Notify)>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    while receiver.recv_many(&mut batch, BATCH).await > 0 {
        let count = batch.len();
        let jobs = dispatch_jobs(std::mem::take(&mut batch));
        if let Err(err) = queue.push_many(jobs).await {
            tracing::warn!(%err, kind = DispatchEvents::KIND, count, "dispatch push failed; the outbox sweep will retry");
        }
        outstanding.0.fetch_sub(count, Ordering::SeqCst);
        outstanding.1.notify_waiters();
    }
}

/// Dispatch jobs for `event_ids`, each keyed by its events.
pub fn dispatch_jobs(event_ids: Vec<EventId>) -> Vec<(DispatchEvents, PushOptions)> {
    DispatchEvents::chunked(event_ids)
        .into_iter()
        .map(|job| (job, PushOptions::default()))
        .collect()
}
