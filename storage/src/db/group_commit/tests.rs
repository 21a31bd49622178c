//! The group commit's tests: batches, failures, and relaxed batches beside durable ones.

use std::time::Duration;

use sqlx::Row;

use super::CommitSync;
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
    let mut slot = sqlite.group().enter(CommitSync::Full).await.unwrap();
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
    let mut slot = sqlite.group().enter(CommitSync::Full).await.unwrap();
    sqlx::query("insert into t (n) values (1)")
        .execute(slot.connection())
        .await
        .unwrap();
    drop(slot); // a client hung up mid-write
    insert(&db, 2, false).await.unwrap();
    assert_eq!(rows(&db).await, vec![2]);
}

#[tokio::test]
async fn a_writer_dropped_while_its_turn_starts_fails_no_other_writer() {
    let (db, _dir) = database().await;
    let Database::Sqlite(sqlite) = &db else {
        unreachable!()
    };
    // A writer whose request is dropped (a client hung up) while the
    // statements opening its turn run: the first poll sends them to the
    // connection's thread, which runs them whatever becomes of the caller.
    // A timeout of zero polls the call once, then drops it.
    for sync in [CommitSync::Full, CommitSync::Relaxed] {
        let entered = tokio::time::timeout(Duration::ZERO, sqlite.group().enter(sync)).await;
        if let Ok(Err(err)) = entered {
            panic!("a turn ({sync:?}) failed behind a dropped one: {err}");
        }
    }
    // The writers after them, in new batches and in open ones, commit.
    insert(&db, 1, false).await.unwrap();
    let writers = (2..12).map(|n| {
        let db = db.clone();
        tokio::spawn(async move { insert(&db, n, false).await })
    });
    for outcome in futures_outcomes(writers).await {
        outcome.unwrap();
    }
    assert_eq!(rows(&db).await, (1..12).collect::<Vec<_>>());
}

#[tokio::test]
async fn the_last_writer_of_a_batch_failing_is_undone_at_the_commit() {
    let (db, _dir) = database().await;
    let Database::Sqlite(sqlite) = &db else {
        unreachable!()
    };
    let mut kept = sqlite.group().enter(CommitSync::Full).await.unwrap();
    sqlx::query("insert into t (n) values (1)")
        .execute(kept.connection())
        .await
        .unwrap();
    let kept_batch = kept.finish(true).await.unwrap();
    let mut undone = sqlite.group().enter(CommitSync::Full).await.unwrap();
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
    let mut first = sqlite.group().enter(CommitSync::Full).await.unwrap();
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
    // On this test's one-thread runtime, yielding lets the spawned writer
    // run until it waits for the turn, before the closer is asked.
    tokio::task::yield_now().await;
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

/// The `synchronous` setting the slot's transaction will commit with
/// (0 off, 1 normal, 2 full).
async fn synchronous(slot: &mut super::Slot) -> i64 {
    sqlx::query_scalar("pragma synchronous")
        .fetch_one(slot.connection())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_relaxed_batch_commits_without_a_sync_and_a_durable_one_after_it_syncs() {
    let (db, _dir) = database().await;
    let Database::Sqlite(sqlite) = &db else {
        unreachable!()
    };
    let group = sqlite.group();
    // A purge's batch on its own: committed, visible, without a sync.
    let mut purge = group.enter(CommitSync::Relaxed).await.unwrap();
    assert_eq!(synchronous(&mut purge).await, 1, "a relaxed batch: NORMAL");
    sqlx::query("insert into t (n) values (1)")
        .execute(purge.connection())
        .await
        .unwrap();
    let purge_batch = purge.finish(true).await.unwrap();
    group.committed(purge_batch).await.unwrap();
    assert_eq!(rows(&db).await, vec![1]);

    // A durable writer after it syncs again.
    let mut create = group.enter(CommitSync::Full).await.unwrap();
    assert_eq!(synchronous(&mut create).await, 2, "a durable batch: FULL");
    sqlx::query("insert into t (n) values (2)")
        .execute(create.connection())
        .await
        .unwrap();
    let create_batch = create.finish(true).await.unwrap();
    group.committed(create_batch).await.unwrap();
    assert_eq!(rows(&db).await, vec![1, 2]);
}

/// A writer queued behind the slot's: enters with `sync`, inserts `n`,
/// finishes; returns the `synchronous` setting it saw and its batch.
fn queued_writer(
    group: &std::sync::Arc<super::GroupCommit>,
    sync: CommitSync,
    n: i64,
) -> tokio::task::JoinHandle<(i64, u64)> {
    let group = group.clone();
    tokio::spawn(async move {
        let mut slot = group.enter(sync).await.unwrap();
        let setting = synchronous(&mut slot).await;
        sqlx::query("insert into t (n) values ($1)")
            .bind(n)
            .execute(slot.connection())
            .await
            .unwrap();
        let batch = slot.finish(true).await.unwrap();
        (setting, batch)
    })
}

/// A writer with `first` inserts 1 and, while it holds the turn, one
/// with `second` queues to insert 2 (before the closer, so it finds the
/// first's batch open). Returns both batches and the `synchronous`
/// setting the second saw, once both are committed.
async fn second_writer_behind(first: CommitSync, second: CommitSync) -> (u64, u64, i64) {
    let (db, _dir) = database().await;
    let Database::Sqlite(sqlite) = &db else {
        unreachable!()
    };
    let group = sqlite.group();
    let mut holding = group.enter(first).await.unwrap();
    sqlx::query("insert into t (n) values (1)")
        .execute(holding.connection())
        .await
        .unwrap();
    let queued = queued_writer(group, second, 2);
    // On this test's one-thread runtime, yielding lets the spawned writer
    // run until it waits for the turn, before the closer is asked.
    tokio::task::yield_now().await;
    let first_batch = holding.finish(true).await.unwrap();
    let (setting, second_batch) = queued.await.unwrap();
    group.committed(first_batch).await.unwrap();
    group.committed(second_batch).await.unwrap();
    assert_eq!(rows(&db).await, vec![1, 2]);
    (first_batch, second_batch, setting)
}

#[tokio::test]
async fn a_durable_writer_commits_an_open_relaxed_batch_before_its_own() {
    let (purge_batch, create_batch, setting) =
        second_writer_behind(CommitSync::Relaxed, CommitSync::Full).await;
    assert_ne!(
        create_batch, purge_batch,
        "the create has a batch of its own"
    );
    assert_eq!(setting, 2, "which syncs");
}

#[tokio::test]
async fn a_relaxed_writer_rides_on_an_open_durable_batch() {
    let (create_batch, purge_batch, setting) =
        second_writer_behind(CommitSync::Full, CommitSync::Relaxed).await;
    assert_eq!(
        purge_batch, create_batch,
        "the purge joined the create's batch"
    );
    assert_eq!(setting, 2, "and commits with its sync");
}
