//! What the queue's SQLite tests share: an in-memory file with apalis's
//! schema, and a statement run as a test runs it.

use apalis_sqlite::SqliteStorage;
use sqlx::SqlitePool;
use sqlx::sqlite::SqlitePoolOptions;

/// One connection to an in-memory database with apalis-sqlite's schema.
pub(super) async fn memory_queue() -> SqlitePool {
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect("sqlite::memory:")
        .await
        .unwrap();
    SqliteStorage::<()>::migrations().run(&pool).await.unwrap();
    pool
}

/// Runs `sql`, which must succeed.
pub(super) async fn run(pool: &SqlitePool, sql: &str) {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(pool)
        .await
        .unwrap();
}
