//! What a worker process tells the ops console: every run of a job, written
//! in small batches by one writer ([`AttemptLog`]), and the process itself,
//! registered and beating every heartbeat with the jobs in its hands
//! ([`spawn_registry`]). The beat brings back what an operator asked: quiet
//! (take no more jobs, finish what is in hand) or stop (quiet, then end the
//! runtime as on a shutdown signal).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use storage::background::job_console::{AttemptRecord, WorkerBeat, WorkerRequest};
use storage::{Store, Timestamp};
use tokio::sync::{Notify, mpsc};

use crate::pause::Gates;

/// Runs written per batch at most.
const BATCH: usize = 500;
/// How long the writer gathers runs before writing them.
const GATHER: Duration = Duration::from_millis(200);

/// Who this process is, as the console lists it.
#[derive(Clone, Debug)]
pub struct ProcessIdentity {
    /// `wrk_…`, new at every start.
    pub id: String,
    /// The host name.
    pub host: String,
}

impl ProcessIdentity {
    /// A fresh identity on this host.
    pub fn new() -> Self {
        Self {
            id: format!("wrk_{}", ulid::Ulid::generate()),
            host: platform::telemetry::host_name().unwrap_or_else(|| "worker".to_owned()),
        }
    }
}

impl Default for ProcessIdentity {
    fn default() -> Self {
        Self::new()
    }
}

/// The runs of this process's jobs, on their way to the database.
#[derive(Clone, Debug)]
pub struct AttemptLog {
    identity: Arc<ProcessIdentity>,
    sender: mpsc::UnboundedSender<AttemptRecord>,
    in_hand: Arc<AtomicI64>,
    /// The ids of the jobs running here now.
    running: Arc<Mutex<HashSet<String>>>,
    closing: Arc<Notify>,
}

/// What a job is, for its run's record.
#[derive(Clone, Debug)]
pub struct RunOf {
    /// The job's id.
    pub job_id: String,
    /// Its queue.
    pub queue: &'static str,
    /// Which run, from 1.
    pub attempt: usize,
    /// Its agency, when it names one.
    pub agency_id: Option<String>,
    /// Its webhook endpoint, when it is a delivery.
    pub endpoint_id: Option<String>,
    /// When it came due, when known.
    pub due_at: Option<Timestamp>,
}

/// A run in progress; [`AttemptLog::finished`] records its end.
#[derive(Debug)]
pub struct Running {
    record: AttemptRecord,
}

impl AttemptLog {
    /// A log of `identity`'s runs with its writer, which ends once
    /// [`AttemptLog::close`] is called and it has written what it was given.
    pub fn spawn(store: Store, identity: ProcessIdentity) -> (Self, tokio::task::JoinHandle<()>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let closing = Arc::new(Notify::new());
        let writer = tokio::spawn(write_runs(store, receiver, closing.clone()));
        (
            Self {
                identity: Arc::new(identity),
                sender,
                in_hand: Arc::default(),
                running: Arc::default(),
                closing,
            },
            writer,
        )
    }

    /// The process the runs are of.
    pub fn identity(&self) -> &ProcessIdentity {
        &self.identity
    }

    /// Jobs running in this process now.
    pub fn in_hand(&self) -> i64 {
        self.in_hand.load(Ordering::Acquire)
    }

    /// The ids of the jobs running here now.
    pub fn running(&self) -> HashSet<String> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records that `run` started at `now`.
    pub fn started(&self, run: RunOf, now: Timestamp) -> Running {
        self.in_hand.fetch_add(1, Ordering::AcqRel);
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run.job_id.clone());
        let record = AttemptRecord {
            job_id: run.job_id,
            attempt: i64::try_from(run.attempt).unwrap_or(i64::MAX),
            queue: run.queue.to_owned(),
            worker_id: self.identity.id.clone(),
            host: self.identity.host.clone(),
            agency_id: run.agency_id,
            endpoint_id: run.endpoint_id,
            due_at: run.due_at,
            started_at: now,
            finished_at: None,
            outcome: None,
            error: None,
        };
        let _ = self.sender.send(record.clone());
        Running { record }
    }

    /// Records that `running` ended at `now`, failed with `error` or not.
    pub fn finished(&self, running: Running, now: Timestamp, error: Option<String>) {
        self.in_hand.fetch_sub(1, Ordering::AcqRel);
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&running.record.job_id);
        let mut record = running.record;
        record.finished_at = Some(now);
        record.outcome = Some(
            if error.is_some() {
                "failed"
            } else {
                "succeeded"
            }
            .to_owned(),
        );
        record.error = error;
        let _ = self.sender.send(record);
    }

    /// Tells the writer to write what it has and end.
    pub fn close(&self) {
        self.closing.notify_one();
    }
}

