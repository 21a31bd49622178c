//! Group commit for SQLite: the writes of concurrent requests share one
//! transaction and one fsync.
//!
//! SQLite admits one writer at a time and, with `synchronous=FULL`, every
//! commit waits for the disk. Committing each request's transaction on its own
//! makes the fsync the ceiling of the whole service. Here every write of the
//! process goes through one dedicated connection: a writer takes its turn
//! (FIFO), opens the shared transaction if none is open, and runs inside its own
//! savepoint, which is kept on success or rolled back on error, so writers
//! stay isolated from each other's failures. The closer commits the open
//! transaction once the writers queued before it have had their turn; a
//! durable writer returns only after the commit of its batch, so an
//! acknowledged write is on disk, exactly as with one transaction per request.
//! Under no load a batch is one writer; under load it grows by itself.
//!
//! Every statement on the connection is a round trip to its thread, so a
//! writer's savepoint is ended by whoever comes next, in the same round trip
//! as their own start (`release w; savepoint w`) or the commit; the savepoint
//! has one name, so these few statements are always the same and stay
//! prepared on the connection (made with `sqlx::query`, which sqlx caches,
//! not run as bare strings, which it prepares anew each time). A writer whose future
//! is dropped mid-savepoint (a client hung up) leaves its savepoint to be
//! rolled back the same way; one dropped while the statements opening its
//! turn run cannot leave the connection in a state the batch did not record,
//! because the turn is taken in a task of its own ([`GroupCommit::enter`]).
//!
//! Some writes need no sync of their own: a retention purge's deletes, lost in
//! a power cut, are simply done again by its next run. Such a writer
//! ([`CommitSync::Relaxed`]) opens its batch with `synchronous = NORMAL`, whose
//! commit in WAL mode writes the log without waiting for the disk, so a
//! `POST` queued behind a purge batch waits for its deletes, not for a sync of
//! them. A durable writer that finds such a batch open commits it (cheap: no
//! sync) and opens its own with `synchronous = FULL`; the sync of that commit
//! carries the earlier frames of the log to the disk too. A relaxed writer
//! that finds a durable batch open joins it and rides on its sync.

use std::collections::VecDeque;
use std::sync::Arc;

use sqlx::{Executor, SqliteConnection, SqlitePool};
use tokio::sync::{Mutex, Notify, OwnedMutexGuard, watch};

use crate::{Result, StorageError};

/// One of the group commit's few fixed statements, kept prepared on its
/// connection: sqlx caches only queries made with `sqlx::query` (a bare
/// string is prepared again at every run).
fn prepared(
    sql: &'static str,
) -> sqlx::query::Query<'static, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    sqlx::query(sql)
}

/// How many failed batches are remembered for writers still waiting on them.
const REMEMBERED_FAILURES: usize = 64;

/// The shared writer of one SQLite file in this process.
#[derive(Debug)]
pub struct GroupCommit {
    batch: Arc<Mutex<Batch>>,
    closer: Notify,
    finished: watch::Sender<u64>,
    failures: std::sync::Mutex<VecDeque<(u64, String)>>,
}

/// Whether a writer's batch must reach the disk at its commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CommitSync {
    /// The commit waits for the disk (`synchronous = FULL`).
    Full,
    /// The commit may return before the disk has it (`synchronous = NORMAL`):
    /// for writes a crash may undo without harm, because they are done again
    /// (retention purges).
    Relaxed,
}

/// How the last writer's savepoint is to end, once the next statement runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// No savepoint is open.
    Settled,
    /// Keep its writes (release it).
    Keep,
    /// Undo its writes (roll back to it, then release it).
    Undo,
}

impl Ending {
    /// The statements that end the open savepoint and start the next.
    fn then_savepoint(self) -> &'static str {
        match self {
            Self::Settled => "savepoint w",
            Self::Keep => "release w; savepoint w",
            Self::Undo => "rollback to w; release w; savepoint w",
        }
    }
}

#[derive(Debug)]
struct Batch {
    connection: Option<SqliteConnection>,
    open: bool,
    id: u64,
    ending: Ending,
    /// The open batch's sync, and the connection's `synchronous` setting
    /// (which changes only between transactions) once it is committed.
    sync: CommitSync,
}

impl Batch {
    fn connection(&mut self) -> Result<&mut SqliteConnection> {
        self.connection
            .as_mut()
            .ok_or_else(|| StorageError::Corrupt("the database is closed".to_owned()))
    }
}

