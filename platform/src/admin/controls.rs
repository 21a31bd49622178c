//! One job as operators see it (state, payload, next run), and the actions on
//! waiting jobs: run a scheduled or retrying job now, cancel a queued one.
//! A cancelled job is not thrown away: it goes dead with "cancelled by an
//! operator" as its last error, so it can be retried or discarded like any.

use std::collections::BTreeMap;

use redis::AsyncCommands;
use serde::Serialize;
use serde_json::Value;

use super::found::error_of;
use super::found::{JobSummary, redacted};
use super::queue_admin::{DEAD, QueueAdmin};
use crate::kinds::QUEUES;
use crate::queue::{PARKED_AT, QueueBackend, QueueError};

/// The last error of a job an operator cancelled.
pub const CANCELLED: &str = "cancelled by an operator";

/// A job in full.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobDetail {
    /// What a list shows of it.
    #[serde(flatten)]
    pub summary: JobSummary,
    /// When it runs next (Unix seconds), while it waits.
    pub next_run_at: Option<i64>,
    /// Runs it gets before it is dead.
    pub max_attempts: Option<u64>,
    /// When it finished or died (Unix seconds).
    pub finished_at: Option<i64>,
}

/// The state of a job on apalis-sqlite's `Jobs` from its columns.
fn sqlite_state(
    status: &str,
    attempts: i64,
    max_attempts: i64,
    run_at: i64,
    now: i64,
) -> &'static str {
    match status {
        "Killed" => "dead",
        "Failed" if attempts >= max_attempts => "dead",
        "Failed" => "retrying",
        "Done" => "done",
        "Queued" | "Running" => "running",
        _ if run_at > now => "scheduled",
        _ => "queued",
    }
}

/// A job row: id, queue, status, attempts, max attempts, run at, last result, done at, payload.
type DetailRow = (
    String,
    String,
    String,
    i64,
    i64,
    i64,
    Option<String>,
    Option<i64>,
    Vec<u8>,
);

/// Puts a scheduled (not parked) job's due time at now. KEYS: scheduled set.
/// ARGV: job id, now, `PARKED_AT`.
const REDIS_RUN_NOW: &str = r"
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
";

/// Takes a waiting job out of its queue and makes it dead, cancelled.
/// KEYS: ready list, fair set, scheduled set, dead set, the job's meta hash.
/// ARGV: job id, `PARKED_AT`, its result, now.
const REDIS_CANCEL: &str = r"
local removed = redis.call('LREM', KEYS[1], 0, ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
local score = redis.call('ZSCORE', KEYS[3], ARGV[1])
if score and tonumber(score) >= tonumber(ARGV[2]) then
  removed = removed + redis.call('ZREM', KEYS[3], ARGV[1])
end
if removed == 0 then return 0 end
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[5], 'status', 'Killed', 'result', ARGV[3], 'done_at', ARGV[4])
return 1
";

