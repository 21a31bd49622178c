//! The progress of long-running operations (media processing, archives): the
//! latest state, kept so that a subscriber arriving late starts from it, and
//! every state published, so that a stream reconnecting with `Last-Event-ID`
//! resumes after the last one it saw. The live stream itself is the job
//! platform's (broadcast, Redis pub/sub).

use serde_json::Value;
use sqlx::types::Json;

use crate::db::{in_transaction, on_pool};
use crate::retention::PurgeBatch;
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

/// One published state of an operation, as its history keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgressStep {
    /// The state's number within its operation.
    pub seq: u64,
    /// The state as published, less the operation snapshot a media state
    /// carries (see [`Progress::record`]).
    pub step: Value,
    /// Whether it ended the operation.
    pub terminal: bool,
}

/// How far an operation's history goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgressEnding {
    /// The number of the state that ended it, if one was recorded.
    pub terminal_seq: Option<u64>,
    /// The highest number recorded (0 when none was).
    pub highest_seq: u64,
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
    ///
    /// The state also joins the operation's history, once per `seq`, without
    /// its `operation` member: a snapshot of every file in every state would
    /// grow with the square of an upload's files.
    pub async fn record(
        &self,
        tenant: &Tenant,
        operation_id: &str,
        seq: u64,
        state: &Value,
        terminal: bool,
    ) -> Result<()> {
        let now = self.store.clock().now();
        let mut step = state.clone();
        if let Some(members) = step.as_object_mut() {
            members.remove("operation");
        }
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
            sqlx::query(
                "insert into operation_progress_events
                     (operation_id, seq, agency_id, is_sandbox, step, terminal, recorded_at)
                 values ($1, $2, $3, $4, $5, $6, $7)
                 on conflict (operation_id, seq) do nothing",
            )
            .bind(operation_id)
            .bind(i64::try_from(seq).unwrap_or(i64::MAX))
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(Json(&step))
            .bind(terminal)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// The operation's states numbered above `after`, in order of their
    /// numbers, if the operation is the tenant's; at most `limit`.
    pub async fn steps_after(
        &self,
        tenant: &Tenant,
        operation_id: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<ProgressStep>> {
        let rows: Vec<(i64, Json<Value>, bool)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select seq, step, terminal from operation_progress_events
                 where operation_id = $1 and agency_id = $2 and is_sandbox = $3 and seq > $4
                 order by seq limit $5",
            )
            .bind(operation_id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(i64::try_from(after).unwrap_or(i64::MAX))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(seq, step, terminal)| ProgressStep {
                seq: u64::try_from(seq).unwrap_or(0),
                step: step.0,
                terminal,
            })
            .collect())
    }

    /// The operation's terminal state and the highest number of any of its
    /// states, if the operation is the tenant's and has states.
    pub async fn ending(&self, tenant: &Tenant, operation_id: &str) -> Result<ProgressEnding> {
        let row: (Option<i64>, Option<i64>) = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select max(case when terminal then seq end), max(seq)
                 from operation_progress_events
                 where operation_id = $1 and agency_id = $2 and is_sandbox = $3",
            )
            .bind(operation_id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .fetch_one(pool)
            .await?
        });
        let number = |seq: Option<i64>| seq.and_then(|seq| u64::try_from(seq).ok());
        Ok(ProgressEnding {
            terminal_seq: number(row.0),
            highest_seq: number(row.1).unwrap_or(0),
        })
    }

    /// Deletes the history of states recorded before `before`, at most
    /// `limit` of them; the latest state of each operation stays.
    pub async fn purge_steps(&self, before: Timestamp, limit: u32) -> Result<PurgeBatch> {
        self.store
            .purge_before(PURGE_STEPS_SQL, before, limit)
            .await
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

/// One batch of the progress history's purge: states recorded before `$1`,
/// the oldest first, at most `$2`, found by their time's index.
pub(crate) const PURGE_STEPS_SQL: &str =
    "delete from operation_progress_events where (operation_id, seq) in (
         select operation_id, seq from operation_progress_events
         where recorded_at < $1 order by recorded_at limit $2)";
