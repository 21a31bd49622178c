//! The text index of the SQLite queue's finished jobs: an FTS5 table of
//! each job's id and payload with the trigram tokenizer (any substring of
//! three characters or more, case-insensitive). The console's free-text,
//! agency and listing-number searches of done jobs (a week of them, the
//! only state that grows with the history) read it instead of every done
//! job.
//!
//! It is built behind the queue, not in its statements: a job's id and
//! payload never change after its push and its row id only grows, so the
//! index catches up with every job pushed since it last did, in small
//! batches ([`catch_up`]), from the maintenance schedule and before each
//! search. Indexing in the push's own statement (a trigger) made a push
//! about eight times dearer (tokenizing a payload costs more than writing
//! it); here a push and an acknowledgement cost what they did. The index
//! holds no copy of the text (`content = ''`); a deleted job leaves it by a
//! trigger (`contentless_delete`), so a row id SQLite gives again never
//! finds the text of the job that had it.

use sqlx::SqlitePool;

/// The delete trigger's name: its presence says the index is set up.
const DELETE_TRIGGER: &str = "jobs_text_forgotten_on_delete";

/// Objects of an earlier shape of the index (kept by triggers on every
/// write), dropped when it is set up again.
const EARLIER_TRIGGERS: [&str; 3] = [
    "jobs_indexed_on_delete",
    "jobs_indexed_on_update",
    "jobs_indexed_on_insert",
];

/// Jobs one catch-up transaction indexes: a few milliseconds of the
/// writer's time, so a push waits for at most one batch.
pub(crate) const CATCH_UP_BATCH: i64 = 200;

/// Shortest text the trigram index finds by itself; shorter text is looked
/// for in the jobs' own columns.
pub(crate) const SHORTEST_INDEXED: usize = 3;

/// The statements that set the index up, empty: the catch-up fills it.
fn set_up_statements() -> Vec<String> {
    vec![
        "drop table if exists job_text".to_owned(),
        "drop table if exists job_text_progress".to_owned(),
        "create virtual table job_text using fts5(
             id, job, content = '', contentless_delete = 1, tokenize = 'trigram')"
            .to_owned(),
        // The highest row id indexed: every job at or below it is.
        "create table job_text_progress (indexed_to integer not null)".to_owned(),
        "insert into job_text_progress (indexed_to) values (0)".to_owned(),
        // A deleted job leaves the index; and when it was the newest, the
        // next push takes its row id again, so the mark steps back below it.
        format!(
            "create trigger {DELETE_TRIGGER} after delete on Jobs begin
                 delete from job_text where rowid = old.rowid
                     and old.rowid <= (select indexed_to from job_text_progress);
                 update job_text_progress set indexed_to = (select coalesce(max(rowid), 0) from Jobs)
                     where indexed_to > (select coalesce(max(rowid), 0) from Jobs);
             end"
        ),
    ]
}

/// Sets the index up once per queue file, in one write transaction.
pub(super) async fn set_up(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin_with("begin immediate").await?;
    let kept: i64 = sqlx::query_scalar(
        "select count(*) from sqlite_master where type = 'trigger' and name = $1",
    )
    .bind(DELETE_TRIGGER)
    .fetch_one(&mut *tx)
    .await?;
    if kept == 0 {
        for trigger in EARLIER_TRIGGERS.iter().chain([&DELETE_TRIGGER]) {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "drop trigger if exists {trigger}"
            )))
            .execute(&mut *tx)
            .await?;
        }
        for statement in set_up_statements() {
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await
}

