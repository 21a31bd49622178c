//! The durable queue and its push side. The embedded profile keeps jobs in
//! SQLite (a `queue.sqlite3` file beside the data file, see docs/decisions.md);
//! with `REDIS_URL` they live in Redis. Either way a job is pushed with a ULID
//! task id, a priority (honoured on SQLite only) and an optional `run_at`,
//! under the job's dedupe key (a second push with the same key is dropped
//! while the first is kept).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use apalis::prelude::{TaskBuilder, TaskId, TaskSink};
use apalis_redis::{ConnectionManager, RedisStorage};
use apalis_sqlite::SqliteStorage;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use storage::Timestamp;

use crate::kinds::Job;

/// The table apalis records its SQLite migrations in (ours use another).
const APALIS_MIGRATIONS_TABLE: &str = "apalis_migrations";

/// Where the queue lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueTarget {
    /// A SQLite file.
    SqliteFile(PathBuf),
    /// A Redis server.
    Redis(String),
}

/// Why the queue failed.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// SQLite queue.
    #[error("queue database: {0}")]
    Sqlite(#[from] sqlx::Error),
    /// Queue migrations.
    #[error("queue migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Redis queue.
    #[error("queue redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A push was refused.
    #[error("push: {0}")]
    Push(String),
}

/// How to push one job. Whether it is new work is the job's own to say
/// ([`Job::dedupe_key`]).
#[derive(Clone, Debug, Default)]
pub struct PushOptions {
    /// Among due jobs of one queue, higher runs first (then the earlier
    /// `run_at`, then the earlier push). SQLite queue only: apalis-redis keeps
    /// no priority and its queues are first in, first out.
    pub priority: usize,
    /// Not before this instant.
    pub run_at: Option<Timestamp>,
    /// A later offer of work pushed before (a sweep's re-push, a deferral):
    /// it extends the job's dedupe key, so the earlier push, which the queue
    /// keeps for days once it ran, does not swallow this one, while a second
    /// push of the same offer is still dropped.
    pub offer: Option<String>,
}

impl PushOptions {
    /// Options of a later offer of the same work, named `offer`.
    pub fn offer(offer: impl Into<String>) -> Self {
        Self {
            offer: Some(offer.into()),
            ..Self::default()
        }
    }

    /// The dedupe key `job` is pushed under with these options.
    pub fn dedupe_key<J: Job>(&self, job: &J) -> Option<String> {
        let key = job.dedupe_key()?;
        Some(match &self.offer {
            Some(offer) => format!("{key}:{offer}"),
            None => key,
        })
    }
}

/// Corrections to apalis-sqlite's schema, applied after its migrations on
/// every start (each is idempotent).
///
/// - `LIdx` (`Jobs(lock_by)`) steers SQLite's planner into the wrong plan for
///   acknowledgements: it walks every job the worker ever locked (done ones
///   keep `lock_by`) and re-parses the JSON batch for each, so a worker's acks
///   slow down with every job it finishes. Without it the planner looks each
///   acknowledged id up by the unique index. The queries that filter on
///   `lock_by` also filter on `id` or on `status`, which stay indexed.
/// - `TIdx` (`Jobs(id)`) duplicates the unique index on `id`; it only costs
///   every insert.
const SQLITE_QUEUE_TUNING: [&str; 2] = ["drop index if exists LIdx", "drop index if exists TIdx"];

/// The queue's connection.
#[derive(Clone, Debug)]
pub enum QueueBackend {
    /// SQLite file.
    Sqlite(SqlitePool),
    /// Redis.
    Redis(ConnectionManager),
}

/// The push side of the queue. Cheap to clone.
#[derive(Clone, Debug)]
pub struct JobQueue {
    backend: QueueBackend,
}

