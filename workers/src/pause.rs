//! Pausing queues. An operator pauses a queue in the database; every worker
//! process polls the paused set every second and its workers of that queue stop
//! taking new jobs (jobs already running finish). The heartbeat keeps going, so
//! a paused worker is not taken for dead. An operator's "quiet" closes every
//! gate of one process the same way.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use apalis::prelude::WorkerContext;
use apalis_core::backend::{Backend, BackendConfig, WireFormatBackend};
use futures::{Sink, SinkExt};
use storage::Store;

/// Whether one queue is paused, and the workers waiting for it to resume.
#[derive(Debug, Default)]
pub struct Gate {
    paused: AtomicBool,
    waiting: Mutex<Vec<Waker>>,
}

impl Gate {
    /// Whether the queue is paused.
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    fn set(&self, paused: bool) {
        let was = self.paused.swap(paused, Ordering::AcqRel);
        if was && !paused {
            let waiting =
                std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|p| p.into_inner()));
            for waker in waiting {
                waker.wake();
            }
        }
    }

    /// Registers `waker` for the resume; returns whether the queue is still
    /// paused. Checked after registering: a resume in between would
    /// otherwise wake nobody.
    fn wait(&self, waker: &Waker) -> bool {
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            if !waiting.iter().any(|w| w.will_wake(waker)) {
                waiting.push(waker.clone());
            }
        }
        self.is_paused()
    }
}

/// The gates of every queue, kept in step with the database.
#[derive(Clone, Debug, Default)]
pub struct Gates {
    gates: Arc<HashMap<&'static str, Arc<Gate>>>,
    /// An operator quieted this process: every gate stays closed.
    quiet: Arc<AtomicBool>,
}

