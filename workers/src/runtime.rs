//! The worker runtime: one apalis worker per consumed queue (with its
//! concurrency, heartbeat and poll interval, behind the queue's pause gate),
//! the maintenance schedules, and graceful shutdown. `workers run` runs it on
//! its own; `api serve` runs the same runtime in process.
//!
//! Shutdown: on the signal workers stop taking jobs; running jobs get the
//! grace period to finish, with the workers' heartbeat kept going (apalis
//! stops it), so no other worker takes them for orphans meanwhile. Then
//! whatever this runtime's workers still hold goes back to its queue at once
//! (`crate::release`): jobs fetched but never started keep their attempts;
//! jobs still running when the grace period ended are abandoned, counted as
//! an attempt and run again by another worker (at least once: handlers are
//! idempotent). Only a killed process leaves its jobs to orphan recovery,
//! once its heartbeat is missed.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use apalis::prelude::BackendExt;
use apalis::prelude::{Monitor, WorkerBuilder, WorkerBuilderExt};
use apalis_cron::CronScheduler;
use platform::kinds::{
    BuildArchive, DeliverWebhook, DispatchEvents, Probe, ProcessMedia, RecoverWebhookEndpoint,
    RenderOutputs, SeedSandbox, SendNotification,
};
use platform::queue::{Bell, BellOrInterval, QueueBackend};
use platform::{Job, JobQueue, Platform};

use crate::console::{AttemptLog, ProcessIdentity, Registry, record_stopped, spawn_registry};
use crate::handlers::dispatch_events::DispatchInProcess;
use crate::handlers::first_attempts::FirstAttemptSlots;
use crate::handlers::maintenance::{Maintenance, run_maintenance};
use crate::handlers::{WorkerState, handle};
use crate::pause::{Gates, Pausable};
use crate::release::{Holders, Releasing};

/// How the runtime runs.
#[derive(Clone, Debug)]
pub struct RuntimeSettings {
    /// Queues to consume and how many of their jobs run at once.
    pub queues: BTreeMap<&'static str, usize>,
    /// Heartbeat interval; a worker missing three is presumed dead.
    pub heartbeat: Duration,
    /// How often an idle worker looks for work no wake-up announced: on
    /// SQLite, how often the queue file is checked for other processes'
    /// commits; on Redis, how often due jobs are promoted and fair queues fed.
    /// Pushes from this process (and, on Redis, from any) wake workers at once.
    pub poll: Duration,
    /// Grace period after the shutdown signal.
    pub shutdown_timeout: Duration,
    /// Jobs a worker claims per fetch; `None`: its queue's concurrency.
    /// Claimed jobs beyond the free slots wait in the worker.
    pub fetch_batch: Option<usize>,
    /// Per-agency caps on fair queues: at most this many jobs of one agency
    /// at once in this process (`--agency-concurrency`).
    pub agency_caps: BTreeMap<&'static str, usize>,
    /// Whether this process runs the maintenance schedules.
    pub schedules: bool,
}

impl RuntimeSettings {
    /// First attempts this process makes at once after a fan-out: as many
    /// as its delivery queue's workers take from the queue; none when it
    /// does not consume that queue.
    pub fn first_attempt_slots(&self) -> Option<usize> {
        self.queues.get(DeliverWebhook::KIND).copied()
    }
}

/// Heartbeats a worker may miss before its jobs go to others.
const MISSED_HEARTBEATS: usize = 3;

/// A name unique to this worker and this start (apalis refuses a name that
/// heartbeated recently, so a restarted process must not reuse one).
fn worker_name(queue: &str) -> String {
    let host = platform::telemetry::host_name().unwrap_or_else(|| "worker".to_owned());
    format!("{queue}@{host}-{}", ulid::Ulid::generate())
}

/// Jobs one fetch claims (at least one). A fair queue of long jobs (media,
/// archives, probes) claims one job per free slot unless configured, so no
/// claimed job waits in a worker while another agency's job could take the
/// slot. Webhook deliveries are short and many: a batch taken in the fair
/// order already interleaves endpoints, and claiming one per round trip
/// would cap the throughput.
fn fetch_batch<J: Job>(settings: &RuntimeSettings, concurrency: usize) -> usize {
    fetch_batch_of(J::KIND, settings, concurrency)
}

/// [`fetch_batch`] by queue name.
fn fetch_batch_of(queue: &str, settings: &RuntimeSettings, concurrency: usize) -> usize {
    let one_at_a_time = platform::kinds::AGENCY_QUEUES.contains(&queue);
    let default = if one_at_a_time { 1 } else { concurrency };
    settings.fetch_batch.unwrap_or(default).max(1)
}

