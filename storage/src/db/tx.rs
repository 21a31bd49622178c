//! `Tx`: a write transaction lent to another repository's function, so that
//! writes of several repositories commit together (a listing and its order, a
//! change and its outbox events).

use sqlx::{PgConnection, SqliteConnection};

/// A connection inside an open write transaction, on either backend.
///
/// An `in_transaction!` body lends its transaction with `&mut *tx` (which
/// converts into a `Tx`); the function receiving it runs its statements with
/// [`on_tx!`], whose body is compiled once per backend like the body that
/// lent it. Nothing commits or rolls back here: the lender's transaction does.
pub(crate) enum Tx<'c> {
    /// The SQLite file's group-commit writer, inside the caller's savepoint.
    Sqlite(&'c mut SqliteConnection),
    /// A PostgreSQL connection inside the caller's transaction.
    Postgres(&'c mut PgConnection),
}

impl<'c> From<&'c mut SqliteConnection> for Tx<'c> {
    fn from(connection: &'c mut SqliteConnection) -> Self {
        Self::Sqlite(connection)
    }
}

impl<'c> From<&'c mut PgConnection> for Tx<'c> {
    fn from(connection: &'c mut PgConnection) -> Self {
        Self::Postgres(connection)
    }
}

/// Runs `$body` with `$conn` bound to the backend's connection of `$tx` (a
/// [`Tx`] taken by value); the body is compiled once per backend and runs its
/// statements on `&mut *$conn`.
macro_rules! on_tx {
    ($tx:expr, $conn:ident => $body:expr) => {
        match $tx {
            $crate::db::Tx::Sqlite($conn) => $body,
            $crate::db::Tx::Postgres($conn) => $body,
        }
    };
}
pub(crate) use on_tx;
