//! The sweeps: deliveries whose attempt was due and never made, and the
//! purge of finished deliveries.

use super::Webhooks;
use super::delivery_record::DueAttempt;
use crate::db::{expendable_transaction, in_transaction, write_on_pool};
use crate::ids::{DeliveryId, WebhookEndpointId};
use crate::retention::PurgeBatch;
use crate::{Result, StorageError, Timestamp};

impl Webhooks<'_> {
    /// Deliveries whose next attempt was due before `before` but has not
    /// been made (a lost push, a dead job): `(delivery id, attempt number)`,
    /// oldest first. Their due time moves to `offered_again_at`, so a
    /// delivery the sweep just offered leaves the head of the line and is
    /// offered again only then. Replays and test fires left pending (their
    /// request went away mid-attempt) are failed.
    pub async fn sweep_overdue(
        &self,
        before: Timestamp,
        offered_again_at: Timestamp,
        limit: u32,
    ) -> Result<Vec<DueAttempt>> {
        let now = self.store.clock().now();
        let rows = in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "update webhook_deliveries set status = 'failed', next_attempt_at = null, completed_at = $2
                 where kind <> 'event' and status = 'pending' and created_at < $1",
            )
            .bind(before)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            let rows: Vec<(DeliveryId, WebhookEndpointId, i32)> = sqlx::query_as(
                "update webhook_deliveries set next_attempt_at = $2
                 where id in (
                     select id from webhook_deliveries
                     where status in ('pending', 'retrying') and next_attempt_at < $1
                       and kind = 'event'
                     order by next_attempt_at limit $3)
                 returning id, endpoint_id, attempts + 1",
            )
            .bind(before)
            .bind(offered_again_at)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
            rows
        });
        Ok(rows
            .into_iter()
            .map(|(delivery_id, endpoint_id, attempt)| DueAttempt {
                delivery_id,
                endpoint_id,
                attempt,
            })
            .collect())
    }

    /// Gives back attempts [`Self::sweep_overdue`] moved to
    /// `offered_again_at` but could not push (the queue was away): they are
    /// due at `due_at` again, so the next sweep offers them rather than the
    /// one after the resweep interval. An attempt made or rescheduled
    /// meanwhile is left alone. Returns how many were given back.
    pub async fn release_overdue(
        &self,
        attempts: &[DueAttempt],
        due_at: Timestamp,
        offered_again_at: Timestamp,
    ) -> Result<u64> {
        if attempts.is_empty() {
            return Ok(0);
        }
        let ids: Vec<&DeliveryId> = attempts.iter().map(|due| &due.delivery_id).collect();
        let ids = serde_json::to_string(&ids)
            .map_err(|err| StorageError::Corrupt(format!("delivery ids: {err}")))?;
        let sql = format!(
            "update webhook_deliveries set next_attempt_at = $1
             where id in ({}) and next_attempt_at = $2 and status in ('pending', 'retrying')",
            self.store.db().backend().id_list("$3")
        );
        let released = write_on_pool!(self.store.db(), pool => {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(due_at)
                .bind(offered_again_at)
                .bind(ids)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(released)
    }

    /// Deletes finished deliveries (and their attempts) completed before
    /// `before`, the oldest first, at most `limit` in one transaction;
    /// returns how many. The retention task calls it batch after batch.
    pub async fn purge_finished(&self, before: Timestamp, limit: u32) -> Result<PurgeBatch> {
        // Attempts go with their delivery (on delete cascade); each
        // endpoint's total loses what it lost, in the same transaction. A
        // batch lost in a crash is simply purged again.
        let batch = expendable_transaction!(self.store.bookkeeping(), |tx| {
            let started = std::time::Instant::now();
            let endpoints: Vec<WebhookEndpointId> = sqlx::query_scalar(PURGE_FINISHED_SQL)
                .bind(before)
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await?;
            super::delivery_counts::count(
                (&mut *tx).into(),
                endpoints.iter().map(|endpoint| (endpoint, -1)),
            )
            .await?;
            PurgeBatch::since(started, endpoints.len() as u64)
        });
        Ok(batch)
    }
}

/// One batch of the retention purge: the oldest finished deliveries before
/// `$1`, at most `$2`, found by their completion's index.
pub(crate) const PURGE_FINISHED_SQL: &str = "delete from webhook_deliveries where id in (
     select id from webhook_deliveries where completed_at < $1 order by completed_at limit $2)
     returning endpoint_id";