/// The most jobs of `queue` a worker of this process holds at once: one per
/// slot, and what a fetch claims ahead of the slots (a batch beyond one).
/// A Redis fair queue is fed no more than that (`platform::queue` fair shares).
fn worker_holding(queue: &str, settings: &RuntimeSettings, concurrency: usize) -> usize {
    concurrency + fetch_batch_of(queue, settings, concurrency) - 1
}

/// The longest an idle worker waits without a wake-up: scheduled jobs come
/// due in whole seconds, and lost wake-ups are caught up within a second.
fn fallback_poll(settings: &RuntimeSettings) -> Duration {
    settings.poll.max(Duration::from_secs(1))
}

/// The apalis-sqlite configuration of `J`'s queue under `settings`.
pub fn sqlite_config<J: Job>(
    settings: &RuntimeSettings,
    concurrency: usize,
) -> apalis_sqlite::Config {
    apalis_sqlite::Config::default()
        .queue(J::KIND)
        .batch_size(fetch_batch::<J>(settings, concurrency))
        .heartbeat_interval(settings.heartbeat)
        .missed_heartbeats(MISSED_HEARTBEATS)
}

/// The apalis-redis configuration of `J`'s queue under `settings`.
///
/// Task leases are off: a fetched job already sits in the worker's in-flight
/// set, which is what orphan recovery re-queues from, and the lease script
/// searches the whole pending list for each job it starts (`LREM`), which
/// makes draining a backlog quadratic.
pub fn redis_config<J: Job>(
    settings: &RuntimeSettings,
    concurrency: usize,
) -> apalis_redis::Config {
    apalis_redis::Config::default()
        .queue(J::KIND)
        .batch_size(fetch_batch::<J>(settings, concurrency))
        .heartbeat_interval(settings.heartbeat)
        .missed_heartbeats(MISSED_HEARTBEATS)
        .lock_tasks(false)
}

/// Registers a worker of `$job` on `$storage` with `$handler`, its name
/// recorded in `$holders`.
macro_rules! register_worker {
    ($monitor:ident, $storage:expr, $job:ty, $concurrency:expr, $gates:expr, $holders:expr, $settings:expr, $state:expr, $handler:expr) => {{
        let storage = $storage;
        let gate = $gates.gate(<$job>::KIND);
        let holders = $holders.clone();
        let state = $state.clone();
        let poll = fallback_poll(&$settings);
        let bell = $state.platform.queue.bells().bell(<$job>::KIND);
        let concurrency = $concurrency;
        let name = worker_name(<$job>::KIND);
        $monitor.register(move |restarts| {
            WorkerBuilder::new(format!("{name}.{restarts}"))
                .backend(Releasing::new(
                    Pausable::new(
                        storage
                            .clone()
                            .poll_with_strategy(BellOrInterval::new(bell.clone(), poll)),
                        gate.clone(),
                    )
                    .restarted(restarts),
                    state.platform.queue.clone(),
                    <$job>::KIND,
                    holders.clone(),
                ))
                .data(state.clone())
                .concurrency(concurrency)
                .build($handler)
        })
    }};
}

/// Promotes due jobs of the consumed Redis queues on every poll interval
/// (scheduled retries and `run_at` jobs), so apalis's fetch never faces a due
/// list too long for it (`platform::queue::promote_due`), and feeds the fair
/// queues' free slots, then and whenever another process announces a push
/// to one (this process's own pushes and finished jobs feed themselves);
/// wakes this process's workers when it moved any.
fn spawn_promoter(
    queue: JobQueue,
    connection: apalis_redis::ConnectionManager,
    queues: Vec<&'static str>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut fair: Vec<(&'static str, Arc<Bell>, u64)> = queues
            .iter()
            .filter(|name| platform::kinds::FAIR_QUEUES.contains(name))
            .map(|name| {
                let bell = queue.bells().announced(name);
                let seen = bell.rung();
                (*name, bell, seen)
            })
            .collect();
        loop {
            let rung = tokio::select! {
                _ = interval.tick() => None,
                name = std::future::poll_fn(|cx| {
                    for (name, bell, seen) in fair.iter_mut() {
                        if bell.poll_rung(cx, seen).is_ready() {
                            return std::task::Poll::Ready(*name);
                        }
                    }
                    std::task::Poll::Pending
                }) => Some(name),
            };
            let names = match rung {
                // An announcement: only that queue's free slots, at once.
                Some(name) => vec![name],
                None => queues.clone(),
            };
            for name in names {
                let mut moved = 0;
                if rung.is_none() {
                    moved += match platform::queue::promote_due(&connection, name).await {
                        Ok(moved) => moved,
                        Err(err) => {
                            tracing::warn!(queue = name, %err, "could not promote due jobs");
                            0
                        }
                    };
                }
                if platform::kinds::FAIR_QUEUES.contains(&name) {
                    match queue.feed_fair(name).await {
                        Ok(fed) => moved += fed,
                        Err(err) => {
                            tracing::warn!(queue = name, %err, "could not feed the fair queue")
                        }
                    }
                }
                if moved > 0 {
                    queue.bells().ring(name);
                }
            }
        }
    })
}

