//! The database handle: SQLite (embedded profile) or PostgreSQL (distributed
//! profile) behind one type, with connection settings and migrations.
//!
//! Repositories share one SQL text between the backends (both accept `$n`
//! placeholders, `on conflict` and `returning`); the `on_pool!` and
//! `in_transaction!` macros compile a repository body once per backend.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

use crate::Result;

/// The table our migrator records applied migrations in. apalis keeps its own
/// migrations in sqlx's default table of the same database, so ours has its own.
const MIGRATIONS_TABLE: &str = "listing_api_migrations";

/// How long a connection waits for a SQLite write lock before failing.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Which backend a database is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// SQLite file in the data directory.
    Sqlite,
    /// PostgreSQL server.
    Postgres,
}

/// Where the relational data lives, as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseTarget {
    /// A SQLite file (created if missing).
    SqliteFile(PathBuf),
    /// A `sqlite:` or `postgres://` URL.
    Url(String),
}

/// A connection pool to one of the two backends.
#[derive(Clone, Debug)]
pub enum Database {
    /// The embedded profile.
    Sqlite(SqlitePool),
    /// The distributed profile.
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to the backend's pool; the body is compiled
/// once per backend.
macro_rules! on_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            $crate::db::Database::Sqlite($pool) => $body,
            $crate::db::Database::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

/// Runs `$body` inside a write transaction bound to `$tx`, committing when the
/// body finishes and rolling back when it returns early with `?`. SQLite write
/// transactions start with `BEGIN IMMEDIATE`, so a writer queues for the lock
/// under the busy timeout instead of failing when it upgrades from reading.
macro_rules! in_transaction {
    ($db:expr, |$tx:ident| $body:block) => {
        match $db {
            $crate::db::Database::Sqlite(pool) => {
                let mut $tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                let output = $body;
                $tx.commit().await?;
                output
            }
            $crate::db::Database::Postgres(pool) => {
                let mut $tx = pool.begin().await?;
                let output = $body;
                $tx.commit().await?;
                output
            }
        }
    };
}
pub(crate) use in_transaction;

/// Pool sizing and connection options that are not part of the URL.
#[derive(Clone, Debug)]
pub struct PoolSettings {
    /// Most connections the pool opens.
    pub max_connections: u32,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            max_connections: 10,
        }
    }
}

impl Database {
    /// Connects to `target` without running migrations.
    pub async fn connect(target: &DatabaseTarget, settings: &PoolSettings) -> Result<Self> {
        match target {
            DatabaseTarget::SqliteFile(path) => {
                let options = SqliteConnectOptions::new().filename(path);
                Self::connect_sqlite(options, settings).await
            }
            DatabaseTarget::Url(url) if url.starts_with("sqlite:") => {
                let options = SqliteConnectOptions::from_str(url)?;
                Self::connect_sqlite(options, settings).await
            }
            DatabaseTarget::Url(url) => {
                let options = PgConnectOptions::from_str(url)?;
                let pool = PgPoolOptions::new()
                    .max_connections(settings.max_connections)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect_with(options)
                    .await?;
                Ok(Self::Postgres(pool))
            }
        }
    }

    async fn connect_sqlite(
        options: SqliteConnectOptions,
        settings: &PoolSettings,
    ) -> Result<Self> {
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: a commit acknowledged to a client is on disk even after a power
            // loss, not only after a process crash (which NORMAL already covers).
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(SQLITE_BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(settings.max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        Ok(Self::Sqlite(pool))
    }

    /// Applies every pending migration of this backend. Safe to run from several
    /// processes at once: sqlx takes a database lock while migrating.
    pub async fn migrate(&self) -> Result<()> {
        match self {
            Self::Sqlite(pool) => {
                let mut migrator = sqlx::migrate!("../migrations/sqlite");
                migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
                migrator.run(pool).await?;
            }
            Self::Postgres(pool) => {
                let mut migrator = sqlx::migrate!("../migrations/postgres");
                migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
                migrator.run(pool).await?;
            }
        }
        Ok(())
    }

    /// Which backend this is.
    pub fn backend(&self) -> Backend {
        match self {
            Self::Sqlite(_) => Backend::Sqlite,
            Self::Postgres(_) => Backend::Postgres,
        }
    }

    /// A pool for bookkeeping whose commits need not reach the disk before
    /// returning (idempotency reservations): on SQLite a second pool on the same
    /// file with `synchronous=NORMAL` (the WAL is synced by the next durable
    /// commit or checkpoint), on PostgreSQL the same pool, where bookkeeping
    /// transactions turn `synchronous_commit` off for themselves.
    pub async fn bookkeeping_twin(&self) -> Result<Self> {
        match self {
            Self::Sqlite(pool) => {
                let options = (*pool.connect_options())
                    .clone()
                    .synchronous(SqliteSynchronous::Normal);
                let twin = SqlitePoolOptions::new()
                    .max_connections(pool.options().get_max_connections())
                    .acquire_timeout(Duration::from_secs(10))
                    .connect_with(options)
                    .await?;
                Ok(Self::Sqlite(twin))
            }
            Self::Postgres(pool) => Ok(Self::Postgres(pool.clone())),
        }
    }

    /// Closes every connection, waiting for checked-out ones to return.
    pub async fn close(&self) {
        on_pool!(self, pool => pool.close().await)
    }
}
