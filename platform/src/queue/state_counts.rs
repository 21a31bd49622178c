//! How many jobs of each queue are done, dead or failed on SQLite, kept by
//! the database itself: triggers on apalis-sqlite's `Jobs` count each job
//! that enters or leaves one of those states in the statement that moves
//! it, so the console's counts and `/metrics` never read the week of done
//! jobs and the month of dead ones the file keeps (a `count(*)` over `Jobs`
//! read every one of them on every page load and every scrape; the failed
//! ones share a status with the dead, so they are counted here too). The
//! waiting and running states are the backlog: they are counted from the
//! status index, whose ranges hold only them. A push (always `Pending`) and
//! a worker's lock fire no counting statement: only the triggers'
//! conditions are checked.
//!
//! A job's state is its `status`, except that a job out of attempts (or
//! killed) is `dead`, as [`crate::admin`]'s `DEAD` condition says.

use sqlx::SqlitePool;

/// The counts: one row per queue (`job_type`) and counted state (`Done`,
/// `dead`, `Failed`).
const COUNTS_TABLE: &str = "create table job_state_counts (
    job_type text not null,
    state text not null,
    jobs integer not null,
    primary key (job_type, state)
) without rowid";

/// The triggers' names, the update's last: its presence says the counts are
/// set up and kept. There is none on insert: apalis pushes every job
/// `Pending` (`queries/task/sink.sql`), which is not counted here, so a push
/// runs no trigger at all (one that only checked its condition made a push
/// a third dearer).
const TRIGGERS: [&str; 2] = [
    "jobs_counted_by_state_on_delete",
    "jobs_counted_by_state_on_update",
];

/// Triggers of an earlier shape of the counts (every state), dropped when
/// the counts are set up again.
const EARLIER_TRIGGERS: [&str; 5] = [
    "jobs_counted_on_delete",
    "jobs_counted_on_update",
    "jobs_counted_on_insert",
    "jobs_finished_counted_on_delete",
    "jobs_finished_counted_on_update",
];

/// The column `name` of the `Jobs` row named `row` (`new`, `old`, or none
/// for the table's own columns), as a trigger or a statement names it.
pub(super) fn column_of(row: &str, name: &str) -> String {
    if row.is_empty() {
        name.to_owned()
    } else {
        format!("{row}.{name}")
    }
}

/// Whether the queue file has a trigger named `name`: each index or count
/// kept by triggers is set up once, when its last trigger is missing.
pub(super) async fn has_trigger(
    connection: &mut sqlx::SqliteConnection,
    name: &str,
) -> Result<bool, sqlx::Error> {
    let kept: i64 = sqlx::query_scalar(
        "select count(*) from sqlite_master where type = 'trigger' and name = $1",
    )
    .bind(name)
    .fetch_one(&mut *connection)
    .await?;
    Ok(kept > 0)
}

/// The counted state of the `Jobs` row named `row` (`new`, `old`, or none
/// for the table's own columns).
pub(super) fn state_of(row: &str) -> String {
    let column = |name: &str| column_of(row, name);
    format!(
        "(case when {status} = 'Killed' or ({status} = 'Failed' and {attempts} >= {max_attempts}) \
         then 'dead' else {status} end)",
        status = column("status"),
        attempts = column("attempts"),
        max_attempts = column("max_attempts"),
    )
}

/// Whether `row`'s state is one the table counts.
fn finished(row: &str) -> String {
    format!("{} in ('Done', 'dead', 'Failed')", state_of(row))
}

/// One job more in `row`'s queue and state, if it is a finished one.
fn count_in(row: &str) -> String {
    format!(
        "insert into job_state_counts (job_type, state, jobs)
         select {row}.job_type, {}, 1 where {}
         on conflict (job_type, state) do update set jobs = jobs + 1;",
        state_of(row),
        finished(row)
    )
}

/// One job fewer in `row`'s queue and state (no row for an unfinished one).
fn count_out(row: &str) -> String {
    format!(
        "update job_state_counts set jobs = jobs - 1 where job_type = {row}.job_type and state = {};",
        state_of(row)
    )
}

/// The statements that set the counts up: the table, its figures from the
/// jobs there are, and the triggers that keep them.
fn set_up_statements() -> Vec<String> {
    vec![
        "drop table if exists job_state_counts".to_owned(),
        COUNTS_TABLE.to_owned(),
        format!(
            "insert into job_state_counts (job_type, state, jobs)
             select job_type, {state}, count(*) from Jobs where {finished} group by 1, 2",
            state = state_of(""),
            finished = finished(""),
        ),
        format!(
            "create trigger {} after delete on Jobs when {} begin {} end",
            TRIGGERS[0],
            finished("old"),
            count_out("old")
        ),
        format!(
            "create trigger {} after update of job_type, status, attempts, max_attempts on Jobs
             when ({} or {}) and (old.job_type is not new.job_type or {} is not {})
             begin {} {} end",
            TRIGGERS[1],
            finished("old"),
            finished("new"),
            state_of("old"),
            state_of("new"),
            count_out("old"),
            count_in("new")
        ),
    ]
}