impl JobQueue {
    /// Connects to the queue (and applies its migrations on SQLite).
    pub async fn connect(target: &QueueTarget) -> Result<Self, QueueError> {
        let backend = match target {
            QueueTarget::SqliteFile(path) => {
                // Processes starting together (an API, a worker, an operator
                // command) take turns opening and migrating the file.
                let _lock = storage::db::lock_sqlite_file(path)
                    .await
                    .map_err(|err| QueueError::Push(format!("queue file lock: {err}")))?;
                let options = SqliteConnectOptions::from_str("sqlite:")?
                    .filename(path)
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    // A pushed job survives a power loss like any acknowledged write.
                    .synchronous(SqliteSynchronous::Full)
                    .foreign_keys(true)
                    .busy_timeout(Duration::from_secs(10));
                let pool = SqlitePoolOptions::new()
                    .max_connections(8)
                    .connect_with(options)
                    .await?;
                let mut migrator = SqliteStorage::<()>::migrations();
                migrator.dangerous_set_table_name(APALIS_MIGRATIONS_TABLE);
                migrator.run(&pool).await?;
                for statement in SQLITE_QUEUE_TUNING {
                    sqlx::query(statement).execute(&pool).await?;
                }
                QueueBackend::Sqlite(pool)
            }
            QueueTarget::Redis(url) => {
                QueueBackend::Redis(apalis_redis::connect(url.as_str()).await?)
            }
        };
        Ok(Self { backend })
    }

    /// Checks that the queue answers (readiness probes).
    pub async fn ping(&self) -> Result<(), QueueError> {
        match &self.backend {
            QueueBackend::Sqlite(pool) => {
                sqlx::query("select 1").execute(pool).await?;
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                redis::cmd("PING")
                    .query_async::<String>(&mut connection)
                    .await?;
            }
        }
        Ok(())
    }

    /// Counts a start of job `task_id` of kind `J` whose apalis attempt is
    /// `attempt`, and returns how many times it has started, runs cut short by
    /// a dead worker included. apalis-sqlite counts those itself (an orphaned
    /// job comes back with `attempts + 1`); apalis-redis re-queues an orphan
    /// without counting it, so a job that kills its worker every time would
    /// run forever: on Redis the starts are counted in the job's meta hash.
    pub async fn count_start<J: Job>(
        &self,
        task_id: &str,
        attempt: usize,
    ) -> Result<usize, QueueError> {
        match &self.backend {
            QueueBackend::Sqlite(_) => Ok(attempt),
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                let starts: u64 = redis::cmd("HINCRBY")
                    .arg(format!("{}:meta:{task_id}", J::KIND))
                    .arg(STARTS_FIELD)
                    .arg(1)
                    .query_async(&mut connection)
                    .await?;
                Ok(attempt.max(usize::try_from(starts).unwrap_or(usize::MAX)))
            }
        }
    }

    /// The backend, for workers and administration.
    pub fn backend(&self) -> &QueueBackend {
        &self.backend
    }

    /// A SQLite storage of `J`'s queue (SQLite profile only).
    pub fn sqlite_storage<J: Job>(pool: &SqlitePool) -> SqliteStorage<J> {
        SqliteStorage::new(pool).with_config(apalis_sqlite::Config::default().queue(J::KIND))
    }

    /// A Redis storage of `J`'s queue (Redis profile only).
    pub fn redis_storage<J: Job>(connection: &ConnectionManager) -> RedisStorage<J> {
        RedisStorage::new(connection.clone())
            .with_config(apalis_redis::Config::default().queue(J::KIND))
    }

    /// Pushes a job; returns its task id.
    pub async fn push<J: Job>(&self, job: J, options: PushOptions) -> Result<String, QueueError> {
        let mut ids = self.push_many(vec![(job, options)]).await?;
        ids.pop()
            .ok_or_else(|| QueueError::Push("nothing pushed".to_owned()))
    }

    /// Pushes several jobs of one kind in one queue transaction; returns their task ids.
    pub async fn push_many<J: Job>(
        &self,
        jobs: Vec<(J, PushOptions)>,
    ) -> Result<Vec<String>, QueueError> {
        let mut ids = Vec::with_capacity(jobs.len());
        let tasks: Vec<_> = jobs
            .into_iter()
            .map(|(job, options)| {
                let id = ulid::Ulid::generate();
                ids.push(id.to_string());
                Self::task(id, job, &options)
            })
            .collect();
        match &self.backend {
            QueueBackend::Sqlite(pool) => Self::sqlite_storage::<J>(pool)
                .push_all(&mut futures::stream::iter(tasks))
                .await
                .map_err(|err| QueueError::Push(err.to_string()))?,
            QueueBackend::Redis(connection) => {
                let mut storage = Self::redis_storage::<J>(connection);
                let mut tasks = tasks.into_iter().peekable();
                while tasks.peek().is_some() {
                    let chunk: Vec<_> = tasks.by_ref().take(PROMOTE_CHUNK).collect();
                    storage
                        .push_all(&mut futures::stream::iter(chunk))
                        .await
                        .map_err(|err| QueueError::Push(err.to_string()))?;
                    // apalis-redis parks every job in the scheduled set, due now.
                    promote_due(connection, J::KIND).await?;
                }
            }
        }
        Ok(ids)
    }

    fn task<J: Job>(id: ulid::Ulid, job: J, options: &PushOptions) -> apalis::prelude::Task<J> {
        let dedupe_key = options.dedupe_key(&job);
        let mut builder = TaskBuilder::new(job)
            .task_id(TaskId::from_ulid(id))
            .priority(options.priority)
            .max_attempts(J::MAX_ATTEMPTS);
        if let Some(run_at) = options.run_at {
            // The queues keep whole seconds: round up, so a job never runs
            // before its time (a retry schedule's wait is a minimum).
            let seconds = run_at
                .as_micros()
                .saturating_add(999_999)
                .div_euclid(1_000_000);
            builder = builder.run_at_timestamp(u64::try_from(seconds).unwrap_or(0));
        }
        if let Some(key) = &dedupe_key {
            builder = builder.idempotency_key(key);
        }
        builder.build()
    }
}

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

