//! The per-backend macros every repository body is written with: a body is
//! compiled once for SQLite and once for PostgreSQL, bound to that backend's
//! pool (reads) or to a connection inside a write transaction.

/// Runs `$body` with `$pool` bound to the backend's pool, for reads; the body
/// is compiled once per backend.
macro_rules! on_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            $crate::db::Database::Sqlite(sqlite) => {
                let $pool = sqlite.pool();
                $body
            }
            $crate::db::Database::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

/// Runs a writing `$body` once per backend with `$tx` bound to a connection in
/// a transaction. The body may leave early with `?` or `return Err(..)`: its
/// writes are then undone. With `durable`, the call returns after the commit
/// reached the disk; `bookkeeping` writes may return before; `expendable`
/// writes return after a commit that need not reach the disk.
macro_rules! write_unit {
    ($db:expr, $durability:ident, |$tx:ident| $body:block) => {
        match $db {
            $crate::db::Database::Sqlite(sqlite) => {
                let mut slot = sqlite
                    .group()
                    .enter($crate::db::write_unit!(@sync $durability))
                    .await?;
                let result: $crate::Result<_> = async {
                    let $tx = slot.connection();
                    Ok($body)
                }
                .await;
                let batch = slot.finish(result.is_ok()).await?;
                let output = result?;
                $crate::db::write_unit!(@sqlite $durability, sqlite, batch, output)
            }
            $crate::db::Database::Postgres(pool) => {
                let mut $tx = pool.begin().await?;
                let result: $crate::Result<_> = async { Ok($body) }.await;
                let output = result?;
                $tx.commit().await?;
                $crate::db::write_unit!(@postgres $durability, output)
            }
        }
    };
    (@sync expendable) => {
        $crate::db::CommitSync::Relaxed
    };
    (@sync $durability:ident) => {
        $crate::db::CommitSync::Full
    };
    (@sqlite expendable, $sqlite:ident, $batch:ident, $output:ident) => {
        // Waits for its commit as a durable write does: that commit just
        // does not sync.
        $crate::db::write_unit!(@sqlite durable, $sqlite, $batch, $output)
    };
    (@sqlite durable, $sqlite:ident, $batch:ident, $output:ident) => {{
        $sqlite.group().committed($batch).await?;
        $output
    }};
    (@sqlite bookkeeping, $sqlite:ident, $batch:ident, $output:ident) => {{
        let _ = $batch;
        $output
    }};
    (@sqlite deferred, $sqlite:ident, $batch:ident, $output:ident) => {
        ($output, $crate::db::Commit::pending($sqlite.group(), $batch))
    };
    (@postgres deferred, $output:ident) => {
        ($output, $crate::db::Commit::done())
    };
    (@postgres $durability:ident, $output:ident) => {
        $output
    };
}
pub(crate) use write_unit;

/// A durable write transaction: returns after its commit reached the disk.
macro_rules! in_transaction {
    ($db:expr, |$tx:ident| $body:block) => {
        $crate::db::write_unit!($db, durable, |$tx| $body)
    };
}
pub(crate) use in_transaction;

/// One durable writing statement, `$pool` bound to where it runs.
macro_rules! write_on_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        $crate::db::write_unit!($db, durable, |$pool| {
            let $pool = &mut *$pool;
            $body
        })
    };
}
pub(crate) use write_on_pool;

/// A write a crash may undo without harm, because it is done again (a
/// retention purge's batch): returns once committed, without waiting for the
/// disk. On SQLite its batch commits with `synchronous = NORMAL` (see
/// `group_commit`), so writes queued behind it do not wait for a sync of it;
/// on PostgreSQL pass the store's bookkeeping database, whose sessions commit
/// with `synchronous_commit = off`.
macro_rules! expendable_transaction {
    ($db:expr, |$tx:ident| $body:block) => {
        $crate::db::write_unit!($db, expendable, |$tx| $body)
    };
}
pub(crate) use expendable_transaction;

/// A write whose caller goes on before its commit reached the disk: returns
/// `(output, Commit)`, and the caller awaits `Commit::durable` before it
/// tells anyone outside this process that the write happened. On SQLite the
/// write is visible at once on the group commit's connection (to later
/// writes of this process), to the read pool only after the commit; on
/// PostgreSQL the commit is done when the call returns.
macro_rules! deferred_transaction {
    ($db:expr, |$tx:ident| $body:block) => {
        $crate::db::write_unit!($db, deferred, |$tx| $body)
    };
}
pub(crate) use deferred_transaction;

/// A bookkeeping write (idempotency records): on SQLite part of the group
/// commit without waiting for it; on PostgreSQL a transaction on the
/// bookkeeping pool, whose sessions commit asynchronously.
macro_rules! bookkeeping_transaction {
    ($db:expr, |$tx:ident| $body:block) => {
        $crate::db::write_unit!($db, bookkeeping, |$tx| $body)
    };
}
pub(crate) use bookkeeping_transaction;