impl QueueAdmin {
    /// The job with this id, on whichever queue holds it.
    pub async fn find_job(&self, id: &str) -> Result<Option<JobDetail>, QueueError> {
        let now = chrono::Utc::now().timestamp();
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                let row: Option<DetailRow> = sqlx::query_as(
                    "select id, job_type, status, attempts, max_attempts, run_at, last_result, done_at, job
                     from Jobs where id = $1",
                )
                .bind(id)
                .fetch_optional(pool)
                .await?;
                Ok(row.map(
                    |(id, queue, status, attempts, max_attempts, run_at, result, done_at, job)| {
                        let state = sqlite_state(&status, attempts, max_attempts, run_at, now);
                        let payload: Value = serde_json::from_slice(&job).unwrap_or(Value::Null);
                        JobDetail {
                            next_run_at: matches!(state, "queued" | "scheduled" | "retrying")
                                .then_some(run_at),
                            max_attempts: u64::try_from(max_attempts).ok(),
                            finished_at: done_at.filter(|_| matches!(state, "done" | "dead")),
                            summary: JobSummary {
                                id,
                                queue,
                                state: state.to_owned(),
                                attempts: u64::try_from(attempts).unwrap_or(0),
                                last_error: error_of(result.as_deref()),
                                payload: redacted(payload),
                            },
                        }
                    },
                ))
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                for queue in QUEUES {
                    let payload: Option<Vec<u8>> =
                        connection.hget(format!("{queue}:data"), id).await?;
                    let Some(payload) = payload else {
                        continue;
                    };
                    let meta: BTreeMap<String, String> =
                        connection.hgetall(format!("{queue}:meta:{id}")).await?;
                    let dead: bool = connection.sismember(format!("{queue}:dead"), id).await?;
                    let done: bool = connection.sismember(format!("{queue}:done"), id).await?;
                    let scheduled: Option<f64> =
                        connection.zscore(format!("{queue}:scheduled"), id).await?;
                    let fair: Option<f64> = connection.zscore(format!("{queue}:fair"), id).await?;
                    let ready: Option<i64> = redis::cmd("LPOS")
                        .arg(format!("{queue}:active"))
                        .arg(id)
                        .query_async(&mut connection)
                        .await?;
                    let retrying = meta.get("status").is_some_and(|s| s == "Failed");
                    let parked = scheduled.is_some_and(|score| score >= PARKED_AT as f64);
                    let (state, next_run_at) = if dead {
                        ("dead", None)
                    } else if done {
                        ("done", None)
                    } else if let Some(score) = scheduled.filter(|_| !parked) {
                        (
                            if retrying { "retrying" } else { "scheduled" },
                            Some(score as i64),
                        )
                    } else if parked || fair.is_some() || ready.is_some() {
                        ("queued", Some(now))
                    } else {
                        ("running", None)
                    };
                    let payload: Value = serde_json::from_slice(&payload).unwrap_or(Value::Null);
                    return Ok(Some(JobDetail {
                        next_run_at,
                        max_attempts: meta.get("max_attempts").and_then(|m| m.parse().ok()),
                        finished_at: meta
                            .get("done_at")
                            .and_then(|d| d.parse().ok())
                            .filter(|_| dead || done),
                        summary: JobSummary {
                            id: id.to_owned(),
                            queue: queue.to_owned(),
                            state: state.to_owned(),
                            attempts: meta
                                .get("attempts")
                                .and_then(|a| a.parse().ok())
                                .unwrap_or(0),
                            last_error: error_of(meta.get("result").map(String::as_str)),
                            payload: redacted(payload),
                        },
                    }));
                }
                Ok(None)
            }
        }
    }

    /// Makes a scheduled or retrying job due now and wakes its workers;
    /// false if no such job has this id.
    pub async fn run_now(&self, id: &str) -> Result<bool, QueueError> {
        let now = chrono::Utc::now().timestamp();
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                let queue: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "update Jobs set run_at = $2
                     where id = $1 and ((status = 'Pending' and run_at > $2)
                         or (status = 'Failed' and not {DEAD}))
                     returning job_type"
                )))
                .bind(id)
                .bind(now)
                .fetch_optional(pool)
                .await?;
                if let Some(queue) = &queue {
                    self.queue.announce(queue).await;
                }
                Ok(queue.is_some())
            }
            QueueBackend::Redis(connection) => {
                let mut redis = connection.clone();
                for queue in QUEUES {
                    let moved: u64 = redis::Script::new(REDIS_RUN_NOW)
                        .key(format!("{queue}:scheduled"))
                        .arg(id)
                        .arg(now)
                        .arg(PARKED_AT)
                        .invoke_async(&mut redis)
                        .await?;
                    if moved == 1 {
                        crate::queue::promote_due(connection, queue).await?;
                        self.queue.announce(queue).await;
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }

    /// Takes a queued job out of its queue, dead with [`CANCELLED`] as its
    /// last error; false if no queued job has this id (one a worker took
    /// meanwhile is running, and is not cancelled).
    pub async fn cancel(&self, id: &str) -> Result<bool, QueueError> {
        let now = chrono::Utc::now().timestamp();
        let result = serde_json::json!({ "Err": CANCELLED }).to_string();
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                let updated = sqlx::query(
                    "update Jobs set status = 'Killed', last_result = $3, done_at = $2
                     where id = $1 and status = 'Pending' and run_at <= $2",
                )
                .bind(id)
                .bind(now)
                .bind(&result)
                .execute(pool)
                .await?
                .rows_affected();
                Ok(updated == 1)
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                for queue in QUEUES {
                    let cancelled: u64 = redis::Script::new(REDIS_CANCEL)
                        .key(format!("{queue}:active"))
                        .key(format!("{queue}:fair"))
                        .key(format!("{queue}:scheduled"))
                        .key(format!("{queue}:dead"))
                        .key(format!("{queue}:meta:{id}"))
                        .arg(id)
                        .arg(PARKED_AT)
                        .arg(&result)
                        .arg(now)
                        .invoke_async(&mut connection)
                        .await?;
                    if cancelled == 1 {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_rows_read_as_states() {
        assert_eq!(sqlite_state("Pending", 0, 3, 100, 50), "scheduled");
        assert_eq!(sqlite_state("Pending", 0, 3, 10, 50), "queued");
        assert_eq!(sqlite_state("Failed", 1, 3, 10, 50), "retrying");
        assert_eq!(sqlite_state("Failed", 3, 3, 10, 50), "dead");
        assert_eq!(sqlite_state("Killed", 1, 3, 10, 50), "dead");
        assert_eq!(sqlite_state("Running", 1, 3, 10, 50), "running");
        assert_eq!(sqlite_state("Done", 1, 3, 10, 50), "done");
    }
}
