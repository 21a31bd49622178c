//! `Database`: SQLite (embedded profile) or PostgreSQL (distributed
//! profile) behind one type, with connection settings and migrations.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{
    SqliteAutoVacuum, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{PgPool, SqlitePool};

use super::group_commit::GroupCommit;
use super::lock::{lock_for_migrations, lock_sqlite_file};
use crate::Result;

/// The table our migrator records applied migrations in. apalis keeps its own
/// migrations in sqlx's default table of the same database, so ours has its own.
const MIGRATIONS_TABLE: &str = "listing_api_migrations";

/// How long a connection waits for a SQLite write lock before failing.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Pages the write-ahead log grows to before the commit that passes them
/// checkpoints it (SQLite's default is 1,000). A checkpoint copies each
/// page the log holds once, however often it was written, and a create
/// writes mostly the same pages as the one before it (the right-hand
/// leaves of time-ordered indexes, the kept totals): a longer log means
/// far fewer checkpoints for not many more pages each, and fewer writers
/// held behind one. The log stays under about 40 MiB.
pub const WAL_AUTOCHECKPOINT_PAGES: u32 = 10_000;

/// Which backend a database is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// SQLite file in the data directory.
    Sqlite,
    /// PostgreSQL server.
    Postgres,
}

impl Backend {
    /// A subquery of the texts of the JSON array bound at `placeholder`:
    /// ids go in as one JSON array, and both backends expand it in SQL.
    pub(crate) fn id_list(self, placeholder: &str) -> String {
        match self {
            Self::Sqlite => format!("select value from json_each({placeholder})"),
            Self::Postgres => format!("select jsonb_array_elements_text({placeholder}::jsonb)"),
        }
    }

    /// A condition's right side, "is one of the texts of the JSON array
    /// bound at `placeholder`", as an index seeks it: SQLite seeks each of
    /// the array's rows, PostgreSQL takes the array whole as one index
    /// condition (where `in (subquery)` may be planned as a walk of the
    /// whole index that checks each entry against the list).
    pub(crate) fn in_id_list(self, placeholder: &str) -> String {
        match self {
            Self::Sqlite => format!("in ({})", self.id_list(placeholder)),
            Self::Postgres => format!("= any(array({}))", self.id_list(placeholder)),
        }
    }
}

/// Where the relational data lives, as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseTarget {
    /// A SQLite file (created if missing).
    SqliteFile(PathBuf),
    /// A `sqlite:` or `postgres://` URL.
    Url(String),
}

/// A SQLite file: a pool for reads and the group commit every write of this
/// process goes through.
#[derive(Clone, Debug)]
pub struct SqliteDb {
    pool: SqlitePool,
    group: Arc<GroupCommit>,
}

impl SqliteDb {
    /// The read pool (and the pool of other tools sharing the file).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The file's shared writer.
    pub(crate) fn group(&self) -> &Arc<GroupCommit> {
        &self.group
    }
}