impl GroupCommit {
    /// Takes a connection out of `pool` for good and starts the closer.
    pub(crate) async fn start(pool: &SqlitePool) -> Result<Arc<Self>> {
        let connection = pool.acquire().await?.detach();
        let (finished, _) = watch::channel(0);
        let group = Arc::new(Self {
            batch: Arc::new(Mutex::new(Batch {
                connection: Some(connection),
                open: false,
                id: 0,
                ending: Ending::Settled,
                sync: CommitSync::Full,
            })),
            closer: Notify::new(),
            finished,
            failures: std::sync::Mutex::new(VecDeque::new()),
        });
        tokio::spawn(group.clone().close_batches());
        Ok(group)
    }

    /// Waits for this writer's turn, opens the batch if needed and starts a
    /// savepoint (ending the previous writer's in the same round trip). A
    /// durable writer first commits an open relaxed batch.
    ///
    /// The turn is taken in a task of its own. The connection's thread runs
    /// the turn's statements once they are sent, whatever becomes of the
    /// caller: a writer dropped while they ran (a client hung up) would
    /// leave the connection inside a transaction the batch did not record
    /// as open, and the next writer's `begin` would fail its whole batch.
    /// The task records what its statements did; a slot nobody takes is
    /// dropped, which undoes its (empty) savepoint.
    pub(crate) async fn enter(self: &Arc<Self>, sync: CommitSync) -> Result<Slot> {
        let group = self.clone();
        tokio::spawn(async move { group.take_turn(sync).await })
            .await
            .map_err(|err| StorageError::Corrupt(format!("a writer's turn stopped: {err}")))?
    }

    /// [`GroupCommit::enter`], in the task that must not be dropped midway.
    async fn take_turn(self: Arc<Self>, sync: CommitSync) -> Result<Slot> {
        let mut guard = self.batch.clone().lock_owned().await;
        if guard.open && guard.sync == CommitSync::Relaxed && sync == CommitSync::Full {
            // No sync to wait for: the log is written, the next commit syncs it.
            let id = guard.id;
            match Self::commit(&mut guard).await {
                Ok(()) => {
                    self.finished.send_replace(id);
                }
                Err(err) => self.abandon(&mut guard, &err.to_string()).await,
            }
        }
        let opening = !guard.open;
        if opening {
            guard.id += 1;
        }
        let sql = match (opening, guard.sync, sync) {
            (false, _, _) => guard.ending.then_savepoint(),
            (true, CommitSync::Full, CommitSync::Full)
            | (true, CommitSync::Relaxed, CommitSync::Relaxed) => "begin immediate; savepoint w",
            (true, CommitSync::Full, CommitSync::Relaxed) => {
                "pragma synchronous = normal; begin immediate; savepoint w"
            }
            (true, CommitSync::Relaxed, CommitSync::Full) => {
                "pragma synchronous = full; begin immediate; savepoint w"
            }
        };
        let started = prepared(sql).execute(guard.connection()?).await;
        match started {
            Ok(_) => {
                guard.open = true;
                guard.ending = Ending::Settled;
                if opening {
                    guard.sync = sync;
                }
                Ok(Slot {
                    guard: Some(guard),
                    group: self,
                })
            }
            Err(err) => {
                // Where the statements stopped is unknown: end the
                // transaction, and with it the batch, and set the connection
                // back to syncing every commit.
                self.abandon(&mut guard, &err.to_string()).await;
                if let Ok(connection) = guard.connection() {
                    let _ = connection.execute("pragma synchronous = full").await;
                }
                guard.sync = CommitSync::Full;
                Err(err.into())
            }
        }
    }

    /// Rolls the open transaction back and fails its batch.
    async fn abandon(&self, batch: &mut Batch, error: &str) {
        let id = batch.id;
        tracing::error!(%error, batch = id, "group commit failed; the batch is rolled back");
        if let Ok(connection) = batch.connection() {
            // Fails harmlessly when no transaction is open.
            let _ = connection.execute("rollback").await;
        }
        batch.open = false;
        batch.ending = Ending::Settled;
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        failures.push_back((id, error.to_owned()));
        while failures.len() > REMEMBERED_FAILURES {
            failures.pop_front();
        }
        drop(failures);
        self.finished.send_replace(id);
    }

