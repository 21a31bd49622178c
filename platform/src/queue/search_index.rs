//! The text index of the SQLite queue's finished jobs: an FTS5 table of
//! each job's id and payload with the trigram tokenizer (any substring of
//! three characters or more, case-insensitive), and beside it each job's
//! agency (`job_agencies`: the payload's `agency_id`, indexed by agency in
//! push order) and the ids it names (`job_names`: each whole id the payload
//! holds as a value, [`super::job_names::names_of`], as the Redis queue's
//! names set holds them). The console's free-text, agency and
//! listing-number searches of done jobs (a week of them, the only state
//! that grows with the history) read them instead of every done job: a text
//! search streams the FTS matches in push order, an agency filter seeks its
//! agency's own jobs, a listing number seeks each id it stands for.
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
//! finds the text or the agency of the job that had it.

use sqlx::SqlitePool;

use super::state_counts::has_trigger;

/// The delete trigger's name: its presence says the index is set up.
const DELETE_TRIGGER: &str = "jobs_named_forgotten_on_delete";

/// The delete trigger of the shape before the names were indexed: its text
/// and agencies are kept, and the names of the jobs it holds are added by
/// the catch-up, behind the new pushes' ([`catch_up`]).
const AGENCIES_TRIGGER: &str = "jobs_indexed_forgotten_on_delete";

/// The delete trigger of the shape before the agencies were indexed: its
/// text index is kept, and the agencies of the jobs it holds are added.
const TEXT_ONLY_TRIGGER: &str = "jobs_text_forgotten_on_delete";

/// Objects of the earliest shape of the index (kept by triggers on every
/// write), dropped when it is set up again.
const EARLIER_TRIGGERS: [&str; 3] = [
    "jobs_indexed_on_delete",
    "jobs_indexed_on_update",
    "jobs_indexed_on_insert",
];

/// The agency a payload (`column`, a blob of JSON text) names at its
/// `agency_id`, or null: every job kind that works for an agency names it
/// there, at the top.
fn agency_of(column: &str) -> String {
    format!(
        "case when json_valid(cast({column} as text))
             and json_type(cast({column} as text), '$.agency_id') = 'text'
         then json_extract(cast({column} as text), '$.agency_id') end"
    )
}

/// The agencies of the jobs whose row ids are in `$1 < rowid <= $2`.
fn agencies_indexed_statement() -> String {
    format!(
        "insert or replace into job_agencies (job, agency_id)
         select rowid, agency from (select rowid, {} as agency from Jobs
                                    where rowid > $1 and rowid <= $2)
         where agency is not null",
        agency_of("job")
    )
}

/// The table of the jobs' agencies and its index.
const AGENCIES_TABLE: [&str; 3] = [
    "drop table if exists job_agencies",
    "create table job_agencies (job integer primary key, agency_id text not null)",
    // An agency's jobs in push order: the console's agency filter.
    "create index job_agencies_by_agency on job_agencies (agency_id, job)",
];

/// The table of the ids the jobs name and its index by job.
const NAMES_TABLE: [&str; 3] = [
    "drop table if exists job_names",
    // The jobs naming an id, in push order: the listing-number search.
    "create table job_names (name text not null, job integer not null,
         primary key (name, job)) without rowid",
    // A deleted job's names, for the delete trigger.
    "create index job_names_by_job on job_names (job)",
];

/// The trigger by which a deleted job leaves the index.
fn delete_trigger() -> String {
    // A deleted job leaves the index; and when it was the newest, the next
    // push takes its row id again, so the marks step back below it.
    format!(
        "create trigger {DELETE_TRIGGER} after delete on Jobs begin
             delete from job_text where rowid = old.rowid
                 and old.rowid <= (select indexed_to from job_text_progress);
             delete from job_agencies where job = old.rowid;
             delete from job_names where job = old.rowid;
             update job_text_progress set indexed_to = (select coalesce(max(rowid), 0) from Jobs)
                 where indexed_to > (select coalesce(max(rowid), 0) from Jobs);
             update job_text_progress set named_to = (select coalesce(max(rowid), 0) from Jobs)
                 where named_to > (select coalesce(max(rowid), 0) from Jobs);
         end"
    )
}

