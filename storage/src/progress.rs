//! The latest progress state of long-running operations (media processing,
//! archives), kept so that a subscriber arriving late starts from it. The
//! live stream itself is the job platform's (broadcast, Redis pub/sub).

use serde_json::Value;
use sqlx::types::Json;

use crate::db::{in_transaction, on_pool};
use crate::{Result, Store, Tenant, Timestamp};

/// The latest state of an operation.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgressRecord {
    /// The operation.
    pub operation_id: String,
    /// Its latest state, as published.
    pub state: Value,
    /// When it was published.
    pub updated_at: Timestamp,
}

/// Progress repository; see [`Store::progress`].
pub struct Progress<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// The latest progress of long-running operations.
    pub fn progress(&self) -> Progress<'_> {
        Progress { store: self }
    }
}

impl Progress<'_> {
    /// Replaces the operation's latest state; committed when this returns, so a
    /// subscriber arriving next reads it.
    /// A state with a lower `seq` than the one stored (a slower publisher of
    /// the same operation) leaves the stored one in place, except a `terminal`
    /// one (the operation finished), which always replaces it and is never
    /// replaced: a late subscriber must learn that the operation is over.
    pub async fn record(
        &self,
        tenant: &Tenant,
        operation_id: &str,
        seq: u64,
        state: &Value,
        terminal: bool,
    ) -> Result<()> {
        let now = self.store.clock().now();
        // The column orders states; the state itself carries its published
        // `seq`. A terminal state is stored above every number, so the guard
        // below lets nothing replace it.
        let order = if terminal {
            i64::MAX
        } else {
            i64::try_from(seq).unwrap_or(i64::MAX - 1).min(i64::MAX - 1)
        };
        in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "insert into operation_progress (operation_id, agency_id, is_sandbox, state, updated_at, seq)
                 values ($1, $2, $3, $4, $5, $6)
                 on conflict (operation_id) do update
                 set state = excluded.state, updated_at = excluded.updated_at, seq = excluded.seq
                 where operation_progress.agency_id = excluded.agency_id
                   and operation_progress.seq < excluded.seq",
            )
            .bind(operation_id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(Json(state))
            .bind(now)
            .bind(order)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// The operation's latest state, if it is the tenant's.
    pub async fn latest(
        &self,
        tenant: &Tenant,
        operation_id: &str,
    ) -> Result<Option<ProgressRecord>> {
        let row: Option<(String, Json<Value>, Timestamp)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select operation_id, state, updated_at from operation_progress
                 where operation_id = $1 and agency_id = $2 and is_sandbox = $3",
            )
            .bind(operation_id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|(operation_id, state, updated_at)| ProgressRecord {
            operation_id,
            state: state.0,
            updated_at,
        }))
    }
}