/// Indexes every job pushed since the index last caught up, [`CATCH_UP_BATCH`]
/// a transaction; returns how many.
pub async fn catch_up(pool: &SqlitePool) -> Result<u64, sqlx::Error> {
    let mut indexed = 0;
    loop {
        let mut tx = pool.begin_with("begin immediate").await?;
        let from: i64 = sqlx::query_scalar("select indexed_to from job_text_progress")
            .fetch_one(&mut *tx)
            .await?;
        let to: Option<i64> = sqlx::query_scalar(
            "select max(rowid) from (select rowid from Jobs where rowid > $1 order by rowid limit $2)",
        )
        .bind(from)
        .bind(CATCH_UP_BATCH)
        .fetch_one(&mut *tx)
        .await?;
        let Some(to) = to else {
            tx.commit().await?;
            return Ok(indexed);
        };
        let rows = sqlx::query(
            "insert into job_text (rowid, id, job)
             select rowid, id, cast(job as text) from Jobs where rowid > $1 and rowid <= $2",
        )
        .bind(from)
        .bind(to)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        sqlx::query("update job_text_progress set indexed_to = $1")
            .bind(to)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        indexed += rows;
    }
}

/// Opens the text index on a new connection by a read, retried while the
/// file is busy. SQLite opens a virtual table on a connection the first time
/// a statement names it, and when that statement is a write (a push, whose
/// trigger writes the index) the open can fail at once with "database is
/// locked" while another connection writes, without waiting for it as the
/// busy timeout says; a read waits.
pub(super) async fn warm(connection: &mut sqlx::SqliteConnection) -> Result<(), sqlx::Error> {
    let mut attempt = 0;
    loop {
        match sqlx::query("select rowid from job_text where rowid = 0")
            .fetch_optional(&mut *connection)
            .await
        {
            Ok(_) => return Ok(()),
            Err(sqlx::Error::Database(err))
                if err.message().contains("locked") && attempt < 100 =>
            {
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// An FTS5 phrase of `text` exactly: quoted, its quotes doubled.
pub(crate) fn phrase(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// An FTS5 query for jobs naming `text` anywhere, or naming any of `ids` as
/// a JSON string (`"evt_1"`, so `evt_1` does not find `evt_10`). None when
/// some of it is too short for the index.
pub(crate) fn any_of(text: Option<&str>, ids: &[String]) -> Option<String> {
    let mut phrases = Vec::with_capacity(ids.len() + 1);
    if let Some(text) = text {
        if text.chars().count() < SHORTEST_INDEXED {
            return None;
        }
        phrases.push(phrase(text));
    }
    phrases.extend(ids.iter().map(|id| phrase(&format!("\"{id}\""))));
    (!phrases.is_empty()).then(|| phrases.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::test_queue::{memory_queue, run};

    async fn found(pool: &SqlitePool, query: &str) -> Vec<String> {
        sqlx::query_scalar(
            "select Jobs.id from job_text cross join Jobs on Jobs.rowid = job_text.rowid
             where job_text match $1 order by Jobs.rowid",
        )
        .bind(query)
        .fetch_all(pool)
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn the_index_catches_up_with_pushes_and_forgets_deleted_jobs() {
        let pool = memory_queue().await;
        // A job there before the index is set up is indexed by its first
        // catch-up; a payload stored as a blob (as apalis binds it) is read
        // as its text.
        run(
            &pool,
            r#"insert into Jobs (job, id, job_type) values (cast('{"agency_id":"agc_1","event_ids":["evt_10"]}' as blob), '01A', 'dispatch')"#,
        )
        .await;
        set_up(&pool).await.unwrap();
        set_up(&pool).await.unwrap();
        run(
            &pool,
            r#"insert into Jobs (job, id, job_type) values ('{"agency_id":"agc_2","event_ids":["evt_1"]}', '01B', 'dispatch')"#,
        )
        .await;
        // Nothing is indexed by a push.
        assert!(found(&pool, &phrase("agc_")).await.is_empty());
        assert_eq!(catch_up(&pool).await.unwrap(), 2);
        assert_eq!(catch_up(&pool).await.unwrap(), 0);
        assert_eq!(found(&pool, &phrase("AGC_1")).await, ["01A"]);
        assert_eq!(found(&pool, &phrase("agc_")).await, ["01A", "01B"]);
        assert_eq!(
            found(&pool, &any_of(None, &["evt_1".to_owned()]).unwrap()).await,
            ["01B"]
        );
        assert_eq!(found(&pool, &phrase("01b")).await, ["01B"]);
        // More than a batch.
        for n in 0..(CATCH_UP_BATCH + 5) {
            run(
                &pool,
                &format!(
                    r#"insert into Jobs (job, id, job_type) values ('{{"n":"bulk-{n:04}"}}', '02{n:04}', 'probe')"#
                ),
            )
            .await;
        }
        assert_eq!(catch_up(&pool).await.unwrap(), (CATCH_UP_BATCH + 5) as u64);
        assert_eq!(found(&pool, &phrase("bulk-0204")).await, ["020204"]);
        // A deleted job leaves the index; the newest deleted, its row id is
        // given again, and the new job is indexed as itself.
        run(&pool, "delete from Jobs where id = '01B'").await;
        assert!(found(&pool, &phrase("agc_2")).await.is_empty());
        run(&pool, "delete from Jobs where id = '020204'").await;
        run(
            &pool,
            r#"insert into Jobs (job, id, job_type) values ('{"n":"taken-again"}', '03A', 'probe')"#,
        )
        .await;
        assert_eq!(catch_up(&pool).await.unwrap(), 1);
        assert_eq!(found(&pool, &phrase("taken-again")).await, ["03A"]);
        assert!(found(&pool, &phrase("bulk-0204")).await.is_empty());
        // Quotes in the text are text.
        assert!(found(&pool, &phrase(r#"a"b"#)).await.is_empty());
        assert_eq!(any_of(Some("ab"), &[]), None);
        assert_eq!(any_of(None, &[]), None);
    }

    /// A connection of its own to the queue file at `path`, waiting up to
    /// ten seconds for a busy file.
    async fn connection(path: &std::path::Path) -> sqlx::SqliteConnection {
        use sqlx::ConnectOptions;
        sqlx::sqlite::SqliteConnectOptions::new()
            .filename(path)
            .busy_timeout(std::time::Duration::from_secs(10))
            .connect()
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_warmed_connection_waits_for_a_writer_instead_of_failing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.sqlite");
        let queue =
            crate::queue::JobQueue::connect(&crate::queue::QueueTarget::SqliteFile(path.clone()))
                .await
                .unwrap();
        let crate::queue::QueueBackend::Sqlite(pool) = queue.backend() else {
            unreachable!()
        };
        sqlx::query("insert into Jobs (job, id, job_type) values ('an old push', 'old', 'probe')")
            .execute(pool)
            .await
            .unwrap();
        assert_eq!(catch_up(pool).await.unwrap(), 1);
        // Another connection is writing...
        let mut writer = connection(&path).await;
        sqlx::query("begin immediate")
            .execute(&mut writer)
            .await
            .unwrap();
        sqlx::query("insert into Jobs (job, id, job_type) values ('first push', 'a', 'probe')")
            .execute(&mut writer)
            .await
            .unwrap();
        // ... while a new connection, warmed as the queue's pool warms each,
        // deletes a job (whose trigger names the index), as a purge does: it
        // waits for the writer.
        let mut pusher = connection(&path).await;
        warm(&mut pusher).await.unwrap();
        let push = tokio::spawn(async move {
            sqlx::query("begin").execute(&mut pusher).await?;
            sqlx::query("delete from Jobs where id = 'old'")
                .execute(&mut pusher)
                .await?;
            sqlx::query("commit").execute(&mut pusher).await.map(|_| ())
        });
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        sqlx::query("commit").execute(&mut writer).await.unwrap();
        push.await.unwrap().unwrap();
        let ids: Vec<String> = sqlx::query_scalar("select id from Jobs order by 1")
            .fetch_all(&mut writer)
            .await
            .unwrap();
        assert_eq!(ids, ["a"]);
        let indexed: Vec<i64> =
            sqlx::query_scalar("select rowid from job_text where job_text match 'old push'")
                .fetch_all(&mut writer)
                .await
                .unwrap();
        assert!(indexed.is_empty(), "{indexed:?}");
    }
}