/// A connection pool to one of the two backends.
#[derive(Clone, Debug)]
pub enum Database {
    /// The embedded profile.
    Sqlite(SqliteDb),
    /// The distributed profile.
    Postgres(PgPool),
}

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
        let _lock = lock_sqlite_file(options.get_filename()).await?;
        let options = options
            .create_if_missing(true)
            // A new file gives the pages of purged rows back to the file
            // system a step at a time (`Store::reclaim_space`); on a file
            // that already has tables the setting waits for a `VACUUM`.
            .auto_vacuum(SqliteAutoVacuum::Incremental)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: a commit acknowledged to a client is on disk even after a power
            // loss, not only after a process crash (which NORMAL already covers).
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(SQLITE_BUSY_TIMEOUT)
            // Savepoint journals (every group-commit writer has a savepoint)
            // and temporary tables stay in memory instead of temporary files:
            // they matter only until their transaction ends, never for recovery.
            .pragma("temp_store", "memory")
            // The commit that takes the log past this many pages copies
            // them into the file and syncs it before it returns, holding
            // the writer: see WAL_AUTOCHECKPOINT_PAGES.
            .pragma("wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES.to_string());
        // One connection becomes the group-commit writer; the rest read.
        let pool = SqlitePoolOptions::new()
            .max_connections(settings.max_connections.max(2))
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        let group = GroupCommit::start(&pool).await?;
        Ok(Self::Sqlite(SqliteDb { pool, group }))
    }

    /// Applies every pending migration of this backend. Safe to run from several
    /// processes at once: sqlx takes a database lock while migrating.
    pub async fn migrate(&self) -> Result<()> {
        match self {
            Self::Sqlite(sqlite) => {
                let mut migrator = sqlx::migrate!("../migrations/sqlite");
                migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
                let _lock = lock_for_migrations(sqlite.pool()).await?;
                migrator.run(sqlite.pool()).await?;
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

    /// Where bookkeeping writes go (idempotency records), whose commits need
    /// not reach the disk before returning: on SQLite the same file and group
    /// commit (`bookkeeping_transaction!` does not wait for the batch); on
    /// PostgreSQL a second pool whose sessions run with `synchronous_commit = off`.
    pub async fn bookkeeping_twin(&self) -> Result<Self> {
        match self {
            Self::Sqlite(sqlite) => Ok(Self::Sqlite(sqlite.clone())),
            Self::Postgres(pool) => {
                let options = (*pool.connect_options())
                    .clone()
                    .options([("synchronous_commit", "off")]);
                let twin = PgPoolOptions::new()
                    .max_connections(pool.options().get_max_connections().div_ceil(2).max(2))
                    .acquire_timeout(Duration::from_secs(10))
                    .connect_with(options)
                    .await?;
                Ok(Self::Postgres(twin))
            }
        }
    }

    /// Checks that the database answers a trivial query (readiness probes).
    pub async fn ping(&self) -> Result<()> {
        match self {
            Self::Sqlite(sqlite) => {
                sqlx::query("select 1").execute(sqlite.pool()).await?;
            }
            Self::Postgres(pool) => {
                sqlx::query("select 1").execute(pool).await?;
            }
        }
        Ok(())
    }

    /// Commits what is pending and closes every connection.
    pub async fn close(&self) {
        match self {
            Self::Sqlite(sqlite) => {
                sqlite.group.close().await;
                sqlite.pool.close().await;
            }
            Self::Postgres(pool) => pool.close().await,
        }
    }
}

/// (tests) A SQLite database of its own, in a temporary directory that is
/// removed when the returned guard drops; without migrations.
#[cfg(test)]
pub(crate) async fn scratch_sqlite() -> (Database, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Database::connect(
        &DatabaseTarget::SqliteFile(dir.path().join("scratch.sqlite3")),
        &PoolSettings::default(),
    )
    .await
    .expect("a scratch SQLite database");
    (db, dir)
}

#[cfg(test)]
mod tests {
    use super::{Database, WAL_AUTOCHECKPOINT_PAGES, scratch_sqlite};
    use crate::db::in_transaction;

    /// The group commit's writer, which runs the checkpoints, checkpoints
    /// the log only past [`WAL_AUTOCHECKPOINT_PAGES`] (the pool's other
    /// connections are checked with the rest of their settings in the
    /// integration test `sqlite_connections_use_wal_foreign_keys_and_a_busy_timeout`).
    #[tokio::test]
    async fn the_writer_checkpoints_a_long_log_only() {
        let (db, _dir) = scratch_sqlite().await;
        assert_eq!(
            writers_setting(&db).await.unwrap(),
            i64::from(WAL_AUTOCHECKPOINT_PAGES)
        );
    }

    /// The setting as the group commit's writer connection has it.
    async fn writers_setting(db: &Database) -> crate::Result<i64> {
        let pages = in_transaction!(db, |tx| {
            sqlx::query_scalar::<_, i64>("pragma wal_autocheckpoint")
                .fetch_one(&mut *tx)
                .await?
        });
        Ok(pages)
    }
}
