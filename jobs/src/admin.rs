//! Queue administration for operators: depth by state, dead jobs with their
//! last error, and putting a dead job back in its queue or throwing it away.
//! apalis 1.0 offers neither update nor delete, so these act on its documented
//! storage: the `Jobs` table on SQLite, the per-queue keys on Redis.

use std::collections::BTreeMap;

use redis::AsyncCommands;
use serde::Serialize;
use serde_json::Value;

use crate::kinds::QUEUES;
use crate::queue::{JobQueue, QueueBackend, QueueError};

/// How many jobs of a queue are in each state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueDepth {
    /// Queue name.
    pub queue: String,
    /// Ready to run.
    pub pending: u64,
    /// Waiting for their `run_at` (or a retry).
    pub scheduled: u64,
    /// Taken by a worker.
    pub running: u64,
    /// Finished.
    pub done: u64,
    /// Out of attempts (or aborted): only an operator brings them back.
    pub dead: u64,
}

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

/// SQL condition of a dead job in apalis-sqlite's `Jobs` table.
const DEAD: &str = "(status = 'Killed' or (status = 'Failed' and attempts >= max_attempts))";

/// Extracts the error text from apalis's `{"Err": "..."}` result encoding
/// (without the wrapper name of a last attempt's failure).
fn error_of(result: Option<&str>) -> Option<String> {
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

/// Operator actions on the queues.
#[derive(Clone, Debug)]
pub struct QueueAdmin {
    queue: JobQueue,
}

impl QueueAdmin {
    /// Administers `queue`.
    pub fn new(queue: JobQueue) -> Self {
        Self { queue }
    }

    /// Depth of every queue by state.
    pub async fn depths(&self) -> Result<Vec<QueueDepth>, QueueError> {
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                let now = chrono::Utc::now().timestamp();
                let rows: Vec<(String, String, bool, bool, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "select job_type, status, run_at > $1, {DEAD}, count(*) from Jobs group by 1, 2, 3, 4"
                )))
                .bind(now)
                .fetch_all(pool)
                .await?;
                let mut depths: BTreeMap<String, QueueDepth> = QUEUES
                    .iter()
                    .map(|q| {
                        (
                            (*q).to_owned(),
                            QueueDepth {
                                queue: (*q).to_owned(),
                                ..QueueDepth::default()
                            },
                        )
                    })
                    .collect();
                for (queue, status, future, dead, count) in rows {
                    let depth = depths.entry(queue.clone()).or_insert_with(|| QueueDepth {
                        queue,
                        ..QueueDepth::default()
                    });
                    let count = u64::try_from(count).unwrap_or(0);
                    match status.as_str() {
                        _ if dead => depth.dead += count,
                        "Done" => depth.done += count,
                        "Queued" | "Running" => depth.running += count,
                        // Pending, or Failed with attempts left (an immediate retry).
                        _ if future => depth.scheduled += count,
                        _ => depth.pending += count,
                    }
                }
                Ok(depths.into_values().collect())
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                let mut depths = Vec::new();
                for queue in QUEUES {
                    let pending: u64 = connection.llen(format!("{queue}:active")).await?;
                    let scheduled: u64 = connection.zcard(format!("{queue}:scheduled")).await?;
                    let done: u64 = connection.scard(format!("{queue}:done")).await?;
                    let dead: u64 = connection.scard(format!("{queue}:dead")).await?;
                    let mut running = 0u64;
                    let inflight: Vec<String> =
                        connection.keys(format!("{queue}:inflight:*")).await?;
                    for key in inflight {
                        let count: u64 = connection.scard(key).await?;
                        running += count;
                    }
                    depths.push(QueueDepth {
                        queue: queue.to_owned(),
                        pending,
                        scheduled,
                        running,
                        done,
                        dead,
                    });
                }
                Ok(depths)
            }
        }
    }

    /// Dead jobs, most recent first.
    pub async fn dead_jobs(&self, limit: u32) -> Result<Vec<DeadJob>, QueueError> {
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                let rows: Vec<DeadRow> =
                    sqlx::query_as(sqlx::AssertSqlSafe(format!(
                        "select id, job_type, attempts, last_result, done_at, job from Jobs where {DEAD}
                         order by done_at desc limit $1"
                    )))
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

    /// Forgets finished jobs: done ones that finished before `done_before`,
    /// dead ones before `dead_before` (Unix seconds). Their idempotency keys
    /// go with them. Returns how many were removed.
    pub async fn purge_finished(
        &self,
        done_before: i64,
        dead_before: i64,
    ) -> Result<u64, QueueError> {
        let mut purged = 0;
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => loop {
                // In batches, so the queue's writers never wait long.
                let deleted = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "delete from Jobs where rowid in (
                         select rowid from Jobs
                         where (status = 'Done' and done_at < $1) or ({DEAD} and done_at < $2)
                         limit {PURGE_BATCH})"
                )))
                .bind(done_before)
                .bind(dead_before)
                .execute(pool)
                .await?
                .rows_affected();
                purged += deleted;
                if deleted < PURGE_BATCH {
                    break;
                }
            },
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                for queue in QUEUES {
                    for (set, before) in [("done", done_before), ("dead", dead_before)] {
                        let key = format!("{queue}:{set}");
                        let mut cursor = 0u64;
                        loop {
                            let (next, ids): (u64, Vec<String>) = redis::cmd("SSCAN")
                                .arg(&key)
                                .arg(cursor)
                                .arg("COUNT")
                                .arg(PURGE_BATCH)
                                .query_async(&mut connection)
                                .await?;
                            if !ids.is_empty() {
                                purged +=
                                    redis_forget(&mut connection, queue, set, before, &ids).await?;
                            }
                            if next == 0 {
                                break;
                            }
                            cursor = next;
                        }
                    }
                }
            }
        }
        Ok(purged)
    }
}