/// Field of a Redis job's meta hash counting its starts (`count_start`).
pub const STARTS_FIELD: &str = "starts";

/// Jobs moved from a Redis queue's scheduled set to its active list per call.
const PROMOTE_CHUNK: usize = 1_000;

/// Moves up to ARGV[2] due jobs from the scheduled set to the active list and
/// signals the workers. KEYS: scheduled set, active list, signal list. ARGV:
/// now (Unix seconds), most to move.
const REDIS_PROMOTE: &str = r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then return 0 end
redis.call('RPUSH', KEYS[2], unpack(due))
redis.call('ZREM', KEYS[1], unpack(due))
redis.call('DEL', KEYS[3])
redis.call('LPUSH', KEYS[3], 1)
return #due
";

/// Moves every due job of a Redis queue from its scheduled set to its active
/// list, a chunk at a time; returns how many moved.
///
/// apalis-redis 1.0 pushes every job into the scheduled set (due at once when
/// it has no `run_at`) and lets each fetch promote all due jobs in one Lua
/// call, whose `unpack` fails beyond about 8,000 ids: a backlog that large
/// would stop the queue for good. The push side promotes after each chunk it
/// pushes and the workers promote on every poll, so fetches only ever see a
/// short due list.
pub async fn promote_due(connection: &ConnectionManager, queue: &str) -> Result<u64, QueueError> {
    let mut connection = connection.clone();
    let script = redis::Script::new(REDIS_PROMOTE);
    let mut moved = 0;
    loop {
        let now = chrono::Utc::now().timestamp();
        let count: u64 = script
            .key(format!("{queue}:scheduled"))
            .key(format!("{queue}:active"))
            .key(format!("{queue}:signal"))
            .arg(now)
            .arg(PROMOTE_CHUNK)
            .invoke_async(&mut connection)
            .await?;
        moved += count;
        if count < PROMOTE_CHUNK as u64 {
            return Ok(moved);
        }
    }
}
