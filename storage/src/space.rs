//! Giving the space of purged rows back. A SQLite file reuses the pages its
//! deletes free, so once retention holds it stops growing; a new file is
//! created with `auto_vacuum = incremental`, and after a purge the free
//! pages beyond a reserve (a quarter of the file, which the next day's rows
//! will fill again) are returned to the file system in steps, without the
//! whole-file rewrite of `VACUUM`. A file created before that setting keeps
//! reusing its free pages; `VACUUM` once (the service stopped) converts it.
//! PostgreSQL's autovacuum marks dead rows reusable on its own.

use crate::Result;
use crate::db::{Database, expendable_transaction};
use crate::store::Store;

/// Pages one step of the incremental vacuum frees at most (256 KiB of 4 KiB
/// pages): the writer is held for a step, a few milliseconds, not for the
/// whole reclaim. Steps of 4,096 pages run back to back kept a `POST
/// /listings` waiting 1.8 s after a purge of a million deliveries. A step
/// is a turn at the file's group commit like any write (an expendable one:
/// a step lost in a crash is taken again), so a create waits for at most
/// one step, never in SQLite's busy handler for a lock another connection
/// holds.
const PAGES_PER_STEP: i64 = 64;

/// A SQLite file's pages, before or after a reclaim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileSpace {
    /// Pages in the file.
    pub pages: i64,
    /// Of which free (reused by the next inserts).
    pub free_pages: i64,
    /// Whether the file returns free pages to the file system
    /// (`auto_vacuum = incremental`).
    pub incremental: bool,
}

impl Store {
    /// The SQLite file's pages; `None` on PostgreSQL.
    pub async fn file_space(&self) -> Result<Option<FileSpace>> {
        let Database::Sqlite(sqlite) = self.db() else {
            return Ok(None);
        };
        let pool = sqlite.pool();
        let pages: i64 = sqlx::query_scalar("pragma page_count")
            .fetch_one(pool)
            .await?;
        let free_pages: i64 = sqlx::query_scalar("pragma freelist_count")
            .fetch_one(pool)
            .await?;
        let auto_vacuum: i64 = sqlx::query_scalar("pragma auto_vacuum")
            .fetch_one(pool)
            .await?;
        Ok(Some(FileSpace {
            pages,
            free_pages,
            incremental: auto_vacuum == 2,
        }))
    }

    /// After a purge: returns the SQLite file's free pages beyond a quarter
    /// of the file to the file system, a step at a time. Nothing to do on
    /// PostgreSQL or on a file without incremental vacuum.
    pub async fn reclaim_space(&self) -> Result<Option<FileSpace>> {
        let Database::Sqlite(_) = self.db() else {
            return Ok(None);
        };
        let mut freed_before: Option<i64> = None;
        loop {
            let Some(space) = self.file_space().await? else {
                return Ok(None);
            };
            let reserve = space.pages / 4;
            let excess = space.free_pages - reserve;
            // A step that freed nothing (another connection's read kept the
            // pages) ends the reclaim; the next purge tries again.
            let stuck = freed_before.is_some_and(|before| space.free_pages >= before);
            if !space.incremental || excess <= 0 || stuck {
                return Ok(Some(space));
            }
            freed_before = Some(space.free_pages);
            let step = excess.min(PAGES_PER_STEP);
            let held = expendable_transaction!(self.db(), |tx| {
                let started = std::time::Instant::now();
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "pragma incremental_vacuum({step})"
                )))
                .execute(&mut *tx)
                .await?;
                started.elapsed()
            });
            // Then the writer is left alone a while, as between a purge's
            // batches: the writes waiting for it go before the next step.
            tokio::time::sleep(held * crate::retention::REST_PER_HELD).await;
        }
    }
}
