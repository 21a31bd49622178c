//! The database: SQLite (embedded profile) or PostgreSQL (distributed
//! profile) behind one type (`database`), with connection settings and
//! migrations.
//!
//! Repositories share one SQL text between the backends (both accept `$n`
//! placeholders, `on conflict` and `returning`); the macros of `writes`
//! compile a repository body once per backend. Reads use the pool; every write
//! goes through `in_transaction!` (durable), `write_on_pool!` (one durable
//! statement), `bookkeeping_transaction!` (need not wait for the disk),
//! `expendable_transaction!` (a purge: its commit need not reach the disk) or
//! `deferred_transaction!` (waits for the disk later, through a [`Commit`]). On
//! SQLite all five go through the file's group commit (`group_commit`). A
//! repository function that writes as part of another's transaction takes a
//! [`Tx`].

mod database;
mod group_commit;
mod lock;
mod tx;
mod writes;

#[cfg(test)]
pub(crate) use database::scratch_sqlite;
pub use database::{
    Backend, Database, DatabaseTarget, PoolSettings, SqliteDb, WAL_AUTOCHECKPOINT_PAGES,
};
pub use group_commit::Commit;
pub(crate) use group_commit::CommitSync;
pub use lock::{lock_for_migrations, lock_sqlite_file};
pub(crate) use tx::Tx;
pub(crate) use tx::on_tx;
pub(crate) use writes::{
    bookkeeping_transaction, deferred_transaction, expendable_transaction, in_transaction, on_pool,
    write_on_pool, write_unit,
};
