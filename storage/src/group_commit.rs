//! Group commit for SQLite: the writes of concurrent requests share one
//! transaction and one fsync.
//!
//! SQLite admits one writer at a time and, with `synchronous=FULL`, every
//! commit waits for the disk. Committing each request's transaction on its own
//! makes the fsync the ceiling of the whole service. Here every write of the
//! process goes through one dedicated connection: a writer takes its turn
//! (FIFO), opens the shared transaction if none is open, and runs inside its own
//! savepoint, which it releases on success or rolls back on error, so writers
//! stay isolated from each other's failures. The closer commits the open
//! transaction once the writers queued before it have had their turn; a
//! durable writer returns only after the commit of its batch, so an
//! acknowledged write is on disk, exactly as with one transaction per request.
//! Under no load a batch is one writer; under load it grows by itself.
//!
//! A writer whose future is dropped mid-savepoint (a client hung up) leaves its
//! savepoint open; the next holder of the turn rolls it back first.

use std::collections::VecDeque;
use std::sync::Arc;

use sqlx::{Executor, SqliteConnection, SqlitePool};
use tokio::sync::{Mutex, Notify, OwnedMutexGuard, watch};

use crate::{Result, StorageError};

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

#[derive(Debug)]
struct Batch {
    connection: Option<SqliteConnection>,
    open: bool,
    id: u64,
    next_savepoint: u64,
    dangling: Option<u64>,
}

impl Batch {
    fn connection(&mut self) -> Result<&mut SqliteConnection> {
        self.connection
            .as_mut()
            .ok_or_else(|| StorageError::Corrupt("the database is closed".to_owned()))
    }

    /// Rolls back the savepoint a cancelled writer left open.
    async fn settle_dangling(&mut self) -> Result<()> {
        if let Some(savepoint) = self.dangling.take() {
            let connection = self.connection()?;
            connection
                .execute(sqlx::AssertSqlSafe(format!("rollback to w{savepoint}")))
                .await?;
            connection
                .execute(sqlx::AssertSqlSafe(format!("release w{savepoint}")))
                .await?;
        }
        Ok(())
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
                next_savepoint: 0,
                dangling: None,
            })),
            closer: Notify::new(),
            finished,
            failures: std::sync::Mutex::new(VecDeque::new()),
        });
        tokio::spawn(group.clone().close_batches());
        Ok(group)
    }

    /// Waits for this writer's turn, opens the batch if needed and starts a
    /// savepoint.
    pub(crate) async fn enter(self: &Arc<Self>) -> Result<Slot> {
        let mut guard = self.batch.clone().lock_owned().await;
        guard.settle_dangling().await?;
        if !guard.open {
            guard.connection()?.execute("begin immediate").await?;
            guard.open = true;
            guard.id += 1;
        }
        guard.next_savepoint += 1;
        let savepoint = guard.next_savepoint;
        guard
            .connection()?
            .execute(sqlx::AssertSqlSafe(format!("savepoint w{savepoint}")))
            .await?;
        Ok(Slot {
            guard: Some(guard),
            savepoint,
            group: self.clone(),
        })
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
            if let Err(err) = guard.settle_dangling().await {
                tracing::error!(%err, "could not roll back an abandoned savepoint");
            }
            if !guard.open {
                continue;
            }
            let id = guard.id;
            guard.open = false;
            let outcome = match guard.connection() {
                Ok(connection) => connection.execute("commit").await.map(|_| ()),
                Err(_) => Ok(()),
            };
            if let Err(err) = outcome {
                tracing::error!(%err, batch = id, "group commit failed; the batch is rolled back");
                if let Ok(connection) = guard.connection() {
                    let _ = connection.execute("rollback").await;
                }
                let mut failures = self
                    .failures
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                failures.push_back((id, err.to_string()));
                while failures.len() > REMEMBERED_FAILURES {
                    failures.pop_front();
                }
            }
            drop(guard);
            self.finished.send_replace(id);
        }
    }

    /// Commits what is open and closes the connection.
    pub(crate) async fn close(&self) {
        let mut guard = self.batch.lock().await;
        let _ = guard.settle_dangling().await;
        if let Some(mut connection) = guard.connection.take() {
            if guard.open {
                let _ = connection.execute("commit").await;
                guard.open = false;
                self.finished.send_replace(guard.id);
            }
            let _ = sqlx::Connection::close(connection).await;
        }
    }
}

/// A writer's turn: the shared connection, inside the writer's savepoint.
pub(crate) struct Slot {
    guard: Option<OwnedMutexGuard<Batch>>,
    savepoint: u64,
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

    /// Ends the savepoint (kept or rolled back), gives the turn up and asks
    /// the closer to commit. Returns the batch to wait for.
    pub(crate) async fn finish(mut self, keep: bool) -> Result<u64> {
        let savepoint = self.savepoint;
        let Some(mut guard) = self.guard.take() else {
            return Err(StorageError::Corrupt("slot finished twice".to_owned()));
        };
        let connection = guard.connection()?;
        let ended = async {
            if !keep {
                connection
                    .execute(sqlx::AssertSqlSafe(format!("rollback to w{savepoint}")))
                    .await?;
            }
            connection
                .execute(sqlx::AssertSqlSafe(format!("release w{savepoint}")))
                .await?;
            Ok::<(), StorageError>(())
        }
        .await;
        if ended.is_err() {
            guard.dangling = Some(savepoint);
        }
        let batch = guard.id;
        drop(guard);
        self.group.closer.notify_one();
        ended.map(|()| batch)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            // Dropped mid-savepoint: the next holder rolls it back.
            guard.dangling = Some(self.savepoint);
            drop(guard);
            self.group.closer.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::Row;

    use crate::db::{Database, DatabaseTarget, PoolSettings, in_transaction};

    async fn database() -> (Database, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::connect(
            &DatabaseTarget::SqliteFile(dir.path().join("g.sqlite3")),
            &PoolSettings::default(),
        )
        .await
        .unwrap();
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