/// Jobs one catch-up transaction indexes: a few milliseconds of the
/// writer's time, so a push waits for at most one batch.
pub(crate) const CATCH_UP_BATCH: i64 = 200;

/// Shortest text the trigram index finds by itself; shorter text is looked
/// for in the jobs' own columns.
pub(crate) const SHORTEST_INDEXED: usize = 3;

/// The statements that set the index up, empty: the catch-up fills it.
fn set_up_statements() -> Vec<String> {
    let mut statements = vec![
        "drop table if exists job_text".to_owned(),
        "drop table if exists job_text_progress".to_owned(),
        "create virtual table job_text using fts5(
             id, job, content = '', contentless_delete = 1, tokenize = 'trigram')"
            .to_owned(),
        // The highest row id indexed (text and agency), and named: every
        // job at or below each is.
        "create table job_text_progress (indexed_to integer not null,
             named_to integer not null default 0)"
            .to_owned(),
        "insert into job_text_progress (indexed_to, named_to) values (0, 0)".to_owned(),
    ];
    statements.extend(AGENCIES_TABLE.map(str::to_owned));
    statements.extend(NAMES_TABLE.map(str::to_owned));
    statements.push(delete_trigger());
    statements
}

/// The statements that add the names to an index already built: the table,
/// empty, its mark at nothing named (the catch-up names the jobs the index
/// holds, a batch at a time), and the delete trigger that forgets them.
fn names_added_statements() -> Vec<String> {
    let mut statements: Vec<String> = NAMES_TABLE.map(str::to_owned).to_vec();
    statements.push(
        "alter table job_text_progress add column named_to integer not null default 0".to_owned(),
    );
    statements.push(format!("drop trigger if exists {AGENCIES_TRIGGER}"));
    statements.push(delete_trigger());
    statements
}

/// The statements that add the agencies to a text index already built:
/// the agencies of the jobs it holds, read once, so that the text of a
/// million jobs is not tokenized again.
fn agencies_added_statements() -> Vec<String> {
    let mut statements: Vec<String> = AGENCIES_TABLE.map(str::to_owned).to_vec();
    statements.push(
        agencies_indexed_statement()
            .replace("$1", "0")
            .replace("$2", "(select indexed_to from job_text_progress)"),
    );
    statements.push(format!("drop trigger {TEXT_ONLY_TRIGGER}"));
    statements.extend(names_added_statements());
    statements
}

/// Sets the index up once per queue file, in one write transaction.
pub(super) async fn set_up(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin_with("begin immediate").await?;
    if !has_trigger(&mut tx, DELETE_TRIGGER).await? {
        let statements = if has_trigger(&mut tx, AGENCIES_TRIGGER).await? {
            names_added_statements()
        } else if has_trigger(&mut tx, TEXT_ONLY_TRIGGER).await? {
            agencies_added_statements()
        } else {
            for trigger in EARLIER_TRIGGERS {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "drop trigger if exists {trigger}"
                )))
                .execute(&mut *tx)
                .await?;
            }
            set_up_statements()
        };
        for statement in statements {
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await
}

/// Indexes every job pushed since the index last caught up, [`CATCH_UP_BATCH`]
/// a transaction; returns how many. Names the jobs an index built before
/// the names were holds first, a batch a transaction, then every new one
/// with its text.
pub async fn catch_up(pool: &SqlitePool) -> Result<u64, sqlx::Error> {
    let mut indexed = 0;
    loop {
        let mut tx = pool.begin_with("begin immediate").await?;
        let (from, named_to): (i64, i64) =
            sqlx::query_as("select indexed_to, named_to from job_text_progress")
                .fetch_one(&mut *tx)
                .await?;
        if named_to < from {
            let to = batch_end(&mut tx, named_to)
                .await?
                .unwrap_or(from)
                .min(from);
            name(&mut tx, named_to, to).await?;
            sqlx::query("update job_text_progress set named_to = $1")
                .bind(to)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            continue;
        }
        let Some(to) = batch_end(&mut tx, from).await? else {
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
        sqlx::query(sqlx::AssertSqlSafe(agencies_indexed_statement()))
            .bind(from)
            .bind(to)
            .execute(&mut *tx)
            .await?;
        name(&mut tx, from, to).await?;
        sqlx::query("update job_text_progress set indexed_to = $1, named_to = $1")
            .bind(to)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        indexed += rows;
    }
}

/// The row id of the last of the next [`CATCH_UP_BATCH`] jobs after `from`,
/// if any.
async fn batch_end(tx: &mut sqlx::SqliteConnection, from: i64) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "select max(rowid) from (select rowid from Jobs where rowid > $1 order by rowid limit $2)",
    )
    .bind(from)
    .bind(CATCH_UP_BATCH)
    .fetch_one(tx)
    .await
}

