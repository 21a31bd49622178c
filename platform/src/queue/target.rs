//! Where the queue lives and how to reach it: the target from configuration,
//! the connection (SQLite with its migrations and tuning, or Redis), and the
//! apalis storages of one kind's queue.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apalis_redis::{ConnectionManager, RedisStorage};
use apalis_sqlite::SqliteStorage;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::wake::Bells;
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

/// The condition of a dead job: killed, or failed with no attempt left.
macro_rules! dead {
    () => {
        "(status = 'Killed' or (status = 'Failed' and attempts >= max_attempts))"
    };
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
/// - The dead jobs (killed, or out of attempts) are a month of failures kept
///   beside a week of done jobs, and no index of apalis's holds them alone
///   (the failed ones share the status index's range with those still
///   retrying). Three partial indexes, each holding only the dead jobs, serve
///   the console's dead list in its order (`run_at`), the most recent dead
///   (`done_at`) and the oldest dead job of each queue for its age (`id`,
///   whose ULID starts with the push's millisecond). A push or an
///   acknowledgement only checks their condition.
const SQLITE_QUEUE_TUNING: [&str; 5] = [
    "drop index if exists LIdx",
    "drop index if exists TIdx",
    concat!(
        "create index if not exists jobs_dead_by_run_at on Jobs (run_at) where ",
        dead!()
    ),
    concat!(
        "create index if not exists jobs_dead_by_done_at on Jobs (done_at) where ",
        dead!()
    ),
    concat!(
        "create index if not exists jobs_dead_by_queue on Jobs (job_type, id) where ",
        dead!()
    ),
];

/// The SQL condition of a dead job in apalis-sqlite's `Jobs` table, the
/// very text of the dead jobs' partial indexes, so that a query carrying it
/// can use them.
pub(crate) const DEAD: &str = dead!();

/// The SQLite table of each fair key's last tag, and of the queue's own
/// clock under the empty key (`super::fair`).
const SQLITE_FAIR_TABLE: &str = "create table if not exists fair_tags (
    queue text not null,
    fairness text not null,
    tag integer not null,
    primary key (queue, fairness)
)";

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
    pub(super) backend: QueueBackend,
    /// This process's bells: a push rings its queue's at once.
    pub(super) bells: Bells,
    /// Where pushes are announced to other processes (Redis profile).
    pub(super) redis_url: Option<String>,
    /// This process's worker slots of each fair queue it consumes: a Redis
    /// fair queue is fed into the free ones (`super::fair`).
    pub(super) slots: Arc<Mutex<BTreeMap<String, super::slots::WorkerSlots>>>,
}

impl JobQueue {
    /// Connects to the queue (and applies its migrations on SQLite).
    pub async fn connect(target: &QueueTarget) -> Result<Self, QueueError> {
        let mut redis_url = None;
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
                // The schema is set up on a pool of its own, closed before
                // the queue's pool opens: each of the queue's connections
                // then meets the text index whole when it opens
                // (`search_index::warm`).
                let setup = SqlitePoolOptions::new()
                    .max_connections(1)
                    .connect_with(options.clone())
                    .await?;
                let mut migrator = SqliteStorage::<()>::migrations();
                migrator.dangerous_set_table_name(APALIS_MIGRATIONS_TABLE);
                migrator.run(&setup).await?;
                for statement in SQLITE_QUEUE_TUNING {
                    sqlx::query(statement).execute(&setup).await?;
                }
                sqlx::query(SQLITE_FAIR_TABLE).execute(&setup).await?;
                super::state_counts::set_up(&setup).await?;
                super::search_index::set_up(&setup).await?;
                super::dead_index::set_up(&setup).await?;
                setup.close().await;
                let pool = SqlitePoolOptions::new()
                    .max_connections(8)
                    .after_connect(|connection, _| {
                        Box::pin(async move { super::search_index::warm(connection).await })
                    })
                    .connect_with(options)
                    .await?;
                QueueBackend::Sqlite(pool)
            }
            QueueTarget::Redis(url) => {
                redis_url = Some(url.clone());
                let connection = apalis_redis::connect(url.as_str()).await?;
                super::redis_index::build_once(&connection).await?;
                QueueBackend::Redis(connection)
            }
        };
        Ok(Self {
            backend,
            bells: Bells::default(),
            redis_url,
            slots: Arc::default(),
        })
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

    /// This process's bells, which its workers wait on.
    pub fn bells(&self) -> &Bells {
        &self.bells
    }

    /// The Redis server pushes are announced on (Redis profile only).
    pub fn redis_url(&self) -> Option<&str> {
        self.redis_url.as_deref()
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
}
