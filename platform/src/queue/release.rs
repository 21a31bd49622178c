//! What a stopping worker process holds: jobs it fetched and never started
//! go back keeping their attempts, jobs cut short count one; and the
//! heartbeat kept during the shutdown's grace period.

use super::target::{JobQueue, QueueBackend, QueueError};

/// A worker of this process and the queue it consumed, for [`JobQueue::release_held`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HeldBy {
    /// The queue (the job kind).
    pub queue: &'static str,
    /// The worker's apalis name.
    pub worker: String,
}

/// What the shutdown left to `release_held` put back where it waits: fetched
/// and never started keeps its attempts; started and cut short counts one,
/// as orphan recovery would. `?1`: the workers' names, a JSON array.
const SQLITE_RELEASE: [&str; 2] = [
    "update Jobs set status = 'Pending', lock_by = null, lock_at = null, done_at = null \
     where status = 'Queued' and lock_by in (select value from json_each(?1))",
    "update Jobs set status = 'Pending', lock_by = null, lock_at = null, done_at = null, \
     attempts = attempts + 1, last_result = '{\"Err\": \"Abandoned at worker shutdown.\"}' \
     where status = 'Running' and lock_by in (select value from json_each(?1))",
];

/// What apalis-sqlite 1.0 writes on a job it re-enqueues from a closing
/// worker's fetch buffer (`reenqueue_abandoned.sql`), charging it an attempt.
const SQLITE_SHUTDOWN_REQUEUE: &str = r#"{"Err": "Re-enqueued due to worker shutdown"}"#;

/// Moves every job in a stopped worker's in-flight set to the head of the
/// active list (they were next in line) and forgets the worker. Starts are
/// counted apart (`STARTS_FIELD`), so a job never started spends nothing.
/// KEYS: in-flight set, active list, signal list, workers set. ARGV: meta hash
/// prefix, worker name.
const REDIS_RELEASE: &str = r"
local held = redis.call('SMEMBERS', KEYS[1])
for _, id in ipairs(held) do
  redis.call('LPUSH', KEYS[2], id)
  local meta = ARGV[1] .. ':' .. id
  redis.call('HSET', meta, 'status', 'Pending')
  redis.call('HDEL', meta, 'locked_at', 'locked_by')
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[4], ARGV[2])
if #held > 0 then
  redis.call('DEL', KEYS[3])
  redis.call('LPUSH', KEYS[3], 1)
end
return #held
";

/// Moves one job from a worker's in-flight set to the head of the active
/// list, if it is still there. KEYS: in-flight set, active list, signal
/// list. ARGV: meta hash prefix, job id.
const REDIS_HAND_BACK: &str = r"
if redis.call('SREM', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[2])
local meta = ARGV[1] .. ':' .. ARGV[2]
redis.call('HSET', meta, 'status', 'Pending')
redis.call('HDEL', meta, 'locked_at', 'locked_by')
redis.call('DEL', KEYS[3])
redis.call('LPUSH', KEYS[3], 1)
return 1
";

/// The names of `workers` as one JSON array, which SQLite expands with `json_each`.
fn worker_names(workers: &[HeldBy]) -> Result<String, QueueError> {
    let names: Vec<&str> = workers.iter().map(|w| w.worker.as_str()).collect();
    serde_json::to_string(&names).map_err(|err| QueueError::Push(err.to_string()))
}

impl JobQueue {
    /// Puts every job still held by `workers` (stopped workers of this
    /// process) back in its queue at once, instead of leaving it locked until
    /// another worker notices the missed heartbeats; returns how many.
    pub async fn release_held(&self, workers: &[HeldBy]) -> Result<u64, QueueError> {
        if workers.is_empty() {
            return Ok(0);
        }
        match &self.backend {
            QueueBackend::Sqlite(pool) => {
                let names = worker_names(workers)?;
                let mut tx = pool.begin().await?;
                let mut released = 0;
                for statement in SQLITE_RELEASE {
                    released += sqlx::query(statement)
                        .bind(&names)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                }
                tx.commit().await?;
                Ok(released)
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                let script = redis::Script::new(REDIS_RELEASE);
                let mut released = 0;
                for held in workers {
                    let queue = held.queue;
                    let count: u64 = script
                        .key(format!("{queue}:inflight:{}", held.worker))
                        .key(format!("{queue}:active"))
                        .key(format!("{queue}:signal"))
                        .key(format!("{queue}:workers"))
                        .arg(format!("{queue}:meta"))
                        .arg(&held.worker)
                        .invoke_async(&mut connection)
                        .await?;
                    released += count;
                }
                Ok(released)
            }
        }
    }