/// Indexes the names of the jobs whose row ids are in `from < rowid <= to`
/// (a payload that is not JSON names nothing).
async fn name(tx: &mut sqlx::SqliteConnection, from: i64, to: i64) -> Result<(), sqlx::Error> {
    let jobs: Vec<(i64, Vec<u8>)> =
        sqlx::query_as("select rowid, job from Jobs where rowid > $1 and rowid <= $2")
            .bind(from)
            .bind(to)
            .fetch_all(&mut *tx)
            .await?;
    let named: Vec<(String, i64)> = jobs
        .iter()
        .flat_map(|(job, payload)| {
            let payload = serde_json::from_slice(payload).unwrap_or(serde_json::Value::Null);
            super::job_names::names_of(&payload)
                .into_iter()
                .map(move |name| (name, *job))
        })
        .collect();
    if named.is_empty() {
        return Ok(());
    }
    let named = serde_json::to_string(&named)
        .map_err(|err| sqlx::Error::Protocol(format!("a job's names: {err}")))?;
    sqlx::query(
        "insert or ignore into job_names (name, job)
         select json_extract(value, '$[0]'), json_extract(value, '$[1]') from json_each($1)",
    )
    .bind(named)
    .execute(tx)
    .await?;
    Ok(())
}

/// Opens the text indexes (the done jobs' and the dead jobs',
/// `super::dead_index`) on a new connection by a read, retried while the
/// file is busy. SQLite opens a virtual table on a connection the first time
/// a statement names it, and when that statement is a write (a delete or an
/// acknowledgement, whose trigger writes an index) the open can fail at once
/// with "database is locked" while another connection writes, without
/// waiting for it as the busy timeout says; a read waits.
pub(super) async fn warm(connection: &mut sqlx::SqliteConnection) -> Result<(), sqlx::Error> {
    for read in [
        "select rowid from job_text where rowid = 0",
        "select rowid from dead_job_text where rowid = 0",
    ] {
        let mut attempt = 0;
        loop {
            match sqlx::query(read).fetch_optional(&mut *connection).await {
                Ok(_) => break,
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
    Ok(())
}

/// An FTS5 phrase of `text` exactly: quoted, its quotes doubled.
pub(crate) fn phrase(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// Characters of a longer search the text index looks for: the last ones.
/// A trigram phrase reads every one of its trigrams' postings, and the
/// leading characters of an id are the common ones (`op_`, and a ULID's
/// time, shared by every job pushed in the same hour), so the whole of an
/// operation id read postings of nearly every job (10 ms at a million done
/// jobs) where its random tail reads a few thousand (1 ms).
pub(crate) const INDEXED_TAIL: usize = 10;

/// What the text index is asked for a search: its FTS5 query, and whether
/// the query stands for the search exactly or only narrows it down to
/// candidates that the caller checks for the whole text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IndexQuery {
    /// The FTS5 query.
    pub(crate) query: String,
    /// Whether some phrase is a tail of its text ([`INDEXED_TAIL`]).
    pub(crate) narrowed: bool,
}

/// The phrase the index looks for when `text` is searched: its last
/// [`INDEXED_TAIL`] characters when it is longer and plain ASCII (the
/// trigram tokenizer folds the case of other letters as SQLite's `lower`,
/// which the caller's check uses, does not), or all of it.
fn indexed_part(text: &str) -> (&str, bool) {
    if text.is_ascii() && text.len() > INDEXED_TAIL {
        (&text[text.len() - INDEXED_TAIL..], true)
    } else {
        (text, false)
    }
}

/// An FTS5 query for jobs naming `text` anywhere, or naming any of `ids` as
/// a JSON string (`"evt_1"`, so `evt_1` does not find `evt_10`). None when
/// some of it is too short for the index. A long text or id is looked for
/// by its tail ([`indexed_part`]): the query is then `narrowed`, and a job
/// it finds may name the tail and not the whole.
pub(crate) fn any_of(text: Option<&str>, ids: &[String]) -> Option<IndexQuery> {
    let mut phrases = Vec::with_capacity(ids.len() + 1);
    let mut narrowed = false;
    if let Some(text) = text {
        if text.chars().count() < SHORTEST_INDEXED {
            return None;
        }
        let (part, tail) = indexed_part(text);
        narrowed |= tail;
        phrases.push(phrase(part));
    }
    for id in ids {
        // The closing quote stays: `evt_1"` is not found in `"evt_10"`.
        let (part, tail) = indexed_part(id);
        narrowed |= tail;
        let part = if tail {
            format!("{part}\"")
        } else {
            format!("\"{part}\"")
        };
        phrases.push(phrase(&part));
    }
    (!phrases.is_empty()).then(|| IndexQuery {
        query: phrases.join(" OR "),
        narrowed,
    })
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
            found(&pool, &any_of(None, &["evt_1".to_owned()]).unwrap().query).await,
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
        // A long search is looked for by its tail; ids keep their closing
        // quote; text that is not ASCII is looked for whole.
        let long = any_of(Some("op_01HQ5ABCDEFGHJKMNPQRSTVW"), &["evt_1".to_owned()]).unwrap();
        assert_eq!(
            (long.query.as_str(), long.narrowed),
            (r#""KMNPQRSTVW" OR """evt_1""""#, true)
        );
        let related = any_of(None, &["evt_01HQ5ABCDEFGHJKMNPQRS".to_owned()]).unwrap();
        assert_eq!(
            (related.query.as_str(), related.narrowed),
            (r#""GHJKMNPQRS""""#, true)
        );
        let whole = any_of(Some("Café de l'Époque"), &[]).unwrap();
        assert_eq!(
            (whole.query.as_str(), whole.narrowed),
            (r#""Café de l'Époque""#, false)
        );
        assert_eq!(any_of(None, &[]), None);
    }

    /// The triggers on `Jobs` the index keeps (named `jobs_…`).
    async fn index_triggers(pool: &SqlitePool) -> Vec<String> {
        sqlx::query_scalar(
            "select name from sqlite_master where type = 'trigger' and name like 'jobs_%'",
        )
        .fetch_all(pool)
        .await
        .unwrap()
    }

    /// The jobs `agency` has in the agencies' index, in push order.
    async fn of_agency(pool: &SqlitePool, agency: &str) -> Vec<String> {
        sqlx::query_scalar(
            "select Jobs.id from job_agencies cross join Jobs on Jobs.rowid = job_agencies.job
             where job_agencies.agency_id = $1 order by job_agencies.job",
        )
        .bind(agency)
        .fetch_all(pool)
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn each_job_s_agency_is_indexed_with_its_text() {
        let pool = memory_queue().await;
        set_up(&pool).await.unwrap();
        for (id, job) in [
            ("01A", r#"{"agency_id":"agc_1","media_id":"med_1"}"#),
            // Named elsewhere than at its `agency_id`: not the job's agency.
            ("01B", r#"{"note":"agc_1","agency_id":null}"#),
            ("01C", r#"{"agency_id":"agc_2"}"#),
            // Not JSON at all: indexed as text, with no agency.
            ("01D", "not json agc_1"),
            ("01E", r#"{"agency_id":"agc_1"}"#),
        ] {
            run(
                &pool,
                &format!(
                    "insert into Jobs (job, id, job_type) values (cast('{job}' as blob), '{id}', 'probe')"
                ),
            )
            .await;
        }
        assert!(
            of_agency(&pool, "agc_1").await.is_empty(),
            "not yet indexed"
        );
        assert_eq!(catch_up(&pool).await.unwrap(), 5);
        assert_eq!(of_agency(&pool, "agc_1").await, ["01A", "01E"]);
        assert_eq!(of_agency(&pool, "agc_2").await, ["01C"]);
        // A deleted job leaves it.
        run(&pool, "delete from Jobs where id = '01A'").await;
        assert_eq!(of_agency(&pool, "agc_1").await, ["01E"]);
        // The newest deleted, its row id is given again: the new job's
        // agency is its own.
        run(&pool, "delete from Jobs where id = '01E'").await;
        run(
            &pool,
            r#"insert into Jobs (job, id, job_type) values ('{"agency_id":"agc_3"}', '02A', 'probe')"#,
        )
        .await;
        assert_eq!(catch_up(&pool).await.unwrap(), 1);
        assert!(of_agency(&pool, "agc_1").await.is_empty());
        assert_eq!(of_agency(&pool, "agc_3").await, ["02A"]);
    }

    #[tokio::test]
    async fn a_text_index_of_the_earlier_shape_gains_the_agencies_and_keeps_its_text() {
        let pool = memory_queue().await;
        set_up(&pool).await.unwrap();
        for n in 0..3 {
            run(
                &pool,
                &format!(
                    r#"insert into Jobs (job, id, job_type) values ('{{"agency_id":"agc_{n}","n":"kept-{n}"}}', '01{n}', 'probe')"#
                ),
            )
            .await;
        }
        assert_eq!(catch_up(&pool).await.unwrap(), 3);
        // The shape before: the text index and its mark, no agencies (and
        // no names).
        run(&pool, &format!("drop trigger {DELETE_TRIGGER}")).await;
        run(&pool, "drop table job_agencies").await;
        run(&pool, "drop table job_names").await;
        run(&pool, "alter table job_text_progress drop column named_to").await;
        run(
            &pool,
            &format!(
                "create trigger {TEXT_ONLY_TRIGGER} after delete on Jobs begin
                     delete from job_text where rowid = old.rowid
                         and old.rowid <= (select indexed_to from job_text_progress);
                 end"
            ),
        )
        .await;
        // A job pushed since the text index last caught up.
        run(
            &pool,
            r#"insert into Jobs (job, id, job_type) values ('{"agency_id":"agc_1","n":"later"}', '02A', 'probe')"#,
        )
        .await;
        set_up(&pool).await.unwrap();
        // The jobs the text index held have their agencies; their text is
        // not indexed again, and the later push is caught up as usual.
        assert_eq!(of_agency(&pool, "agc_1").await, ["011"]);
        assert_eq!(found(&pool, &phrase("kept-2")).await, ["012"]);
        assert_eq!(catch_up(&pool).await.unwrap(), 1);
        assert_eq!(of_agency(&pool, "agc_1").await, ["011", "02A"]);
        // The new trigger is in place of the old.
        run(&pool, "delete from Jobs where id = '011'").await;
        assert_eq!(of_agency(&pool, "agc_1").await, ["02A"]);
        assert_eq!(index_triggers(&pool).await, [DELETE_TRIGGER]);
    }

    /// The jobs in the names index under `name`, in push order.
    async fn naming(pool: &SqlitePool, name: &str) -> Vec<String> {
        sqlx::query_scalar(
            "select Jobs.id from job_names cross join Jobs on Jobs.rowid = job_names.job
             where job_names.name = $1 order by job_names.job",
        )
        .bind(name)
        .fetch_all(pool)
        .await
        .unwrap()
    }

    const EVENT: &str = "evt_01HQ5ABCDEFGHJKMNPQRSTVWXY";
    const MEDIA: &str = "med_01HQ5ABCDEFGHJKMNPQRSTVWXZ";

    #[tokio::test]
    async fn each_job_s_names_are_indexed_with_its_text() {
        let pool = memory_queue().await;
        set_up(&pool).await.unwrap();
        let event = EVENT.to_lowercase();
        let media = MEDIA.to_lowercase();
        for (id, job) in [
            (
                "01A",
                format!(r#"{{"agency_id":"agc_1","event_ids":["{EVENT}"]}}"#),
            ),
            (
                "01B",
                format!(r#"{{"media_id":"{MEDIA}","again":"{MEDIA}","event":"{EVENT}"}}"#),
            ),
            // Inside longer text: not the id.
            ("01C", format!(r#"{{"note":"{EVENT}/retried"}}"#)),
            ("01D", format!("not json {EVENT}")),
        ] {
            run(
                &pool,
                &format!(
                    "insert into Jobs (job, id, job_type) values (cast('{job}' as blob), '{id}', 'probe')"
                ),
            )
            .await;
        }
        assert!(naming(&pool, &event).await.is_empty(), "not yet indexed");
        assert_eq!(catch_up(&pool).await.unwrap(), 4);
        assert_eq!(naming(&pool, &event).await, ["01A", "01B"]);
        assert_eq!(naming(&pool, &media).await, ["01B"]);
        // A deleted job leaves it; the newest deleted, its row id given
        // again names what the new job names.
        run(&pool, "delete from Jobs where id = '01A'").await;
        assert_eq!(naming(&pool, &event).await, ["01B"]);
        run(&pool, "delete from Jobs where id in ('01B', '01C', '01D')").await;
        run(
            &pool,
            &format!(r#"insert into Jobs (job, id, job_type) values ('{{"m":"{MEDIA}"}}', '02A', 'probe')"#),
        )
        .await;
        assert_eq!(catch_up(&pool).await.unwrap(), 1);
        assert!(naming(&pool, &event).await.is_empty());
        assert_eq!(naming(&pool, &media).await, ["02A"]);
    }

    #[tokio::test]
    async fn an_index_of_the_shape_before_the_names_gains_them_batch_by_batch() {
        let pool = memory_queue().await;
        set_up(&pool).await.unwrap();
        let jobs = CATCH_UP_BATCH + 3;
        for n in 0..jobs {
            run(
                &pool,
                &format!(
                    r#"insert into Jobs (job, id, job_type) values ('{{"agency_id":"agc_1","event":"{EVENT}","n":"kept-{n}"}}', '01{n:04}', 'probe')"#
                ),
            )
            .await;
        }
        assert_eq!(catch_up(&pool).await.unwrap(), jobs as u64);
        // The shape before: text and agencies, no names.
        run(&pool, &format!("drop trigger {DELETE_TRIGGER}")).await;
        run(&pool, "drop table job_names").await;
        run(&pool, "alter table job_text_progress drop column named_to").await;
        run(
            &pool,
            &format!(
                "create trigger {AGENCIES_TRIGGER} after delete on Jobs begin
                     delete from job_text where rowid = old.rowid
                         and old.rowid <= (select indexed_to from job_text_progress);
                     delete from job_agencies where job = old.rowid;
                 end"
            ),
        )
        .await;
        run(
            &pool,
            &format!(r#"insert into Jobs (job, id, job_type) values ('{{"event":"{EVENT}"}}', '02A', 'probe')"#),
        )
        .await;
        set_up(&pool).await.unwrap();
        set_up(&pool).await.unwrap();
        // Nothing named yet; the text and the agencies are kept.
        let event = EVENT.to_lowercase();
        assert!(naming(&pool, &event).await.is_empty());
        assert_eq!(found(&pool, &phrase("kept-202")).await, ["010202"]);
        assert_eq!(of_agency(&pool, "agc_1").await.len(), jobs as usize);
        // The catch-up names what the index held, then the later push with
        // its text (the only one it counts).
        assert_eq!(catch_up(&pool).await.unwrap(), 1);
        let named = naming(&pool, &event).await;
        assert_eq!(named.len(), jobs as usize + 1);
        assert_eq!(named.last().map(String::as_str), Some("02A"));
        // The new trigger is in place of the old.
        run(&pool, "delete from Jobs where id = '02A'").await;
        assert_eq!(naming(&pool, &event).await.len(), jobs as usize);
        assert_eq!(index_triggers(&pool).await, [DELETE_TRIGGER]);
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