impl Gates {
    /// Gates for `queues`, all open.
    pub fn new(queues: &[&'static str]) -> Self {
        Self {
            gates: Arc::new(queues.iter().map(|q| (*q, Arc::default())).collect()),
            quiet: Arc::default(),
        }
    }

    /// Gates for `queues`, all closed until the paused set is first read: a
    /// process that starts while the database cannot answer does not take
    /// jobs of a queue an operator paused.
    pub fn until_read(queues: &[&'static str]) -> Self {
        let gates = Self::new(queues);
        for gate in gates.gates.values() {
            gate.set(true);
        }
        gates
    }

    /// Closes every gate of this process for good: its workers finish the
    /// jobs in hand and take no more (an operator's "quiet").
    pub fn set_quiet(&self) {
        self.quiet.store(true, Ordering::Release);
        for gate in self.gates.values() {
            gate.set(true);
        }
    }

    /// Whether this process was quieted.
    pub fn is_quiet(&self) -> bool {
        self.quiet.load(Ordering::Acquire)
    }

    /// The gate of `queue`.
    pub fn gate(&self, queue: &str) -> Arc<Gate> {
        self.gates.get(queue).cloned().unwrap_or_default()
    }

    /// Reads the paused queues once.
    pub async fn refresh(&self, store: &Store) -> Result<(), storage::StorageError> {
        let paused = store.schedules().paused_queues().await?;
        self.apply(&paused);
        Ok(())
    }

    /// Opens every gate but those of the `paused` queues (all stay closed
    /// while this process is quiet).
    fn apply(&self, paused: &std::collections::BTreeSet<String>) {
        let quiet = self.is_quiet();
        for (queue, gate) in self.gates.iter() {
            gate.set(quiet || paused.contains(*queue));
        }
    }

    /// Follows the database every second until aborted.
    pub fn spawn_follower(&self, store: Store) -> tokio::task::JoinHandle<()> {
        let gates = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(err) = gates.refresh(&store).await {
                    tracing::warn!(%err, "could not read paused queues");
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    }
}

/// A backend whose worker takes no new job while its queue is paused.
///
/// The inner stream is only ever left alone at a point where it holds
/// nothing: after it produced an item. A fetch in progress when the pause
/// comes (a SQLite queue transaction between its update and its commit) is
/// driven to its end, and what it produced is held back until the queue
/// resumes. Leaving a fetch suspended would keep its write lock on the queue
/// file for as long as the pause lasts.
pub struct Pausable<B> {
    backend: B,
    gate: Arc<Gate>,
    /// What the inner stream produced during a pause, given out on resume
    /// (an `Option<Result<B::Task, B::Error>>`; kept as `Any` so the type
    /// needs no `Backend` bound, which the delegating impls below lack).
    held: Option<Box<dyn std::any::Any + Send>>,
    /// The inner stream answered `Pending` last: it may be mid-fetch.
    inner_busy: bool,
    /// A worker restarted after its queue failed (Redis gone, say) waits
    /// this out before its first call, so an outage is retried a few times
    /// a second rather than in a loop.
    backoff: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// The longest wait of a worker restarted after a queue failure.
const MAX_RESTART_BACKOFF: Duration = Duration::from_secs(2);

impl<B: Clone> Clone for Pausable<B> {
    fn clone(&self) -> Self {
        Self::new(self.backend.clone(), self.gate.clone())
    }
}

impl<B: std::fmt::Debug> std::fmt::Debug for Pausable<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pausable")
            .field("backend", &self.backend)
            .field("paused", &self.gate.is_paused())
            .field("holding", &self.held.is_some())
            .finish()
    }
}

impl<B> Pausable<B> {
    /// Wraps `backend` behind `gate`.
    pub fn new(backend: B, gate: Arc<Gate>) -> Self {
        Self {
            backend,
            gate,
            held: None,
            inner_busy: false,
            backoff: None,
        }
    }

    /// The same, for the `restarts`-th start of its worker: from the first
    /// restart on, it waits 0.5 s per restart (at most 2 s) before its first
    /// call to the queue.
    #[must_use]
    pub fn restarted(mut self, restarts: usize) -> Self {
        if restarts > 0 {
            let wait = Duration::from_millis(500)
                .saturating_mul(u32::try_from(restarts).unwrap_or(u32::MAX))
                .min(MAX_RESTART_BACKOFF);
            self.backoff = Some(Box::pin(tokio::time::sleep(wait)));
        }
        self
    }
}

impl<B: Backend> Backend for Pausable<B>
where
    B::Task: Send + 'static,
    B::Error: Send + 'static,
{
    type Task = B::Task;
    type Error = B::Error;

    fn poll_ready(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Result<(), Self::Error>> {
        if let Some(backoff) = self.backoff.as_mut() {
            if backoff.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.backoff = None;
        }
        // Readiness drives the heartbeat: it goes on while paused.
        self.backend.poll_ready(cx, worker)
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Option<Result<Self::Task, Self::Error>>> {
        if self.gate.is_paused() {
            if self.held.is_none() && self.inner_busy {
                // Finish what the inner stream started before stopping.
                match self.backend.poll_next(cx, worker) {
                    Poll::Ready(item) => {
                        self.inner_busy = false;
                        self.held = Some(Box::new(item));
                    }
                    Poll::Pending => return Poll::Pending,
                }
            }
            if self.gate.wait(cx.waker()) {
                return Poll::Pending;
            }
        }
        if let Some(held) = self.held.take()
            && let Ok(item) = held.downcast::<Option<Result<B::Task, B::Error>>>()
        {
            return Poll::Ready(*item);
        }
        let polled = self.backend.poll_next(cx, worker);
        self.inner_busy = polled.is_pending();
        polled
    }

    fn poll_close(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Result<(), Self::Error>> {
        self.backend.poll_close(cx, worker)
    }
}

apalis_core::delegate_sink!(Pausable<B>, backend);
apalis_core::delegate_codec!(Pausable<B>, backend);
apalis_core::delegate_deref!(Pausable<B>, backend);
apalis_core::delegate_config!(Pausable<B>, backend);

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn resuming_wakes_the_waiting_workers_once() {
        let gate = Gate::default();
        gate.set(true);
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        assert!(gate.wait(&waker));
        assert!(gate.wait(&waker));
        gate.set(true);
        assert_eq!(counter.0.load(Ordering::SeqCst), 0);
        gate.set(false);
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert!(!gate.is_paused());
    }

    #[test]
    fn gates_stay_closed_until_the_paused_set_is_read() {
        let gates = Gates::until_read(&["deliver", "dispatch"]);
        assert!(gates.gate("deliver").is_paused());
        assert!(gates.gate("dispatch").is_paused());
        gates.apply(&["deliver".to_owned()].into_iter().collect());
        assert!(gates.gate("deliver").is_paused());
        assert!(!gates.gate("dispatch").is_paused());
        gates.set_quiet();
        gates.apply(&Default::default());
        assert!(gates.gate("dispatch").is_paused());
    }
}
