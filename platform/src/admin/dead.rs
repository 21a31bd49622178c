//! Dead jobs: listed with their last error, put back in their queue with
//! fresh attempts, or thrown away.

use redis::AsyncCommands;
use serde::Serialize;
use serde_json::Value;

use super::found::error_of;
use super::purge::redis_forget;
use super::queue_admin::{DEAD, QueueAdmin};
use super::redis_jobs::read_jobs;
use crate::kinds::QUEUES;
use crate::queue::{QueueBackend, QueueError, redis_dead};

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
                // The `limit` most recent of each queue by the dead index,
                // then the most recent of those, read in one pipeline.
                let mut connection = connection.clone();
                if limit == 0 {
                    return Ok(Vec::new());
                }
                let last = isize::try_from(limit).unwrap_or(isize::MAX) - 1;
                let mut recent: Vec<(f64, &str, String)> = Vec::new();
                for queue in QUEUES {
                    redis_dead::catch_up(&connection, queue, false).await?;
                    let of_queue: Vec<(String, f64)> = connection
                        .zrevrange_withscores(redis_dead::dead_recent_key(queue), 0, last)
                        .await?;
                    recent.extend(of_queue.into_iter().map(|(id, died)| (died, queue, id)));
                }
                recent.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.2.cmp(&a.2)));
                recent.truncate(limit as usize);
                let jobs: Vec<(String, String)> = recent
                    .iter()
                    .map(|(_, queue, id)| ((*queue).to_owned(), id.clone()))
                    .collect();
                let read = read_jobs(&mut connection, &jobs).await?;
                Ok(recent
                    .into_iter()
                    .zip(read)
                    // A job purged meanwhile is left out.
                    .filter(|(_, (meta, _))| !meta.is_empty())
                    .map(|((_, queue, id), (meta, payload))| DeadJob {
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
                    })
                    .collect())
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
                        .key(redis_dead::dead_order_key(queue))
                        .key(redis_dead::dead_recent_key(queue))
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

/// Moves a dead job back to its queue with fresh attempts, atomically (and
/// out of the dead index, [`crate::queue::redis_dead`]). KEYS: dead set,
/// active list, the job's meta hash, the dead order and recent sets. ARGV:
/// job id.
const REDIS_RETRY: &str = r"
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
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
