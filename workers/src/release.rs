//! What a stopping worker still holds goes back to its queue at once, instead
//! of waiting locked until another worker notices the missed heartbeats.
//!
//! Every worker of a runtime records its name in a shared [`Holders`] list;
//! once the runtime's workers are gone (the grace period over or every worker
//! closed), `JobQueue::release_held` puts back what those names still hold.
//! On SQLite a worker that closes within the grace period re-enqueues its
//! fetch buffer itself and apalis charges those never-started jobs an attempt:
//! [`Releasing`] refunds it.
//!
//! [`Releasing`] also keeps a ring of the queue's bell from being lost: apalis
//! fetches on every wake-up, and a ring that arrives while a fetch is in
//! flight wakes the worker only for that fetch's answer, which may predate
//! the work the ring announced. After an empty answer it polls once more
//! whenever the bell rang since it last came back empty.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use apalis::prelude::WorkerContext;
use apalis_core::backend::{Backend, BackendConfig, WireFormatBackend};
use futures::future::BoxFuture;
use futures::{FutureExt, Sink, SinkExt};
use platform::JobQueue;
use platform::queue::{Bell, HeldBy};

/// The names of a runtime's workers, restarts included.
#[derive(Clone, Debug, Default)]
pub struct Holders(Arc<Mutex<BTreeSet<HeldBy>>>);

impl Holders {
    fn record(&self, queue: &'static str, worker: &str) {
        let mut names = self.0.lock().unwrap_or_else(|p| p.into_inner());
        names.insert(HeldBy {
            queue,
            worker: worker.to_owned(),
        });
    }

    /// Every worker recorded so far.
    pub fn all(&self) -> Vec<HeldBy> {
        let names = self.0.lock().unwrap_or_else(|p| p.into_inner());
        names.iter().cloned().collect()
    }
}

/// Where a worker's close is.
enum Closing {
    /// Not started.
    Idle,
    /// Listing the jobs it fetched and has not started.
    Listing(BoxFuture<'static, Vec<String>>),
    /// apalis closes the worker (re-enqueuing its fetch buffer, flushing acks).
    Inner(Vec<String>),
    /// Refunding the attempt apalis charged the listed jobs.
    Refunding(BoxFuture<'static, ()>),
    /// Closed.
    Done,
}

/// A backend that records its worker's name in [`Holders`] and refunds the
/// attempt apalis-sqlite charges the never-started jobs of a graceful close.
pub struct Releasing<B> {
    backend: B,
    queue: JobQueue,
    kind: &'static str,
    holders: Holders,
    recorded: bool,
    closing: Closing,
    /// The queue's bell, and its rings when the worker last found nothing.
    bell: Arc<Bell>,
    rung_when_empty: u64,
}

impl<B> Releasing<B> {
    /// Wraps `backend`, a worker of queue `kind` on `queue`.
    pub fn new(backend: B, queue: JobQueue, kind: &'static str, holders: Holders) -> Self {
        let bell = queue.bells().bell(kind);
        Self {
            rung_when_empty: bell.rung(),
            bell,
            backend,
            queue,
            kind,
            holders,
            recorded: false,
            closing: Closing::Idle,
        }
    }
}

impl<B: Clone> Clone for Releasing<B> {
    fn clone(&self) -> Self {
        Self::new(
            self.backend.clone(),
            self.queue.clone(),
            self.kind,
            self.holders.clone(),
        )
    }
}

impl<B: std::fmt::Debug> std::fmt::Debug for Releasing<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Releasing")
            .field("backend", &self.backend)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl<B: Backend> Backend for Releasing<B> {
    type Task = B::Task;
    type Error = B::Error;

    fn poll_ready(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Result<(), Self::Error>> {
        // Before its first fetch, so nothing it ever holds goes unrecorded.
        if !self.recorded {
            self.holders.record(self.kind, worker.name());
            self.recorded = true;
        }
        self.backend.poll_ready(cx, worker)
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Option<Result<Self::Task, Self::Error>>> {
        let next = self.backend.poll_next(cx, worker);
        if next.is_pending() {
            let rung = self.bell.rung();
            if rung != self.rung_when_empty {
                // Rung since: the answer may predate what the ring announced.
                self.rung_when_empty = rung;
                cx.waker().wake_by_ref();
            }
        }
        next
    }

    fn poll_close(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Result<(), Self::Error>> {
        loop {
            match &mut self.closing {
                Closing::Idle => {
                    // The worker runs nothing now and fetches no more: what it
                    // has fetched and not started is its buffer.
                    let queue = self.queue.clone();
                    let name = worker.name().to_owned();
                    self.closing = Closing::Listing(
                        async move {
                            queue.unstarted_by(&name).await.unwrap_or_else(|err| {
                                tracing::warn!(worker = name, %err, "could not list unstarted jobs");
                                Vec::new()
                            })
                        }
                        .boxed(),
                    );
                }
                Closing::Listing(listing) => {
                    let ids = ready!(listing.poll_unpin(cx));
                    self.closing = Closing::Inner(ids);
                }
                Closing::Inner(ids) => {
                    if let Err(err) = ready!(self.backend.poll_close(cx, worker)) {
                        // What it still holds is released when the runtime ends.
                        self.closing = Closing::Inner(Vec::new());
                        return Poll::Ready(Err(err));
                    }
                    let ids = std::mem::take(ids);
                    if ids.is_empty() {
                        self.closing = Closing::Done;
                        continue;
                    }
                    let queue = self.queue.clone();
                    self.closing = Closing::Refunding(
                        async move {
                            match queue.refund_unstarted(&ids).await {
                                Ok(count) if count > 0 => {
                                    tracing::info!(
                                        count,
                                        "unstarted jobs back in their queue, attempts refunded"
                                    );
                                }
                                Ok(_) => {}
                                Err(err) => tracing::warn!(%err, "could not refund unstarted jobs"),
                            }
                        }
                        .boxed(),
                    );
                }
                Closing::Refunding(refunding) => {
                    ready!(refunding.poll_unpin(cx));
                    self.closing = Closing::Done;
                }
                Closing::Done => return Poll::Ready(Ok(())),
            }
        }
    }
}

apalis_core::delegate_sink!(Releasing<B>, backend);
apalis_core::delegate_codec!(Releasing<B>, backend);
apalis_core::delegate_deref!(Releasing<B>, backend);
apalis_core::delegate_config!(Releasing<B>, backend);