/// Jobs one purge statement or script removes at most.
const PURGE_BATCH: u64 = 500;

/// Moves a dead job back to its queue with fresh attempts, atomically.
/// KEYS: dead set, active list, the job's meta hash. ARGV: job id.
const REDIS_RETRY: &str = r"
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[3], 'status', 'Pending', 'attempts', '0')
redis.call('HDEL', KEYS[3], 'result', 'starts')
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
";

/// Forgets finished jobs of one set that finished before a cutoff, atomically
/// per batch: set membership, meta hash, payload and idempotency claim.
/// KEYS: the set, the payload hash. ARGV: meta prefix, idempotency prefix,
/// cutoff, then job ids.
const REDIS_FORGET: &str = r"
local forgotten = 0
local cutoff = tonumber(ARGV[3])
for i = 4, #ARGV do
    local id = ARGV[i]
    local meta = ARGV[1] .. ':' .. id
    local done_at = tonumber(redis.call('HGET', meta, 'done_at') or '')
    if done_at and done_at < cutoff and redis.call('SREM', KEYS[1], id) == 1 then
        local key = redis.call('HGET', meta, 'idempotency_key')
        if key and #key > 0 then
            local claim = ARGV[2] .. ':' .. key
            if redis.call('GET', claim) == id then redis.call('DEL', claim) end
        end
        redis.call('DEL', meta)
        redis.call('HDEL', KEYS[2], id)
        forgotten = forgotten + 1
    end
end
return forgotten
";

async fn redis_forget(
    connection: &mut redis::aio::ConnectionManager,
    queue: &str,
    set: &str,
    before: i64,
    ids: &[String],
) -> Result<u64, QueueError> {
    let script = redis::Script::new(REDIS_FORGET);
    let mut invocation = script.prepare_invoke();
    invocation
        .key(format!("{queue}:{set}"))
        .key(format!("{queue}:data"))
        .arg(format!("{queue}:meta"))
        .arg(format!("{queue}:idempotency"))
        .arg(before);
    for id in ids {
        invocation.arg(id);
    }
    Ok(invocation.invoke_async(connection).await?)
}

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