    /// Waits until `batch` is committed; an error if its commit failed.
    pub(crate) async fn committed(&self, batch: u64) -> Result<()> {
        let mut finished = self.finished.subscribe();
        finished
            .wait_for(|done| *done >= batch)
            .await
            .map_err(|_| StorageError::Corrupt("the database writer stopped".to_owned()))?;
        let failures = self
            .failures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match failures.iter().find(|(id, _)| *id == batch) {
            Some((_, error)) => Err(StorageError::CommitFailed(error.clone())),
            None => Ok(()),
        }
    }

    /// Commits open batches after the writers queued before the closer.
    async fn close_batches(self: Arc<Self>) {
        loop {
            self.closer.notified().await;
            let mut guard = self.batch.clone().lock_owned().await;
            if !guard.open {
                continue;
            }
            if let Err(err) = Self::commit(&mut guard).await {
                self.abandon(&mut guard, &err.to_string()).await;
                continue;
            }
            let id = guard.id;
            drop(guard);
            self.finished.send_replace(id);
        }
    }

    /// Ends the last savepoint and commits the open transaction.
    async fn commit(batch: &mut Batch) -> Result<()> {
        // COMMIT keeps every savepoint still open; only an undo needs a statement.
        let sql = match batch.ending {
            Ending::Undo => "rollback to w; release w; commit",
            Ending::Settled | Ending::Keep => "commit",
        };
        prepared(sql).execute(batch.connection()?).await?;
        batch.open = false;
        batch.ending = Ending::Settled;
        Ok(())
    }

    /// Commits what is open and closes the connection.
    pub(crate) async fn close(&self) {
        let mut guard = self.batch.lock().await;
        if guard.open {
            match Self::commit(&mut guard).await {
                Ok(()) => {
                    self.finished.send_replace(guard.id);
                }
                Err(err) => self.abandon(&mut guard, &err.to_string()).await,
            }
        }
        if let Some(connection) = guard.connection.take() {
            let _ = sqlx::Connection::close(connection).await;
        }
    }
}

/// The commit of a write whose caller went on before it reached the disk
/// (`deferred_transaction!`): what the write did is visible on the writer's
/// connection at once, to the read pool and to other processes once this
/// commit is done. Dropping it does not undo or hold anything: the batch
/// commits all the same.
#[derive(Debug, Default)]
#[must_use = "a deferred write is durable only once its commit is awaited"]
pub struct Commit {
    pending: Option<(Arc<GroupCommit>, u64)>,
}

impl Commit {
    /// A commit already done (PostgreSQL commits before the call returns).
    pub(crate) fn done() -> Self {
        Self::default()
    }

    /// The commit of `batch` of `group`, still to come.
    pub(crate) fn pending(group: &Arc<GroupCommit>, batch: u64) -> Self {
        Self {
            pending: Some((group.clone(), batch)),
        }
    }

    /// Waits until the write is on disk; an error if its batch's commit
    /// failed (the write is then undone).
    pub async fn durable(self) -> Result<()> {
        match self.pending {
            Some((group, batch)) => group.committed(batch).await,
            None => Ok(()),
        }
    }
}

/// A writer's turn: the shared connection, inside the writer's savepoint.
pub(crate) struct Slot {
    guard: Option<OwnedMutexGuard<Batch>>,
    group: Arc<GroupCommit>,
}

impl Slot {
    /// The connection to run the writer's statements on.
    pub(crate) fn connection(&mut self) -> &mut SqliteConnection {
        match self
            .guard
            .as_mut()
            .and_then(|guard| guard.connection.as_mut())
        {
            Some(connection) => connection,
            // enter() only hands out slots over an open connection.
            None => unreachable!("a slot always holds the open writer connection"),
        }
    }

    /// Marks the savepoint kept or undone (the next statement on the
    /// connection ends it), gives the turn up and asks the closer to commit.
    /// Returns the batch to wait for.
    pub(crate) async fn finish(mut self, keep: bool) -> Result<u64> {
        let Some(mut guard) = self.guard.take() else {
            return Err(StorageError::Corrupt("slot finished twice".to_owned()));
        };
        guard.ending = if keep { Ending::Keep } else { Ending::Undo };
        let batch = guard.id;
        drop(guard);
        self.group.closer.notify_one();
        Ok(batch)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            // Dropped mid-savepoint: the next statement undoes it.
            guard.ending = Ending::Undo;
            drop(guard);
            self.group.closer.notify_one();
        }
    }
}

#[cfg(test)]
mod tests;
