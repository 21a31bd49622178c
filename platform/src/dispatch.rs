//! The fast path of the outbox: once a transaction that wrote events commits,
//! they are dispatched at once. Batched: whatever events arrived meanwhile go
//! together (up to [`BATCH`]), so a burst of writes costs a few dispatches
//! rather than one per event. A process whose workers consume the dispatch
//! queue fans them out itself ([`DispatchHere`], set by its worker runtime),
//! without a round trip through the queue; any other process, or one whose
//! local dispatch declines or fails, pushes them as jobs (up to
//! [`DispatchEvents::MAX_EVENTS`] each), in one queue transaction.
//! Dispatching an event twice (the sweep may push it again) is harmless:
//! marking it dispatched is guarded. What the fast path misses, a crash right
//! after the commit say, the outbox sweep re-dispatches.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use storage::background::outbox::OutboxListener;
use storage::ids::EventId;
use tokio::sync::{Notify, mpsc};

use crate::kinds::{DispatchEvents, Job};
use crate::queue::{JobQueue, PushOptions};

/// Most events pushed in one queue transaction.
const BATCH: usize = 1024;

/// Dispatches a batch of committed events in this process.
pub trait DispatchHere: Send + Sync + 'static {
    /// Fans `event_ids` out here; returns those it did not (declined or
    /// failed), which are pushed to the dispatch queue instead.
    fn dispatch(&self, event_ids: Vec<EventId>) -> BoxFuture<'static, Vec<EventId>>;
}

/// Where this process dispatches, if it does; shared by the clones.
type Here = Arc<RwLock<Option<Arc<dyn DispatchHere>>>>;

/// Dispatches committed events: here when a dispatcher is set, otherwise
/// by pushing dispatch jobs.
#[derive(Clone)]
pub struct DispatchOnCommit {
    sender: mpsc::UnboundedSender<EventId>,
    outstanding: Arc<(AtomicUsize, Notify)>,
    here: Here,
}

impl DispatchOnCommit {
    /// Starts the dispatcher on the current runtime.
    pub fn start(queue: JobQueue) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        let outstanding = Arc::new((AtomicUsize::new(0), Notify::new()));
        let here = Here::default();
        tokio::spawn(dispatch_batches(
            queue,
            receiver,
            outstanding.clone(),
            here.clone(),
        ));
        Self {
            sender,
            outstanding,
            here,
        }
    }

    /// Dispatches in this process with `dispatcher` from now on; `None`:
    /// pushes every batch to the dispatch queue again.
    pub fn dispatch_here(&self, dispatcher: Option<Arc<dyn DispatchHere>>) {
        *self
            .here
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = dispatcher;
    }

    /// Waits (at most `timeout`) until every announced event was dispatched
    /// or pushed, for short-lived processes such as operator commands.
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

/// One batch at a time, in commit order: the next batch gathers while one
/// is dispatched.
async fn dispatch_batches(
    queue: JobQueue,
    mut receiver: mpsc::UnboundedReceiver<EventId>,
    outstanding: Arc<(AtomicUsize, Notify)>,
    here: Here,
) {
    let mut batch = Vec::with_capacity(BATCH);
    while receiver.recv_many(&mut batch, BATCH).await > 0 {
        let count = batch.len();
        let mut event_ids = std::mem::take(&mut batch);
        let dispatcher = here
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        if let Some(dispatcher) = dispatcher {
            event_ids = dispatcher.dispatch(event_ids).await;
        }
        if !event_ids.is_empty()
            && let Err(err) = queue.push_many(dispatch_jobs(event_ids)).await
        {
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
