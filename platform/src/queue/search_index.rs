//! The text index of the SQLite queue's jobs: an FTS5 table over each job's
//! id, payload and last result, with the trigram tokenizer (any substring of
//! three characters or more, case-insensitive), kept by triggers on
//! apalis-sqlite's `Jobs` in the statement that changes the job. The ops
//! console's free-text, agency and listing-number searches read it instead
//! of every job of a state.
//!
//! It indexes `Jobs` without copying it (`content = 'Jobs'`): the index
//! holds the trigrams, the rows stay where apalis keeps them.

use sqlx::SqlitePool;

/// The triggers' names, the insert's last: its presence says the index is
/// built and kept.
const TRIGGERS: [&str; 3] = [
    "jobs_indexed_on_delete",
    "jobs_indexed_on_update",
    "jobs_indexed_on_insert",
];

/// Shortest text the trigram index finds by itself; shorter text is looked
/// for in the jobs' own columns.
pub(crate) const SHORTEST_INDEXED: usize = 3;

/// The statements that build the index over the jobs there are and the
/// triggers that keep it.
fn set_up_statements() -> Vec<String> {
    let forget_old = "insert into job_text (job_text, rowid, id, job, last_result)
                      values ('delete', old.rowid, old.id, old.job, old.last_result);";
    let index_new = "insert into job_text (rowid, id, job, last_result)
                     values (new.rowid, new.id, new.job, new.last_result);";
    vec![
        "drop table if exists job_text".to_owned(),
        "create virtual table job_text using fts5(
             id, job, last_result, content = 'Jobs', content_rowid = 'rowid',
             tokenize = 'trigram')"
            .to_owned(),
        "insert into job_text (job_text) values ('rebuild')".to_owned(),
        format!(
            "create trigger {} after delete on Jobs begin {forget_old} end",
            TRIGGERS[0]
        ),
        format!(
            "create trigger {} after update of id, job, last_result on Jobs
             begin {forget_old} {index_new} end",
            TRIGGERS[1]
        ),
        format!(
            "create trigger {} after insert on Jobs begin {index_new} end",
            TRIGGERS[2]
        ),
    ]
}

/// Builds the index once per queue file: in one write transaction, so no
/// job changes between the indexing of those there are and the triggers
/// that index the rest.
pub(super) async fn set_up(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin_with("begin immediate").await?;
    let kept: i64 = sqlx::query_scalar(
        "select count(*) from sqlite_master where type = 'trigger' and name = $1",
    )
    .bind(TRIGGERS[2])
    .fetch_one(&mut *tx)
    .await?;
    if kept == 0 {
        for trigger in TRIGGERS {
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
    use apalis_sqlite::SqliteStorage;
    use sqlx::sqlite::SqlitePoolOptions;

    use super::*;

    async fn found(pool: &SqlitePool, query: &str) -> Vec<String> {
        sqlx::query_scalar(
            "select id from Jobs where rowid in (select rowid from job_text where job_text match $1)
             order by rowid",
        )
        .bind(query)
        .fetch_all(pool)
        .await
        .unwrap()
    }

    async fn run(pool: &SqlitePool, sql: &str) {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(pool)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn the_index_finds_what_the_jobs_say_as_they_change() {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .unwrap();
        SqliteStorage::<()>::migrations().run(&pool).await.unwrap();
        // A job there before the index is built is indexed by the build; a
        // payload stored as a blob (as apalis binds it) is read as its text.
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
        assert_eq!(found(&pool, &phrase("AGC_1")).await, ["01A"]);
        assert_eq!(found(&pool, &phrase("agc_")).await, ["01A", "01B"]);
        assert_eq!(
            found(&pool, &any_of(None, &["evt_1".to_owned()]).unwrap()).await,
            ["01B"]
        );
        assert_eq!(found(&pool, &phrase("01b")).await, ["01B"]);
        // The last result is indexed as it changes, and forgotten with it.
        run(
            &pool,
            r#"update Jobs set last_result = '{"Err":"endpoint answered 503"}' where id = '01A'"#,
        )
        .await;
        assert_eq!(found(&pool, &phrase("answered 503")).await, ["01A"]);
        run(&pool, "update Jobs set last_result = null where id = '01A'").await;
        assert!(found(&pool, &phrase("answered 503")).await.is_empty());
        run(&pool, "delete from Jobs where id = '01B'").await;
        assert!(found(&pool, &phrase("agc_2")).await.is_empty());
        // Quotes in the text are text.
        assert!(found(&pool, &phrase(r#"a"b"#)).await.is_empty());
        assert_eq!(any_of(Some("ab"), &[]), None);
        assert_eq!(any_of(None, &[]), None);
        let integrity = "insert into job_text (job_text, rank) values ('integrity-check', 1)";
        run(&pool, integrity).await;
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
        crate::queue::JobQueue::connect(&crate::queue::QueueTarget::SqliteFile(path.clone()))
            .await
            .unwrap();
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
        // pushes: it waits for the writer, and its job is indexed.
        let mut pusher = connection(&path).await;
        warm(&mut pusher).await.unwrap();
        // As apalis pushes: in a transaction begun before the insert.
        let push = tokio::spawn(async move {
            sqlx::query("begin").execute(&mut pusher).await?;
            sqlx::query(
                "insert into Jobs (job, id, job_type) values ('second push', 'b', 'probe')",
            )
            .execute(&mut pusher)
            .await?;
            sqlx::query("commit").execute(&mut pusher).await.map(|_| ())
        });
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        sqlx::query("commit").execute(&mut writer).await.unwrap();
        push.await.unwrap().unwrap();
        let ids: Vec<String> = sqlx::query_scalar(
            "select Jobs.id from job_text join Jobs on Jobs.rowid = job_text.rowid
             where job_text match 'push' order by 1",
        )
        .fetch_all(&mut writer)
        .await
        .unwrap();
        assert_eq!(ids, ["a", "b"]);
    }
}
