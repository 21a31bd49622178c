//! Worker processes as operators see them: each process registers when it
//! starts and beats every heartbeat with the jobs in its hands; an operator
//! asks one to go quiet (finish what it holds, take nothing more) or to stop
//! (go quiet, then exit), and the process reads the request on its next beat.

use crate::db::{bookkeeping_transaction, in_transaction, on_pool};
use crate::{Result, Store, Timestamp};

/// How long a stopped (or vanished) process stays listed.
pub const STOPPED_KEPT_SECONDS: i64 = 86_400;

/// What an operator asked of a worker process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerRequest {
    /// Finish the jobs in hand, take no more.
    Quiet,
    /// Go quiet, then exit once the jobs in hand are finished.
    Stop,
}

impl WorkerRequest {
    /// Its stored name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Quiet => "quiet",
            Self::Stop => "stop",
        }
    }

    /// The request named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "quiet" => Some(Self::Quiet),
            "stop" => Some(Self::Stop),
            _ => None,
        }
    }
}

/// A worker process as listed.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct WorkerProcess {
    /// `wrk_…`.
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id there.
    pub pid: i64,
    /// The build it runs.
    pub version: String,
    /// The queues it consumes and their concurrency, as a JSON object.
    pub queues: String,
    /// Jobs in its hands at its last beat.
    pub in_hand: i64,
    /// When it started.
    pub started_at: Timestamp,
    /// Its last beat.
    pub heartbeat_at: Timestamp,
    /// How often it beats.
    pub heartbeat_seconds: i64,
    /// `running`, `quiet`, `stopping` or `stopped`, as it last said.
    pub state: String,
    /// What an operator asked of it, not yet acted on or acted on.
    pub requested: Option<String>,
    /// When that was asked.
    pub requested_at: Option<Timestamp>,
}

impl WorkerProcess {
    /// Whether it missed three beats without saying it stopped.
    pub fn is_lost(&self, now: Timestamp) -> bool {
        self.state != "stopped"
            && now
                > self
                    .heartbeat_at
                    .plus_seconds(3 * self.heartbeat_seconds.max(1))
    }
}

/// One beat of a process.
#[derive(Clone, Debug)]
pub struct WorkerBeat {
    /// The process.
    pub id: String,
    /// Its host.
    pub host: String,
    /// Its process id.
    pub pid: i64,
    /// Its build.
    pub version: String,
    /// Its queues and their concurrency, as a JSON object.
    pub queues: String,
    /// Jobs in hand now.
    pub in_hand: i64,
    /// When it started.
    pub started_at: Timestamp,
    /// How often it beats.
    pub heartbeat_seconds: i64,
    /// What it is doing: `running`, `quiet`, `stopping` or `stopped`.
    pub state: &'static str,
}

/// Worker processes.
pub struct WorkerProcesses<'a> {
    store: &'a Store,
}

impl Store {
    /// Worker processes.
    pub fn worker_processes(&self) -> WorkerProcesses<'_> {
        WorkerProcesses { store: self }
    }
}

const COLUMNS: &str = "id, host, pid, version, queues, in_hand, started_at, heartbeat_at,
    heartbeat_seconds, state, requested, requested_at";

impl WorkerProcesses<'_> {
    /// Records a beat and returns what an operator asks of the process.
    pub async fn beat(&self, beat: &WorkerBeat) -> Result<Option<WorkerRequest>> {
        let now = self.store.clock().now();
        let mut requested: Option<String> = None;
        bookkeeping_transaction!(self.store.bookkeeping(), |tx| {
            requested = sqlx::query_scalar(
                "insert into worker_processes (id, host, pid, version, queues, in_hand, started_at,
                     heartbeat_at, heartbeat_seconds, state)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                 on conflict (id) do update set in_hand = excluded.in_hand,
                     heartbeat_at = excluded.heartbeat_at, state = excluded.state
                 returning requested",
            )
            .bind(&beat.id)
            .bind(&beat.host)
            .bind(beat.pid)
            .bind(&beat.version)
            .bind(&beat.queues)
            .bind(beat.in_hand)
            .bind(beat.started_at)
            .bind(now)
            .bind(beat.heartbeat_seconds)
            .bind(beat.state)
            .fetch_one(&mut *tx)
            .await?;
        });
        Ok(requested.as_deref().and_then(WorkerRequest::parse))
    }

    /// Every process listed: the running first, then by start, newest first.
    pub async fn list(&self) -> Result<Vec<WorkerProcess>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "select {COLUMNS} from worker_processes
                 order by case when state = 'stopped' then 1 else 0 end, started_at desc, id"
            )))
            .fetch_all(pool)
            .await?)
        })
    }

    /// One process.
    pub async fn find(&self, id: &str) -> Result<Option<WorkerProcess>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "select {COLUMNS} from worker_processes where id = $1"
            )))
            .bind(id)
            .fetch_optional(pool)
            .await?)
        })
    }

    /// Asks process `id` to go quiet or stop; a stop is never softened to
    /// quiet. False if no process that has not stopped has this id.
    pub async fn request(&self, id: &str, request: WorkerRequest) -> Result<bool> {
        let now = self.store.clock().now();
        let mut updated = 0;
        in_transaction!(self.store.db(), |tx| {
            updated = sqlx::query(
                "update worker_processes set requested = $2, requested_at = $3
                 where id = $1 and state <> 'stopped'
                     and (requested is null or requested = 'quiet')",
            )
            .bind(id)
            .bind(request.name())
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 0 {
                // Already asked to stop: the request stands, and is no news.
                updated = sqlx::query(
                    "select 1 from worker_processes where id = $1 and state <> 'stopped'",
                )
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
                .map_or(0, |_| 1);
            }
        });
        Ok(updated == 1)
    }

    /// Forgets processes stopped (or last heard from) more than
    /// [`STOPPED_KEPT_SECONDS`] before `now`.
    pub async fn purge(&self, now: Timestamp) -> Result<u64> {
        let before = now.plus_seconds(-STOPPED_KEPT_SECONDS);
        let mut deleted = 0;
        bookkeeping_transaction!(self.store.bookkeeping(), |tx| {
            deleted = sqlx::query("delete from worker_processes where heartbeat_at < $1")
                .bind(before)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        });
        Ok(deleted)
    }
}
