//! Dead jobs: listed with their last error, put back in their queue with
//! fresh attempts, or thrown away.

use std::collections::BTreeMap;

use redis::AsyncCommands;
use serde::Serialize;
use serde_json::Value;

use super::purge::redis_forget;
use super::queue_admin::{DEAD, QueueAdmin};
use crate::kinds::QUEUES;
use crate::queue::{QueueBackend, QueueError};

/// A job that will not run again on its own.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeadJob {
    /// Task id.
    pub id: String,
    /// Queue.
    pub queue: String,
    /// Runs so far.
    pub attempts: u64,
    /// The last error the handler returned.
    pub last_error: Option<String>,
    /// When it last ran (Unix seconds).
    pub failed_at: Option<i64>,
    /// Its payload.
    pub payload: Value,
}

/// A dead job as read from apalis-sqlite: id, queue, attempts, last result,
/// done at, payload.
type DeadRow = (String, String, i64, Option<String>, Option<i64>, Vec<u8>);

/// Extracts the error text from apalis's `{"Err": "..."}` result encoding
/// (without the wrapper name of a last attempt's failure).
pub(super) fn error_of(result: Option<&str>) -> Option<String> {
    let result = result?;
    let text = match serde_json::from_str::<Value>(result) {
        Ok(Value::Object(map)) => map
            .get("Err")
            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned))?,
        _ => result.to_owned(),
    };
    Some(
        text.strip_prefix("AbortError: ")
            .map_or_else(|| text.clone(), str::to_owned),
    )
}

/// The most recent dead jobs on SQLite (`$1` how many), by the dead jobs'
/// own index in its order.
pub(super) fn recent_dead_statement() -> String {
    format!(
        "select id, job_type, attempts, last_result, done_at, job
         from Jobs indexed by jobs_dead_by_done_at where {DEAD}
         order by done_at desc limit $1"
    )
}

impl QueueAdmin {
    /// Dead jobs, most recent first.
    pub async fn dead_jobs(&self, limit: u32) -> Result<Vec<DeadJob>, QueueError> {
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                let rows: Vec<DeadRow> =
                    sqlx::query_as(sqlx::AssertSqlSafe(recent_dead_statement()))
                        .bind(i64::from(limit))
                        .fetch_all(pool)
                        .await?;
                Ok(rows
                    .into_iter()
                    .map(|(id, queue, attempts, result, done_at, job)| DeadJob {
                        id,
                        queue,
                        attempts: u64::try_from(attempts).unwrap_or(0),
                        last_error: error_of(result.as_deref()),
                        failed_at: done_at,
                        payload: serde_json::from_slice(&job).unwrap_or(Value::Null),
                    })
                    .collect())
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                let mut dead = Vec::new();
                for queue in QUEUES {
                    let ids: Vec<String> = connection.smembers(format!("{queue}:dead")).await?;
                    for id in ids {
                        let meta: BTreeMap<String, String> =
                            connection.hgetall(format!("{queue}:meta:{id}")).await?;
                        let payload: Option<Vec<u8>> =
                            connection.hget(format!("{queue}:data"), &id).await?;
                        dead.push(DeadJob {
                            queue: queue.to_owned(),
                            attempts: meta
                                .get("attempts")
                                .and_then(|a| a.parse().ok())
                                .unwrap_or(0),
                            last_error: error_of(meta.get("result").map(String::as_str)),
                            failed_at: meta.get("done_at").and_then(|d| d.parse().ok()),
                            payload: payload
                                .and_then(|p| serde_json::from_slice(&p).ok())
                                .unwrap_or(Value::Null),
                            id,
                        });
                    }
                }
                dead.sort_by_key(|job| std::cmp::Reverse(job.failed_at));
                dead.truncate(limit as usize);
                Ok(dead)
            }
        }
    }

    /// Puts a dead job back in its queue with fresh attempts; false if no dead job has this id.
    pub async fn retry(&self, id: &str) -> Result<bool, QueueError> {
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                let updated = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "update Jobs set status = 'Pending', attempts = 0, lock_by = null, lock_at = null,
                         done_at = null, last_result = null, run_at = $2
                     where id = $1 and {DEAD}"
                )))
                .bind(id)
                .bind(chrono::Utc::now().timestamp())
                .execute(pool)
                .await?
                .rows_affected();
                Ok(updated == 1)
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                let script = redis::Script::new(REDIS_RETRY);
                for queue in QUEUES {
                    let moved: u64 = script
                        .key(format!("{queue}:dead"))
                        .key(format!("{queue}:active"))
                        .key(format!("{queue}:meta:{id}"))
                        .arg(id)
                        .invoke_async(&mut connection)
                        .await?;
                    if moved == 1 {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }

    /// Throws a dead job away; false if no dead job has this id.
    pub async fn discard(&self, id: &str) -> Result<bool, QueueError> {
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                let deleted = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "delete from Jobs where id = $1 and {DEAD}"
                )))
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected();
                Ok(deleted == 1)
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                for queue in QUEUES {
                    let ids = [id.to_owned()];
                    if redis_forget(&mut connection, queue, "dead", i64::MAX, &ids).await? == 1 {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }
}

/// Moves a dead job back to its queue with fresh attempts, atomically.
/// KEYS: dead set, active list, the job's meta hash. ARGV: job id.
const REDIS_RETRY: &str = r"
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[3], 'status', 'Pending', 'attempts', '0')
redis.call('HDEL', KEYS[3], 'result', 'starts')
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_read_from_apalis_results() {
        assert_eq!(error_of(Some(r#"{"Err":"boom"}"#)), Some("boom".to_owned()));
        assert_eq!(error_of(Some(r#"{"Ok":null}"#)), None);
        assert_eq!(error_of(Some("plain")), Some("plain".to_owned()));
        assert_eq!(
            error_of(Some(r#"{"Err":"AbortError: out of attempts"}"#)),
            Some("out of attempts".to_owned())
        );
        assert_eq!(error_of(None), None);
    }
}