/// Writes runs in batches until closed, then writes what is left.
async fn write_runs(
    store: Store,
    mut receiver: mpsc::UnboundedReceiver<AttemptRecord>,
    closing: Arc<Notify>,
) {
    let mut closed = false;
    loop {
        let mut batch = Vec::new();
        if closed {
            while let Ok(record) = receiver.try_recv() {
                batch.push(record);
            }
        } else {
            tokio::select! {
                record = receiver.recv() => match record {
                    Some(record) => batch.push(record),
                    None => closed = true,
                },
                () = closing.notified() => closed = true,
            }
            if !closed {
                tokio::time::sleep(GATHER).await;
            }
            while batch.len() < BATCH {
                match receiver.try_recv() {
                    Ok(record) => batch.push(record),
                    Err(_) => break,
                }
            }
        }
        if !batch.is_empty() {
            // Later records of a run replace earlier ones: the store keeps the last.
            if let Err(err) = store.job_attempts().record(&batch).await {
                tracing::warn!(%err, runs = batch.len(), "could not record job runs for the console");
            }
        }
        if closed && receiver.is_empty() {
            return;
        }
    }
}

/// What the registry needs of the runtime.
pub struct Registry {
    /// The store the console reads.
    pub store: Store,
    /// This process's runs (and jobs in hand).
    pub log: AttemptLog,
    /// The queues it consumes and their concurrency.
    pub queues: BTreeMap<&'static str, usize>,
    /// How often it beats.
    pub every: Duration,
    /// Its queues' gates: quiet closes them all.
    pub gates: Gates,
    /// When it started.
    pub started_at: Timestamp,
    /// The queue its workers take jobs from.
    pub queue: platform::JobQueue,
    /// Its workers' names: what they fetched and never started goes back
    /// once it is quiet.
    pub holders: crate::release::Holders,
}

/// Beats for the process until aborted; once an operator asks it to stop,
/// sends on `stop` (the runtime then shuts down as on a signal).
pub fn spawn_registry(
    registry: Arc<Registry>,
    stop: tokio::sync::oneshot::Sender<()>,
    stopping: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let queues = serde_json::to_string(&registry.queues).unwrap_or_else(|_| "{}".to_owned());
        let mut stop = Some(stop);
        // Quiet since the previous beat: whatever its workers fetched in
        // the moment the gates closed went to them before it, and is handed
        // back now, so a quiet process holds nothing it will not run.
        let mut quiet_since_last_beat = false;
        let mut interval = tokio::time::interval(registry.every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            let state = if stopping.load(Ordering::Acquire) {
                "stopping"
            } else if registry.gates.is_quiet() {
                "quiet"
            } else {
                "running"
            };
            if quiet_since_last_beat {
                let running = registry.log.running();
                match registry
                    .queue
                    .hand_back_unstarted(&registry.holders.all(), &running)
                    .await
                {
                    Ok(0) => {}
                    Ok(count) => tracing::info!(
                        count,
                        "a quiet worker process handed back jobs it had not started"
                    ),
                    Err(err) => {
                        tracing::warn!(%err, "could not hand back the jobs of a quiet worker process")
                    }
                }
            }
            quiet_since_last_beat = registry.gates.is_quiet();
            let beat = beat_of(&registry, &queues, state);
            match registry.store.worker_processes().beat(&beat).await {
                Ok(Some(request)) => {
                    if !registry.gates.is_quiet() {
                        tracing::info!(
                            request = request.name(),
                            "an operator quieted this worker process; it takes no more jobs"
                        );
                        registry.gates.set_quiet();
                    }
                    if request == WorkerRequest::Stop
                        && let Some(stop) = stop.take()
                    {
                        tracing::info!("an operator stopped this worker process");
                        let _ = stop.send(());
                    }
                }
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(%err, "could not record this worker process's heartbeat")
                }
            }
        }
    })
}

fn beat_of(registry: &Registry, queues: &str, state: &'static str) -> WorkerBeat {
    WorkerBeat {
        id: registry.log.identity().id.clone(),
        host: registry.log.identity().host.clone(),
        pid: i64::from(std::process::id()),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        queues: queues.to_owned(),
        in_hand: registry.log.in_hand(),
        started_at: registry.started_at,
        heartbeat_seconds: i64::try_from(registry.every.as_secs().max(1)).unwrap_or(i64::MAX),
        state,
    }
}

/// Records that the process stopped (its last beat).
pub async fn record_stopped(registry: &Registry) {
    let queues = serde_json::to_string(&registry.queues).unwrap_or_else(|_| "{}".to_owned());
    let beat = beat_of(registry, &queues, "stopped");
    if let Err(err) = registry.store.worker_processes().beat(&beat).await {
        tracing::warn!(%err, "could not record that this worker process stopped");
    }
}
