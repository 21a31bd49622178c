//! The embedded queue's console reads: windows, plans, counts.

use serde_json::json;

use super::*;
use crate::admin::QueueAdmin;
use crate::queue::QueueBackend;

/// A job written straight into the table: id, queue, status, attempts,
/// run_at, payload, last result.
type Written<'a> = (&'a str, &'a str, &'a str, i64, i64, Value, Option<&'a str>);

/// A queue file with `jobs` written straight into its table.
async fn sqlite_queue(dir: &tempfile::TempDir, jobs: &[Written<'_>]) -> QueueAdmin {
    let queue = crate::queue::JobQueue::connect(&crate::queue::QueueTarget::SqliteFile(
        dir.path().join("queue.sqlite"),
    ))
    .await
    .unwrap();
    let QueueBackend::Sqlite(pool) = queue.backend() else {
        unreachable!()
    };
    for (id, queue_name, status, attempts, run_at, payload, result) in jobs {
        // Pushed as apalis pushes, then moved to its state as a worker
        // moves it.
        sqlx::query(
            "insert into Jobs (job, id, job_type, status, attempts, max_attempts, run_at)
             values ($1, $2, $3, 'Pending', 0, 3, $4)",
        )
        .bind(payload.to_string().into_bytes())
        .bind(id)
        .bind(queue_name)
        .bind(run_at)
        .execute(pool)
        .await
        .unwrap();
        sqlx::query("update Jobs set status = $2, attempts = $3, last_result = $4 where id = $1")
            .bind(id)
            .bind(status)
            .bind(attempts)
            .bind(result)
            .execute(pool)
            .await
            .unwrap();
    }
    QueueAdmin::new(queue)
}

fn ids(found: &FoundJobs) -> Vec<&str> {
    found.jobs.iter().map(|job| job.id.as_str()).collect()
}

/// The plan of `statement` on the queue file, one line per step.
async fn plan_of(pool: &sqlx::SqlitePool, statement: &str) -> Vec<String> {
    let rows: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "explain query plan {statement}"
    )))
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter().map(|row| row.3).collect()
}

/// That the window and the count of `text` start from `driving` (the start
/// of their plan's first step) and look each match up by row id, with
/// neither a sort of every match nor a walk of every job.
async fn assert_streams_from(
    pool: &sqlx::SqlitePool,
    state: &str,
    text: &SqliteText,
    driving: &str,
) {
    for statement in [
        window_statement(state, text),
        count_statement(state, text, true),
    ] {
        let plan = plan_of(pool, &statement).await;
        let first = plan.iter().find(|step| !step.starts_with("CO-ROUTINE"));
        assert!(
            first.is_some_and(|step| step.starts_with(driving)),
            "{text:?}: {plan:?}"
        );
        assert!(
            plan.iter()
                .any(|step| step.starts_with("SEARCH Jobs USING INTEGER PRIMARY KEY")),
            "{plan:?}"
        );
        assert!(
            !plan
                .iter()
                .any(|step| step.starts_with("SCAN Jobs") || step.contains("TEMP B-TREE")),
            "{text:?}: {plan:?}"
        );
    }
}

mod ages;
mod listing_numbers;
mod windows;
