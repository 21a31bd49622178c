//! Every run of a job: which worker process ran it, on which host, when it
//! came due, started and finished, and how it ended. A run is written when
//! it starts and again when it ends, in small batches (a process's workers
//! hand their records to one writer), so a crash loses at most a batch of
//! this history, never a job.

use std::collections::BTreeMap;

use sqlx::QueryBuilder;

use crate::db::{in_transaction, on_pool};
use crate::retention::PurgeBatch;
use crate::{Result, Store, Timestamp};

/// How long runs stay (the longest a dead job is kept, and then some).
pub const ATTEMPTS_KEPT_SECONDS: i64 = 31 * 86_400;

/// Runs written by one statement: 12 values each, well under either
/// database's limit on bound values.
const RUNS_PER_STATEMENT: usize = 256;

/// One run of a job.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct AttemptRecord {
    /// The job (a ULID).
    pub job_id: String,
    /// Which run, from 1.
    pub attempt: i64,
    /// The job's queue.
    pub queue: String,
    /// The worker process that ran it (`wrk_…`).
    pub worker_id: String,
    /// That process's host.
    pub host: String,
    /// The agency the job works for, when it names one.
    pub agency_id: Option<String>,
    /// The webhook endpoint it delivers to, when it is a delivery.
    pub endpoint_id: Option<String>,
    /// When the job came due for this run, when known.
    pub due_at: Option<Timestamp>,
    /// When the run started.
    pub started_at: Timestamp,
    /// When it ended; none while it runs (or if its worker died).
    pub finished_at: Option<Timestamp>,
    /// `succeeded` or `failed` once ended.
    pub outcome: Option<String>,
    /// The handler's error, when it failed.
    pub error: Option<String>,
}

/// Runs of jobs.
pub struct JobAttempts<'a> {
    store: &'a Store,
}

impl Store {
    /// Runs of jobs.
    pub fn job_attempts(&self) -> JobAttempts<'_> {
        JobAttempts { store: self }
    }
}

/// The latest `$3` runs of the jobs whose ids are the JSON array `$1` (of
/// queue `$2` only, unless null), newest first: each id's runs by the
/// primary key, then the few found sorted.
pub(crate) fn of_jobs_sql(backend: crate::db::Backend) -> String {
    format!(
        "select job_id, attempt, queue, worker_id, host, agency_id, endpoint_id, due_at,
                started_at, finished_at, outcome, error
         from job_attempts
         where job_id {} and ($2 is null or queue = $2)
         order by started_at desc limit $3",
        backend.in_id_list("$1")
    )
}

impl JobAttempts<'_> {
    /// Writes `records`, each replacing what was written of the same run
    /// (the same job started at the same instant); of several records of one
    /// run in `records`, the last counts.
    pub async fn record(&self, records: &[AttemptRecord]) -> Result<()> {
        let mut latest: BTreeMap<(&str, Timestamp), &AttemptRecord> = BTreeMap::new();
        for run in records {
            latest.insert((run.job_id.as_str(), run.started_at), run);
        }
        let runs: Vec<&AttemptRecord> = latest.into_values().collect();
        if runs.is_empty() {
            return Ok(());
        }
        // Durable: the console reads a job's runs back at once. The writer
        // batches them off the jobs' path, so the wait costs no job anything.
        // One statement per chunk of runs, not one per run: each statement
        // is a round trip to the database.
        in_transaction!(self.store.db(), |tx| {
            for chunk in runs.chunks(RUNS_PER_STATEMENT) {
                let mut insert = QueryBuilder::new(
                    "insert into job_attempts (job_id, attempt, queue, worker_id, host, agency_id,
                         endpoint_id, due_at, started_at, finished_at, outcome, error) ",
                );
                insert.push_values(chunk, |mut row, run| {
                    row.push_bind(&run.job_id)
                        .push_bind(run.attempt)
                        .push_bind(&run.queue)
                        .push_bind(&run.worker_id)
                        .push_bind(&run.host)
                        .push_bind(&run.agency_id)
                        .push_bind(&run.endpoint_id)
                        .push_bind(run.due_at)
                        .push_bind(run.started_at)
                        .push_bind(run.finished_at)
                        .push_bind(&run.outcome)
                        .push_bind(&run.error);
                });
                insert.push(
                    " on conflict (job_id, started_at) do update set
                         worker_id = excluded.worker_id, host = excluded.host,
                         attempt = excluded.attempt, due_at = excluded.due_at,
                         finished_at = excluded.finished_at, outcome = excluded.outcome,
                         error = excluded.error",
                );
                insert.build().execute(&mut *tx).await?;
            }
        });
        Ok(())
    }

    /// Every run of `job_id`, first first (a retried dead job's attempts
    /// count from 1 again; its runs are all here).
    pub async fn of_job(&self, job_id: &str) -> Result<Vec<AttemptRecord>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(
                "select job_id, attempt, queue, worker_id, host, agency_id, endpoint_id, due_at,
                        started_at, finished_at, outcome, error
                 from job_attempts where job_id = $1 order by started_at",
            )
            .bind(job_id)
            .fetch_all(pool)
            .await?)
        })
    }

    /// The latest `limit` runs of any of `job_ids` (of `queue` only, when
    /// given), newest first. Runs made in the process that committed their
    /// work (an event's dispatch, a delivery's first attempt) go by the id
    /// of what they worked on, not a queue job's: this is how a search by
    /// those ids finds them.
    pub async fn of_jobs(
        &self,
        job_ids: &[String],
        queue: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AttemptRecord>> {
        if job_ids.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let ids = serde_json::to_string(job_ids)
            .map_err(|err| crate::StorageError::Corrupt(format!("job ids: {err}")))?;
        let sql = of_jobs_sql(self.store.db().backend());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(ids)
                .bind(queue)
                .bind(limit)
                .fetch_all(pool)
                .await?)
        })
    }

    /// Forgets runs that started more than [`ATTEMPTS_KEPT_SECONDS`] before
    /// `now`, the oldest first, at most `limit` of them; returns how many.
    pub async fn purge(&self, now: Timestamp, limit: u32) -> Result<PurgeBatch> {
        let before = now.plus_seconds(-ATTEMPTS_KEPT_SECONDS);
        self.store.purge_before(PURGE_SQL, before, limit).await
    }
}

/// One batch of the runs' purge: runs started before `$1`, the oldest
/// first, at most `$2`, found by their start's index.
pub(crate) const PURGE_SQL: &str = "delete from job_attempts where (job_id, started_at) in (
     select job_id, started_at from job_attempts
     where started_at < $1 order by started_at limit $2)";
