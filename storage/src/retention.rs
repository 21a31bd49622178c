//! What one batch of a retention purge did, for the task that paces them.

use std::time::{Duration, Instant};

use crate::db::expendable_transaction;
use crate::{Result, Store, Timestamp};

/// How many times as long as a purge batch (or a reclaim step) held the
/// writer the purge then leaves it alone: it holds the writer a seventh of
/// the time. A purge's cost to the creates beside it is less its turns at
/// the writer than the pages its deletes give the disk to write, which the
/// creates' syncs then wait for: resting as long as a batch held (half the
/// time) purged 7,100–9,200 deliveries a second and doubled the creates'
/// median; six times as long, 2,700–4,300 a second with the median
/// 1.16–1.31× (`bench purge`, BENCHMARKS.md, `docs/decisions.md`).
pub const REST_PER_HELD: u32 = 6;

/// One purge transaction: the rows it deleted and how long it held the
/// database's writer (its statements, not its wait for a turn nor its
/// commit). A purge sizes and spaces its batches by `held`: measured from
/// the call, a batch queued behind a create would count the create's sync
/// as its own and shrink to nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PurgeBatch {
    /// Rows deleted.
    pub rows: u64,
    /// Time the batch's statements held the writer.
    pub held: Duration,
}

impl Store {
    /// One batch of a purge that is one statement: `sql` deletes the rows
    /// kept by a time before `$1` (or at it), the oldest first, at most `$2`; an
    /// expendable write on the bookkeeping database.
    pub(crate) async fn purge_before(
        &self,
        sql: &'static str,
        before: Timestamp,
        limit: u32,
    ) -> Result<PurgeBatch> {
        let batch = expendable_transaction!(self.bookkeeping(), |tx| {
            let started = Instant::now();
            let deleted = sqlx::query(sql)
                .bind(before)
                .bind(i64::from(limit))
                .execute(&mut *tx)
                .await?
                .rows_affected();
            PurgeBatch::since(started, deleted)
        });
        Ok(batch)
    }
}

impl PurgeBatch {
    /// The batch of `rows` whose statements started at `started`.
    pub(crate) fn since(started: Instant, rows: u64) -> Self {
        Self {
            rows,
            held: started.elapsed(),
        }
    }
}
