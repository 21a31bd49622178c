//! Cross-process locks on a SQLite file: processes starting together (an
//! API, a worker, an operator command) take turns opening and migrating it.

use sqlx::SqlitePool;

use crate::Result;

/// Serialises migrations of one SQLite file across processes (sqlx takes no
/// lock on SQLite).
pub async fn lock_for_migrations(pool: &SqlitePool) -> Result<Option<std::fs::File>> {
    lock_sqlite_file(pool.connect_options().get_filename()).await
}

/// An exclusive cross-process lock on `<file>.lock`, held until the returned
/// file is dropped: for opening a SQLite file (its first switch to WAL fails at
/// once, not after the busy timeout, when another process holds the file) and
/// for migrating it. An in-memory database needs none.
pub async fn lock_sqlite_file(filename: &std::path::Path) -> Result<Option<std::fs::File>> {
    if filename.as_os_str().is_empty() || filename.to_string_lossy().contains(":memory:") {
        return Ok(None);
    }
    let mut path = filename.as_os_str().to_owned();
    path.push(".lock");
    let locked = tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        file.lock()?;
        Ok::<_, std::io::Error>(file)
    })
    .await
    .map_err(|err| crate::StorageError::Corrupt(format!("migration lock task: {err}")))?
    .map_err(|err| crate::StorageError::Corrupt(format!("migration lock: {err}")))?;
    Ok(Some(locked))
}