    /// Hands back to their queues the jobs `workers` (live workers of this
    /// process that take no more jobs: a quiet process) fetched and have not
    /// started, keeping their attempts, so other processes run them; jobs in
    /// `running` (started here) stay. Returns how many went back.
    pub async fn hand_back_unstarted(
        &self,
        workers: &[HeldBy],
        running: &std::collections::HashSet<String>,
    ) -> Result<u64, QueueError> {
        if workers.is_empty() {
            return Ok(0);
        }
        match &self.backend {
            QueueBackend::Sqlite(pool) => {
                let names = worker_names(workers)?;
                Ok(sqlx::query(SQLITE_RELEASE[0])
                    .bind(&names)
                    .execute(pool)
                    .await?
                    .rows_affected())
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                let script = redis::Script::new(REDIS_HAND_BACK);
                let mut handed = 0;
                for held in workers {
                    let queue = held.queue;
                    let inflight = format!("{queue}:inflight:{}", held.worker);
                    let ids: Vec<String> = redis::cmd("SMEMBERS")
                        .arg(&inflight)
                        .query_async(&mut connection)
                        .await?;
                    for id in ids.iter().filter(|id| !running.contains(*id)) {
                        let count: u64 = script
                            .key(&inflight)
                            .key(format!("{queue}:active"))
                            .key(format!("{queue}:signal"))
                            .arg(format!("{queue}:meta"))
                            .arg(id)
                            .invoke_async(&mut connection)
                            .await?;
                        handed += count;
                    }
                }
                Ok(handed)
            }
        }
    }

    /// Heartbeats for `workers` on their behalf: apalis stops a worker's
    /// heartbeat once shutdown begins, and a grace period longer than the
    /// missed-heartbeat limit would otherwise let other workers take its
    /// running jobs as orphans and run them a second time meanwhile.
    pub async fn keep_alive(&self, workers: &[HeldBy]) -> Result<(), QueueError> {
        if workers.is_empty() {
            return Ok(());
        }
        match &self.backend {
            QueueBackend::Sqlite(pool) => {
                let names = worker_names(workers)?;
                sqlx::query(
                    "update Workers set last_seen = strftime('%s', 'now') \
                     where id in (select value from json_each(?1))",
                )
                .bind(names)
                .execute(pool)
                .await?;
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                let now = chrono::Utc::now().timestamp();
                for held in workers {
                    // XX: a worker already forgotten stays forgotten.
                    redis::cmd("ZADD")
                        .arg(format!("{}:workers", held.queue))
                        .arg("XX")
                        .arg(now)
                        .arg(&held.worker)
                        .query_async::<i64>(&mut connection)
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// Ids of the jobs `worker` fetched and has not started (SQLite; none on
    /// Redis, whose release charges nothing).
    pub async fn unstarted_by(&self, worker: &str) -> Result<Vec<String>, QueueError> {
        match &self.backend {
            QueueBackend::Sqlite(pool) => Ok(sqlx::query_scalar(
                "select id from Jobs where status = 'Queued' and lock_by = ?1",
            )
            .bind(worker)
            .fetch_all(pool)
            .await?),
            QueueBackend::Redis(_) => Ok(Vec::new()),
        }
    }

    /// Gives back the attempt apalis-sqlite charges a job it re-enqueues from
    /// a closing worker's fetch buffer: of `ids` (taken by `unstarted_by`
    /// before the close), those still waiting as that re-enqueue left them.
    /// A job another worker took meanwhile keeps the charge.
    pub async fn refund_unstarted(&self, ids: &[String]) -> Result<u64, QueueError> {
        let QueueBackend::Sqlite(pool) = &self.backend else {
            return Ok(0);
        };
        if ids.is_empty() {
            return Ok(0);
        }
        let ids = serde_json::to_string(ids).map_err(|err| QueueError::Push(err.to_string()))?;
        Ok(sqlx::query(
            "update Jobs set attempts = attempts - 1, last_result = null \
             where id in (select value from json_each(?1)) and status = 'Pending' \
             and lock_by is null and attempts > 0 and last_result = ?2",
        )
        .bind(ids)
        .bind(SQLITE_SHUTDOWN_REQUEUE)
        .execute(pool)
        .await?
        .rows_affected())
    }
}
