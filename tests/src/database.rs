//! A fresh, empty database per test: a SQLite file in a temporary directory, or
//! a newly created PostgreSQL database on the shared test server.

use std::path::{Path, PathBuf};

use sqlx::Connection;
use storage::db::PoolSettings;
use storage::{Backend, Clock, Database, DatabaseTarget, MasterKey, Store};
use tempfile::TempDir;

use crate::services::postgres_admin_url;

/// A fresh database and the data directory that goes with it.
pub struct TestDatabase {
    /// Which backend.
    pub backend: Backend,
    /// Where the database is.
    pub target: DatabaseTarget,
    /// The URL to give processes as `DATABASE_URL` (`None` for SQLite: use `--data-dir`).
    pub database_url: Option<String>,
    /// The data directory (SQLite file, master key, local objects).
    pub data_dir: TempDir,
}

impl TestDatabase {
    /// Creates an empty database on `backend`.
    pub async fn create(backend: Backend) -> Self {
        let data_dir = tempfile::tempdir().expect("temporary data directory");
        match backend {
            Backend::Sqlite => Self {
                backend,
                target: DatabaseTarget::SqliteFile(data_dir.path().join(api::config::SQLITE_FILE)),
                database_url: None,
                data_dir,
            },
            Backend::Postgres => {
                let admin = postgres_admin_url();
                let name = format!("it_{}", ulid::Ulid::generate().to_string().to_lowercase());
                let mut conn = sqlx::PgConnection::connect(&admin)
                    .await
                    .unwrap_or_else(|err| panic!("connecting to test PostgreSQL: {err}"));
                sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
                    .execute(&mut conn)
                    .await
                    .expect("create test database");
                let _ = conn.close().await;
                let mut url = reqwest::Url::parse(&admin).expect("TEST_DATABASE_URL is a URL");
                url.set_path(&format!("/{name}"));
                Self {
                    backend,
                    target: DatabaseTarget::Url(url.to_string()),
                    database_url: Some(url.to_string()),
                    data_dir,
                }
            }
        }
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// The SQLite file, for tests that read the raw bytes.
    pub fn sqlite_file(&self) -> Option<PathBuf> {
        match &self.target {
            DatabaseTarget::SqliteFile(path) => Some(path.clone()),
            DatabaseTarget::Url(_) => None,
        }
    }

    /// Connects and migrates.
    pub async fn connect(&self) -> Database {
        let db = Database::connect(&self.target, &PoolSettings::default())
            .await
            .expect("connect to test database");
        db.migrate().await.expect("migrate test database");
        db
    }

    /// A store over this database with a fresh master key and `clock`.
    pub async fn store(&self, clock: Clock) -> Store {
        let key = MasterKey::load_or_create(&self.data_dir().join(api::config::MASTER_KEY_FILE))
            .expect("master key");
        Store::open(self.connect().await, &key, clock)
            .await
            .expect("open store")
    }
}