/// Once `grace` fires, heartbeats for every worker of the runtime until
/// aborted: apalis stops a worker's own heartbeat when shutdown begins, and
/// without it a grace period longer than the missed-heartbeat limit would let
/// other workers re-run the jobs still finishing here.
fn spawn_grace_heartbeat(
    queue: platform::JobQueue,
    holders: Holders,
    every: Duration,
    grace: tokio::sync::oneshot::Receiver<()>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if grace.await.is_err() {
            return;
        }
        let mut interval = tokio::time::interval(every);
        loop {
            interval.tick().await;
            if let Err(err) = queue.keep_alive(&holders.all()).await {
                tracing::warn!(%err, "could not heartbeat during the grace period");
            }
        }
    })
}

/// Runs workers and schedules until `shutdown` resolves, then drains.
pub async fn run(
    platform: Platform,
    settings: RuntimeSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let state = WorkerState::new(platform);
    let gates = Gates::until_read(&platform::kinds::QUEUES);
    if let Err(err) = gates.refresh(&state.platform.store).await {
        tracing::warn!(%err, "could not read paused queues at start; every queue waits until they are read");
    }
    let follower = gates.spawn_follower(state.platform.store.clone());
    // The console's view of this process: its runs, and its beat, which
    // brings back an operator's quiet or stop.
    let (attempt_log, run_writer) =
        AttemptLog::spawn(state.platform.store.clone(), ProcessIdentity::new());
    let holders = Holders::default();
    let registry = Arc::new(Registry {
        store: state.platform.store.clone(),
        log: attempt_log.clone(),
        queues: settings.queues.clone(),
        every: settings.heartbeat,
        gates: gates.clone(),
        started_at: state.platform.store.clock().now(),
        queue: state.platform.queue.clone(),
        holders: holders.clone(),
    });
    let (stop_requested, stop_request) = tokio::sync::oneshot::channel();
    let stopping = Arc::new(AtomicBool::new(false));
    let beating = spawn_registry(registry.clone(), stop_requested, stopping.clone());
    // First attempts made here after a fan-out: as many at once as the
    // delivery queue's workers take from the queue.
    let first_attempt_slots = settings
        .first_attempt_slots()
        .map(|slots| FirstAttemptSlots::new(slots, gates.gate(DeliverWebhook::KIND)))
        .unwrap_or_default();
    let state = state
        .with_agency_caps(settings.agency_caps.clone())
        .with_attempt_log(attempt_log.clone())
        .with_first_attempt_slots(first_attempt_slots.clone());
    for (queue, concurrency) in &settings.queues {
        state
            .platform
            .queue
            .set_worker_slots(queue, worker_holding(queue, &settings, *concurrency));
    }
    // Events this process commits are fanned out here, not pushed as jobs
    // for these same workers to fetch, while they consume the dispatch queue.
    if settings.queues.contains_key(DispatchEvents::KIND) {
        state
            .platform
            .dispatch
            .dispatch_here(Some(Arc::new(DispatchInProcess::new(
                state.clone(),
                gates.gate(DispatchEvents::KIND),
            ))));
    }
    let consumed: Vec<&'static str> = settings.queues.keys().copied().collect();
    let mut background = vec![];
    match state.platform.queue.backend() {
        QueueBackend::Redis(connection) => {
            background.push(spawn_promoter(
                state.platform.queue.clone(),
                connection.clone(),
                consumed.clone(),
                settings.poll,
            ));
            if let Some(url) = state.platform.queue.redis_url() {
                background.push(platform::queue::spawn_redis_listener(
                    url.to_owned(),
                    state.platform.queue.bells().clone(),
                    consumed.clone(),
                ));
            }
        }
        QueueBackend::Sqlite(pool) => background.push(platform::queue::spawn_sqlite_watch(
            pool.clone(),
            state.platform.queue.bells().clone(),
            settings.poll,
        )),
    }
    // A worker whose queue fails (Redis restarted, a connection reset) ends
    // with an error; it is started again, under a new name, after a short
    // backoff (`Pausable::restarted`), however often that happens: a queue
    // without its worker would hold its jobs until the process restarts.
    // What the old name held is handed back once its heartbeats are missed.
    let mut monitor = Monitor::new().should_restart(|worker, error| {
        tracing::warn!(worker = %worker.name(), %error, "a worker stopped on a queue error; restarting it");
        true
    });
    for (queue, concurrency) in &settings.queues {
        let concurrency = *concurrency;
        // One worker of the queue's kind on whichever backend holds the queue.
        macro_rules! consume {
            ($job:ty, $handler:expr) => {
                match state.platform.queue.backend() {
                    QueueBackend::Sqlite(pool) => {
                        let storage = JobQueue::sqlite_storage::<$job>(pool)
                            .with_config(sqlite_config::<$job>(&settings, concurrency));
                        register_worker!(
                            monitor,
                            storage,
                            $job,
                            concurrency,
                            gates,
                            holders,
                            settings,
                            state,
                            $handler
                        )
                    }
                    QueueBackend::Redis(connection) => {
                        let storage = JobQueue::redis_storage::<$job>(connection)
                            .with_config(redis_config::<$job>(&settings, concurrency));
                        register_worker!(
                            monitor,
                            storage,
                            $job,
                            concurrency,
                            gates,
                            holders,
                            settings,
                            state,
                            $handler
                        )
                    }
                }
            };
        }
        monitor = match *queue {
            DispatchEvents::KIND => consume!(DispatchEvents, handle::<DispatchEvents>),
            DeliverWebhook::KIND => consume!(DeliverWebhook, handle::<DeliverWebhook>),
            SendNotification::KIND => consume!(SendNotification, handle::<SendNotification>),
            RecoverWebhookEndpoint::KIND => {
                consume!(RecoverWebhookEndpoint, handle::<RecoverWebhookEndpoint>)
            }
            SeedSandbox::KIND => consume!(SeedSandbox, handle::<SeedSandbox>),
            ProcessMedia::KIND => consume!(ProcessMedia, handle::<ProcessMedia>),
            RenderOutputs::KIND => consume!(RenderOutputs, handle::<RenderOutputs>),
            BuildArchive::KIND => consume!(BuildArchive, handle::<BuildArchive>),
            Probe::KIND => consume!(Probe, handle::<Probe>),
            other => anyhow::bail!("no handler for queue {other}"),
        };
    }
    if settings.schedules {
        for task in Maintenance::ALL {
            let state = state.clone();
            let schedule = task.schedule();
            let name = worker_name(&format!("cron.{}", task.name()));
            monitor = monitor.register(move |restarts| {
                WorkerBuilder::new(format!("{name}.{restarts}"))
                    .backend(CronScheduler::new(schedule.clone()))
                    .data(state.clone())
                    .data(task)
                    .concurrency(1)
                    .build(run_maintenance)
            });
        }
    }
    tracing::info!(queues = ?settings.queues, schedules = settings.schedules, "workers started");
    let (grace_started, grace) = tokio::sync::oneshot::channel();
    let grace_began = Arc::new(std::sync::OnceLock::new());
    let closing = (
        first_attempt_slots.clone(),
        grace_began.clone(),
        state.platform.dispatch.clone(),
    );
    let signal = async move {
        tokio::select! {
            () = shutdown => {}
            Ok(()) = stop_request => {}
        }
        stopping.store(true, Ordering::Release);
        let (first_attempt_slots, grace_began, dispatch) = closing;
        // From here on committed events are pushed for whichever process
        // runs next, and first attempts are queued.
        dispatch.dispatch_here(None);
        first_attempt_slots.close();
        let _ = grace_began.set(std::time::Instant::now());
        tracing::info!("workers stop taking jobs; running jobs get the grace period");
        let _ = grace_started.send(());
        Ok(())
    };
    let keep_alive = spawn_grace_heartbeat(
        state.platform.queue.clone(),
        holders.clone(),
        settings.heartbeat,
        grace,
    );
    let outcome = monitor
        .shutdown_timeout(settings.shutdown_timeout)
        .run_with_signal(signal)
        .await;
    keep_alive.abort();
    state.platform.dispatch.dispatch_here(None);
    // First attempts made here outside the workers get what is left of the
    // grace period too.
    let left = grace_began.get().map_or(Duration::ZERO, |began| {
        settings.shutdown_timeout.saturating_sub(began.elapsed())
    });
    let busy = first_attempt_slots.busy();
    if busy > 0 && !first_attempt_slots.drain(left).await {
        tracing::warn!(
            running = first_attempt_slots.busy(),
            "webhook attempts still running at the end of the grace period; the overdue sweep offers their deliveries again"
        );
    }
    follower.abort();
    beating.abort();
    attempt_log.close();
    if tokio::time::timeout(Duration::from_secs(5), run_writer)
        .await
        .is_err()
    {
        tracing::warn!("could not record the last job runs for the console in time");
    }
    record_stopped(&registry).await;
    for task in background {
        task.abort();
    }
    // The workers are gone: whatever they still hold is not going to run here.
    match state.platform.queue.release_held(&holders.all()).await {
        Ok(0) => {}
        Ok(count) => tracing::info!(count, "jobs still held at exit are back in their queues"),
        Err(err) => tracing::warn!(
            %err,
            "could not release held jobs; they run again once this process's heartbeat is missed"
        ),
    }
    outcome.map_err(|err| anyhow::anyhow!("workers: {err}"))
}
