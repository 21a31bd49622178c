//! The text index of the SQLite queue's dead jobs: an FTS5 table (trigram,
//! as the done jobs' text index) of each dead job's id, payload and last
//! result, so the console's search of dead jobs (most often by the error
//! they died of) reads the matches, not every dead job of the month kept.
//!
//! Unlike the done jobs' index it is kept by triggers in the statements
//! that move a job: a job enters it when it dies (out of attempts, or
//! killed), leaves it when it is retried or deleted, and is indexed again
//! if its last result changes while dead. Only the failure path writes it:
//! a push fires nothing, and an acknowledgement of a job that lives only
//! checks the trigger's condition.

use sqlx::SqlitePool;

use super::state_counts::{column_of, has_trigger, state_of};

/// The update trigger's name: its presence says the index is set up.
const UPDATE_TRIGGER: &str = "jobs_dead_text_on_update";

/// The delete trigger's name.
const DELETE_TRIGGER: &str = "jobs_dead_text_on_delete";

/// Whether the `Jobs` row named `row` (`new`, `old`, or none for the
/// table's own columns) is dead.
fn dead(row: &str) -> String {
    format!("{} = 'dead'", state_of(row))
}

/// The indexed text of the `Jobs` row named `row`, in the table's columns'
/// order (id, payload, last result).
fn text_of(row: &str) -> String {
    let column = |name: &str| column_of(row, name);
    format!(
        "{}, cast({} as text), coalesce({}, '')",
        column("id"),
        column("job"),
        column("last_result")
    )
}

/// The statements that set the index up: the table, the dead jobs there
/// are, and the triggers that keep it.
fn set_up_statements() -> Vec<String> {
    vec![
        format!("drop trigger if exists {UPDATE_TRIGGER}"),
        format!("drop trigger if exists {DELETE_TRIGGER}"),
        "drop table if exists dead_job_text".to_owned(),
        "create virtual table dead_job_text using fts5(
             id, job, result, content = '', contentless_delete = 1, tokenize = 'trigram')"
            .to_owned(),
        format!(
            "insert into dead_job_text (rowid, id, job, result)
             select rowid, {} from Jobs where {}",
            text_of(""),
            dead("")
        ),
        // One trigger for entering, leaving and changing while dead, so an
        // acknowledgement checks one condition.
        format!(
            "create trigger {UPDATE_TRIGGER}
             after update of status, attempts, max_attempts, last_result, job on Jobs
             when {old_dead} or {new_dead}
             begin
                 delete from dead_job_text where rowid = old.rowid and {old_dead};
                 insert into dead_job_text (rowid, id, job, result)
                     select new.rowid, {text} where {new_dead};
             end",
            old_dead = dead("old"),
            new_dead = dead("new"),
            text = text_of("new"),
        ),
        format!(
            "create trigger {DELETE_TRIGGER} after delete on Jobs when {} begin
                 delete from dead_job_text where rowid = old.rowid;
             end",
            dead("old")
        ),
    ]
}

/// Sets the index up once per queue file, in one write transaction (no job
/// dies between the reading of the dead ones and the triggers).
pub(super) async fn set_up(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin_with("begin immediate").await?;
    if !has_trigger(&mut tx, UPDATE_TRIGGER).await? {
        for statement in set_up_statements() {
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::search_index::phrase;
    use crate::queue::test_queue::{memory_queue, run};

    async fn found(pool: &SqlitePool, text: &str) -> Vec<String> {
        sqlx::query_scalar(
            "select Jobs.id from dead_job_text cross join Jobs on Jobs.rowid = dead_job_text.rowid
             where dead_job_text match $1 order by Jobs.rowid",
        )
        .bind(phrase(text))
        .fetch_all(pool)
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_job_is_in_the_index_while_it_is_dead() {
        let pool = memory_queue().await;
        // Dead before the index is set up: indexed by the set-up.
        run(
            &pool,
            r#"insert into Jobs (job, id, job_type, status, attempts, max_attempts, last_result)
               values (cast('{"agency_id":"agc_1"}' as blob), 'old', 'probe', 'Killed', 1, 3, '{"Err":"cancelled by an operator"}')"#,
        )
        .await;
        set_up(&pool).await.unwrap();
        set_up(&pool).await.unwrap();
        assert_eq!(found(&pool, "CANCELLED by").await, ["old"]);
        for (id, max) in [("a", 3), ("b", 3)] {
            run(
                &pool,
                &format!(
                    r#"insert into Jobs (job, id, job_type, max_attempts)
                       values (cast('{{"delivery_id":"whd_{id}"}}' as blob), '{id}', 'probe', {max})"#
                ),
            )
            .await;
        }
        // A failure with attempts left is not dead; out of attempts it is.
        run(&pool, r#"update Jobs set status = 'Failed', attempts = 1, last_result = '{"Err":"endpoint answered 503"}' where id = 'a'"#).await;
        assert!(found(&pool, "answered 503").await.is_empty());
        run(&pool, r#"update Jobs set attempts = 3, last_result = '{"Err":"endpoint answered 503"}' where id = 'a'"#).await;
        assert_eq!(found(&pool, "answered 503").await, ["a"]);
        assert_eq!(found(&pool, "whd_a").await, ["a"]);
        // A changed result while dead is indexed as it is now.
        run(
            &pool,
            r#"update Jobs set last_result = '{"Err":"timed out"}' where id = 'a'"#,
        )
        .await;
        assert!(found(&pool, "answered 503").await.is_empty());
        assert_eq!(found(&pool, "timed out").await, ["a"]);
        // Retried: it leaves; it dies again: it is back.
        run(
            &pool,
            "update Jobs set status = 'Pending', attempts = 0 where id = 'a'",
        )
        .await;
        assert!(found(&pool, "timed out").await.is_empty());
        run(&pool, "update Jobs set status = 'Killed' where id = 'a'").await;
        assert_eq!(found(&pool, "timed out").await, ["a"]);
        // Done is not dead; a deleted job leaves.
        run(&pool, "update Jobs set status = 'Done' where id = 'b'").await;
        assert!(found(&pool, "whd_b").await.is_empty());
        run(&pool, "delete from Jobs where id = 'a'").await;
        run(&pool, "delete from Jobs where id = 'b'").await;
        assert!(found(&pool, "timed out").await.is_empty());
        assert_eq!(found(&pool, "cancelled").await, ["old"]);
    }
}
