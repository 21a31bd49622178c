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
//! rolled back the same way.

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
            })),
            closer: Notify::new(),
            finished,
            failures: std::sync::Mutex::new(VecDeque::new()),
        });
        tokio::spawn(group.clone().close_batches());
        Ok(group)
    }

    /// Waits for this writer's turn, opens the batch if needed and starts a
    /// savepoint (ending the previous writer's in the same round trip).
    pub(crate) async fn enter(self: &Arc<Self>) -> Result<Slot> {
        let mut guard = self.batch.clone().lock_owned().await;
        let opening = !guard.open;
        if opening {
            guard.id += 1;
        }
        let sql = if opening {
            "begin immediate; savepoint w"
        } else {
            guard.ending.then_savepoint()
        };
        let started = prepared(sql).execute(guard.connection()?).await;
        match started {
            Ok(_) => {
                guard.open = true;
                guard.ending = Ending::Settled;
                Ok(Slot {
                    guard: Some(guard),
                    group: self.clone(),
                })
            }
            Err(err) => {
                // Where the statements stopped is unknown: end the
                // transaction, and with it the batch.
                self.abandon(&mut guard, &err.to_string()).await;
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
mod tests {
    use std::time::Duration;

    use sqlx::Row;

    use crate::db::{Database, in_transaction, scratch_sqlite};

    async fn database() -> (Database, tempfile::TempDir) {
        let (db, dir) = scratch_sqlite().await;
        let Database::Sqlite(sqlite) = &db else {
            unreachable!()
        };
        sqlx::query("create table t (n integer primary key)")
            .execute(sqlite.pool())
            .await
            .unwrap();
        // A deferred reference is checked at COMMIT: a way to make a commit fail.
        sqlx::query(
            "create table child (parent integer references t (n) deferrable initially deferred)",
        )
        .execute(sqlite.pool())
        .await
        .unwrap();
        (db, dir)
    }

    async fn insert(db: &Database, n: i64, fail_after: bool) -> crate::Result<()> {
        in_transaction!(db, |tx| {
            sqlx::query("insert into t (n) values ($1)")
                .bind(n)
                .execute(&mut *tx)
                .await?;
            if fail_after {
                return Err(crate::StorageError::Corrupt("fails after writing".into()));
            }
        });
        Ok(())
    }

    async fn rows(db: &Database) -> Vec<i64> {
        let Database::Sqlite(sqlite) = db else {
            unreachable!()
        };
        sqlx::query("select n from t order by n")
            .fetch_all(sqlite.pool())
            .await
            .unwrap()
            .iter()
            .map(|row| row.get::<i64, _>(0))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writers_in_one_batch_fail_alone() {
        let (db, _dir) = database().await;
        let writers = (0..40).map(|n| {
            let db = db.clone();
            tokio::spawn(async move { insert(&db, n, n % 3 == 0).await })
        });
        let results = futures_outcomes(writers).await;
        for (n, result) in results.iter().enumerate() {
            assert_eq!(result.is_ok(), n % 3 != 0, "writer {n}");
        }
        // Every successful write is visible to other connections once its call returned.
        let expected: Vec<i64> = (0..40).filter(|n| n % 3 != 0).collect();
        assert_eq!(rows(&db).await, expected);
    }

    async fn futures_outcomes(
        handles: impl Iterator<Item = tokio::task::JoinHandle<crate::Result<()>>>,
    ) -> Vec<crate::Result<()>> {
        let mut out = Vec::new();
        for handle in handles {
            out.push(handle.await.unwrap());
        }
        out
    }

    #[tokio::test]
    async fn the_group_statements_stay_prepared_on_the_writer_connection() {
        let (db, _dir) = database().await;
        let Database::Sqlite(sqlite) = &db else {
            unreachable!()
        };
        // One at a time: each opens a batch, and every other one is undone.
        for n in 0..10 {
            insert(&db, n, n % 2 == 1).await.unwrap_or_default();
        }
        let mut slot = sqlite.group().enter().await.unwrap();
        let cached = sqlx::Connection::cached_statements_size(slot.connection());
        // The writers' insert, `begin immediate; savepoint w`, `commit` and
        // `rollback to w; release w; commit`.
        assert_eq!(cached, 4, "statements cached on the writer connection");
    }

    #[tokio::test]
    async fn an_abandoned_savepoint_is_rolled_back_and_others_commit() {
        let (db, _dir) = database().await;
        let Database::Sqlite(sqlite) = &db else {
            unreachable!()
        };
        let mut slot = sqlite.group().enter().await.unwrap();
        sqlx::query("insert into t (n) values (1)")
            .execute(slot.connection())
            .await
            .unwrap();
        drop(slot); // a client hung up mid-write
        insert(&db, 2, false).await.unwrap();
        assert_eq!(rows(&db).await, vec![2]);
    }

    #[tokio::test]
    async fn the_last_writer_of_a_batch_failing_is_undone_at_the_commit() {
        let (db, _dir) = database().await;
        let Database::Sqlite(sqlite) = &db else {
            unreachable!()
        };
        let mut kept = sqlite.group().enter().await.unwrap();
        sqlx::query("insert into t (n) values (1)")
            .execute(kept.connection())
            .await
            .unwrap();
        let kept_batch = kept.finish(true).await.unwrap();
        let mut undone = sqlite.group().enter().await.unwrap();
        sqlx::query("insert into t (n) values (2)")
            .execute(undone.connection())
            .await
            .unwrap();
        let undone_batch = undone.finish(false).await.unwrap();
        sqlite.group().committed(kept_batch).await.unwrap();
        sqlite.group().committed(undone_batch).await.unwrap();
        assert_eq!(rows(&db).await, vec![1]);
        // Many writers in a row, every other one failing, in as few batches as come.
        for n in 10..30 {
            insert(&db, n, n % 2 == 1).await.unwrap_or_default();
        }
        let expected: Vec<i64> = std::iter::once(1)
            .chain((10..30).filter(|n| n % 2 == 0))
            .collect();
        assert_eq!(rows(&db).await, expected);
    }

    #[tokio::test]
    async fn a_failed_commit_fails_every_writer_of_its_batch() {
        let (db, _dir) = database().await;
        let Database::Sqlite(sqlite) = &db else {
            unreachable!()
        };
        // Two writers in one batch: the first leaves a dangling deferred reference.
        let mut first = sqlite.group().enter().await.unwrap();
        sqlx::query("insert into child (parent) values (99)")
            .execute(first.connection())
            .await
            .unwrap();
        // The second writer queues for its turn while the first holds it, so it
        // comes before the closer and shares the batch.
        let second = {
            let db = db.clone();
            tokio::spawn(async move { insert(&db, 7, false).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let first_batch = first.finish(true).await.unwrap();
        let first_outcome = sqlite.group().committed(first_batch).await;
        assert!(
            matches!(first_outcome, Err(crate::StorageError::CommitFailed(_))),
            "{first_outcome:?}"
        );
        let second_outcome = tokio::time::timeout(Duration::from_secs(10), second)
            .await
            .unwrap()
            .unwrap();
        assert!(
            matches!(second_outcome, Err(crate::StorageError::CommitFailed(_))),
            "{second_outcome:?}"
        );
        assert!(
            rows(&db).await.is_empty(),
            "nothing of the failed batch remains"
        );
        // The writer keeps working after a failed batch.
        insert(&db, 8, false).await.unwrap();
        assert!(rows(&db).await.contains(&8));
    }
}
