//! Keys that stopped working (revoked, or expired at the end of a rotation),
//! as every process learns of them, whichever process ended them: an API
//! replica, `api admin revoke-key`, or the worker expiring rotations.
//!
//! Processes cache authenticated keys; a key ended elsewhere must leave their
//! caches at once, not when the entry ages out. On PostgreSQL the
//! transaction that ends a key notifies [`ENDED_KEYS_CHANNEL`], which its
//! commit delivers to every listener. On SQLite, where processes share only
//! the file, a follower reads the file's `data_version` (which changes only
//! when another connection committed) and, when it changed, the key audit
//! log past the last row it read: a seek on its `seq`, since the log is only
//! ever appended to.

use std::time::Duration;

use sqlx::postgres::PgListener;

use super::repository::ApiKeys;
use crate::Result;
use crate::db::{Database, Tx};
use crate::ids::ApiKeyId;

/// The PostgreSQL channel an ended key's id is announced on.
pub const ENDED_KEYS_CHANNEL: &str = "listing_api_key_ended";

/// What a follower of ended keys hears.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyEnded {
    /// This key no longer authenticates.
    Key(ApiKeyId),
    /// The follow (re)started: keys may have ended unheard, so whatever was
    /// cached before should be looked up again.
    CatchUp,
}

/// Announces, inside the transaction that ends `key`, that it ended: on
/// PostgreSQL a notification its commit delivers (and its rollback drops);
/// on SQLite the audit row the same transaction writes is the announcement.
pub(crate) async fn announce(tx: Tx<'_>, key: &ApiKeyId) -> Result<()> {
    match tx {
        Tx::Sqlite(_) => Ok(()),
        Tx::Postgres(connection) => {
            sqlx::query("select pg_notify($1, $2)")
                .bind(ENDED_KEYS_CHANNEL)
                .bind(key.as_str())
                .execute(&mut *connection)
                .await?;
            Ok(())
        }
    }
}

impl ApiKeys<'_> {
    /// Calls `on_ended` with every key any process ends from now on, first
    /// with [`KeyEnded::CatchUp`] once following has begun. Returns when
    /// following stopped (a lost connection, as `Ok` or as the error that
    /// ended it); the caller follows again, and that follow's catch-up
    /// covers what ended in between. `poll` is how often SQLite's file is
    /// looked at.
    pub async fn follow_ended(
        &self,
        poll: Duration,
        mut on_ended: impl FnMut(KeyEnded),
    ) -> Result<()> {
        match self.store.db() {
            Database::Postgres(pool) => {
                let mut listener = PgListener::connect_with(pool).await?;
                listener.listen(ENDED_KEYS_CHANNEL).await?;
                on_ended(KeyEnded::CatchUp);
                loop {
                    // `try_recv` says when the connection was lost (`None`);
                    // what was notified meanwhile is gone. Following ends, and
                    // the caller's next follow listens afresh, then catches up.
                    match listener.try_recv().await? {
                        Some(notification) => {
                            if let Some(key) = ApiKeyId::parse(notification.payload()) {
                                on_ended(KeyEnded::Key(key));
                            }
                        }
                        None => return Ok(()),
                    }
                }
            }
            Database::Sqlite(sqlite) => {
                // A connection of its own: `data_version` counts the commits
                // of every connection but the one asking.
                let mut connection = sqlite.pool().acquire().await?.detach();
                let mut read_up_to: i64 =
                    sqlx::query_scalar("select coalesce(max(seq), 0) from api_key_audit")
                        .fetch_one(&mut connection)
                        .await?;
                let mut version: i64 = sqlx::query_scalar("pragma data_version")
                    .fetch_one(&mut connection)
                    .await?;
                on_ended(KeyEnded::CatchUp);
                let mut ticks = tokio::time::interval(poll);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticks.tick().await;
                    let now: i64 = sqlx::query_scalar("pragma data_version")
                        .fetch_one(&mut connection)
                        .await?;
                    if now == version {
                        continue;
                    }
                    version = now;
                    let rows: Vec<(i64, String, String)> = sqlx::query_as(
                        "select seq, key_id, action from api_key_audit
                         where seq > $1 order by seq",
                    )
                    .bind(read_up_to)
                    .fetch_all(&mut connection)
                    .await?;
                    for (seq, key_id, action) in rows {
                        read_up_to = seq;
                        if matches!(action.as_str(), "revoked" | "expired")
                            && let Some(key) = ApiKeyId::parse(&key_id)
                        {
                            on_ended(KeyEnded::Key(key));
                        }
                    }
                }
            }
        }
    }
}