/// Sets the counts up once per queue file: in one write transaction, so no
/// job changes between the counting of those there are and the triggers
/// that count the rest.
pub(super) async fn set_up(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin_with("begin immediate").await?;
    if !has_trigger(&mut tx, TRIGGERS[1]).await? {
        for trigger in EARLIER_TRIGGERS.iter().chain(&TRIGGERS) {
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

/// Every queue's jobs by state (`Pending`, `Queued`, `Running`, `Done`,
/// `Failed` for a failed job with attempts left, `dead`), and how many of its
/// `Pending` jobs wait for a `run_at` after `now`.
pub(crate) async fn read(
    pool: &SqlitePool,
    now: i64,
) -> Result<(Vec<(String, String, i64)>, Vec<(String, i64)>), sqlx::Error> {
    let mut counts: Vec<(String, String, i64)> =
        sqlx::query_as("select job_type, state, jobs from job_state_counts where jobs <> 0")
            .fetch_all(pool)
            .await?;
    // The backlog, by the status index's ranges.
    let unfinished: Vec<(String, String, i64)> = sqlx::query_as(
        "select job_type, status, count(*) from Jobs
         where status in ('Pending', 'Queued', 'Running') group by 1, 2",
    )
    .fetch_all(pool)
    .await?;
    counts.extend(unfinished);
    let scheduled: Vec<(String, i64)> = sqlx::query_as(
        "select job_type, count(*) from Jobs where status = 'Pending' and run_at > $1 group by 1",
    )
    .bind(now)
    .fetch_all(pool)
    .await?;
    Ok((counts, scheduled))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::test_queue::{memory_queue, run};

    /// The counts as a `count(*)` over every job reads them.
    async fn counted_whole(pool: &SqlitePool) -> Vec<(String, String, i64)> {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "select job_type, {}, count(*) from Jobs group by 1, 2 order by 1, 2",
            state_of("")
        )))
        .fetch_all(pool)
        .await
        .unwrap()
    }

    /// What the console reads; the finished states' figures must be the
    /// table's, kept by the triggers.
    async fn kept(pool: &SqlitePool) -> Vec<(String, String, i64)> {
        let (mut counts, _) = read(pool, 0).await.unwrap();
        counts.sort();
        let mut table: Vec<(String, String, i64)> = sqlx::query_as(
            "select job_type, state, jobs from job_state_counts where jobs <> 0 order by 1, 2",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        table.sort();
        let finished: Vec<(String, String, i64)> = counted_whole(pool)
            .await
            .into_iter()
            .filter(|(_, state, _)| ["Done", "dead", "Failed"].contains(&state.as_str()))
            .collect();
        assert_eq!(table, finished);
        counts
    }

    #[tokio::test]
    async fn the_counts_follow_every_push_change_and_delete() {
        let pool = memory_queue().await;
        let insert = |id: &str, queue: &str, status: &str, attempts: i64| {
            format!(
                "insert into Jobs (job, id, job_type, status, attempts, max_attempts, run_at)
                 values ('{{}}', '{id}', '{queue}', '{status}', {attempts}, 3, 100)"
            )
        };
        // Jobs there before the counts are set up are counted by the set-up.
        run(&pool, &insert("a", "media", "Done", 1)).await;
        run(&pool, &insert("b", "media", "Failed", 3)).await;
        set_up(&pool).await.unwrap();
        assert_eq!(kept(&pool).await, counted_whole(&pool).await);
        // A second start changes nothing.
        set_up(&pool).await.unwrap();
        assert_eq!(kept(&pool).await, counted_whole(&pool).await);

        run(&pool, &insert("c", "media", "Pending", 0)).await;
        run(&pool, &insert("d", "webhook", "Pending", 0)).await;
        // A repeated push is ignored, and so counted once.
        run(
            &pool,
            &format!(
                "{} on conflict do nothing",
                insert("d", "webhook", "Pending", 0)
            ),
        )
        .await;
        run(&pool, "update Jobs set status = 'Running' where id = 'c'").await;
        run(
            &pool,
            "update Jobs set status = 'Failed', attempts = 1 where id = 'c'",
        )
        .await;
        // Out of attempts: dead, with no change of status.
        run(&pool, "update Jobs set attempts = 3 where id = 'c'").await;
        assert!(
            kept(&pool)
                .await
                .contains(&("media".into(), "dead".into(), 2))
        );
        run(&pool, "update Jobs set status = 'Killed' where id = 'd'").await;
        run(
            &pool,
            "update Jobs set status = 'Pending', attempts = 0 where id = 'b'",
        )
        .await;
        run(&pool, "update Jobs set last_result = 'x' where id = 'a'").await;
        assert_eq!(kept(&pool).await, counted_whole(&pool).await);
        run(&pool, "delete from Jobs where status = 'Done'").await;
        run(&pool, "delete from Jobs where id = 'd'").await;
        assert_eq!(kept(&pool).await, counted_whole(&pool).await);

        // Pending jobs due later are the scheduled ones.
        let (_, scheduled) = read(&pool, 99).await.unwrap();
        assert_eq!(scheduled, vec![("media".to_owned(), 1)]);
        let (_, scheduled) = read(&pool, 100).await.unwrap();
        assert!(scheduled.is_empty());
    }
}
