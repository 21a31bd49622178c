//! An agency's webhook backlog in one environment: what its writes have
//! committed that no endpoint has heard yet. The API paces an agency's
//! writes by it (see `api::pacing`), so it is read often and counted only
//! up to the caller's limit.

use super::Webhooks;
use crate::db::on_pool;
use crate::{Result, Tenant};

/// The backlog counted up to `limit`: each part read through a partial index
/// of what is still owed (`events_undispatched_by_tenant`,
/// `webhook_deliveries_unattempted`), so its cost follows the backlog, not
/// the agency's history. The limit is written into the statement, not
/// bound: SQLite plans a `LIMIT` by its bound value, so a statement with a
/// bound limit is compiled anew on every run, here on every paced write.
fn backlog_sql(limit: u32) -> String {
    format!(
        "select
             (select count(*) from (
                 select 1 from events
                 where dispatched_at is null and agency_id = $1 and is_sandbox = $2
                   and exists (
                       select 1 from webhook_endpoints
                       where agency_id = $1 and status = 'enabled' and deleted_at is null)
                 limit {limit}) as undispatched)
           + (select count(*) from (
                 select 1 from webhook_deliveries
                 where status = 'pending' and attempts = 0
                   and agency_id = $1 and is_sandbox = $2 and next_attempt_at <= $3
                 limit {limit}) as unattempted)"
    )
}

impl Webhooks<'_> {
    /// How many of `tenant`'s events are not yet fanned out plus how many of
    /// its deliveries are due and not yet attempted, counting each part no
    /// further than `limit` (so the answer is at most twice it). Events wait
    /// for no receiver while the agency has no enabled endpoint, and are then
    /// not counted: an agency without webhooks has no backlog. Deliveries
    /// held back by an hourly budget or waiting their turn in order are due
    /// later and not counted; a delivery whose first attempt is in flight is.
    pub async fn delivery_backlog(&self, tenant: &Tenant, limit: u32) -> Result<u32> {
        let now = self.store.clock().now();
        let sandbox = tenant.environment.is_sandbox();
        let backlog: i64 = on_pool!(self.store.db(), pool => {
            sqlx::query_scalar(sqlx::AssertSqlSafe(backlog_sql(limit)))
            .bind(&tenant.agency_id)
            .bind(sandbox)
            .bind(now)
            .fetch_one(pool)
            .await?
        });
        Ok(u32::try_from(backlog).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::backlog_sql;
    use crate::db::{Database, scratch_sqlite};

    /// The backlog is read on every paced write: each part must be found
    /// through its partial index, never by walking the agency's events.
    #[tokio::test]
    async fn the_backlog_is_read_through_the_indexes_of_what_is_owed() {
        let (db, _dir) = scratch_sqlite().await;
        db.migrate().await.unwrap();
        let Database::Sqlite(sqlite) = &db else {
            unreachable!()
        };
        let plan: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(format!(
            "explain query plan {}",
            backlog_sql(100)
        )))
        .fetch_all(sqlite.pool())
        .await
        .unwrap()
        .iter()
        .map(|row| sqlx::Row::get::<String, _>(row, "detail"))
        .collect();
        let uses = |index: &str| plan.iter().any(|step| step.contains(index));
        assert!(
            uses("INDEX events_undispatched_by_tenant ("),
            "events not yet fanned out: {plan:?}"
        );
        assert!(
            uses("INDEX webhook_deliveries_unattempted ("),
            "deliveries not yet attempted: {plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.starts_with("SCAN events")
                || step.contains("USING INDEX events_by_tenant")),
            "the agency's history is walked: {plan:?}"
        );
    }
}
