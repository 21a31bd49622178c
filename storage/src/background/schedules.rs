//! What the job platform keeps about its own operation: claims of scheduled
//! ticks (so a tick fired by several schedulers runs once) and the queues an
//! operator paused.

use std::collections::BTreeSet;

use crate::db::{in_transaction, on_pool, write_on_pool};
use crate::{Result, Store, Timestamp};

/// Schedule and queue-control repository; see [`Store::schedules`].
pub struct Schedules<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Scheduled-tick claims and paused queues.
    pub fn schedules(&self) -> Schedules<'_> {
        Schedules { store: self }
    }
}

impl Schedules<'_> {
    /// Claims the tick of `job_kind` scheduled at `tick_at` for `claimant`.
    /// True for exactly one claimant per tick, however many schedulers fire it.
    pub async fn claim_tick(
        &self,
        job_kind: &str,
        tick_at: Timestamp,
        claimant: &str,
    ) -> Result<bool> {
        let now = self.store.clock().now();
        let inserted = in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "insert into cron_ticks (job_kind, tick_at, claimed_by, claimed_at) values ($1, $2, $3, $4)
                 on conflict (job_kind, tick_at) do nothing",
            )
            .bind(job_kind)
            .bind(tick_at)
            .bind(claimant)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        });
        Ok(inserted == 1)
    }

    /// Forgets claims of ticks before `before`.
    pub async fn purge_ticks(&self, before: Timestamp) -> Result<u64> {
        let deleted = write_on_pool!(self.store.db(), pool => {
            sqlx::query("delete from cron_ticks where tick_at < $1")
                .bind(before)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(deleted)
    }

    /// Pauses or resumes a queue for every worker process.
    pub async fn set_paused(&self, queue: &str, paused: bool) -> Result<()> {
        let now = self.store.clock().now();
        write_on_pool!(self.store.db(), pool => {
            sqlx::query(
                "insert into queue_controls (queue, paused, changed_at) values ($1, $2, $3)
                 on conflict (queue) do update set paused = excluded.paused, changed_at = excluded.changed_at",
            )
            .bind(queue)
            .bind(paused)
            .bind(now)
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// The queues currently paused.
    pub async fn paused_queues(&self) -> Result<BTreeSet<String>> {
        let rows: Vec<(String,)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as("select queue from queue_controls where paused")
                .fetch_all(pool)
                .await?
        });
        Ok(rows.into_iter().map(|(queue,)| queue).collect())
    }
}
