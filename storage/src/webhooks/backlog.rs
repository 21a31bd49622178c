//! An agency's webhook backlog in one environment: what its writes have
//! committed that no endpoint has heard yet. The API paces an agency's
//! writes by it (see `api::pacing`), so it is read often and counted only
//! up to the caller's limit.

use super::Webhooks;
use crate::db::on_pool;
use crate::{Result, Tenant};

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
        let limit = i64::from(limit);
        let backlog: i64 = on_pool!(self.store.db(), pool => {
            sqlx::query_scalar(
                "select
                     (select count(*) from (
                         select 1 from events
                         where dispatched_at is null and agency_id = $1 and is_sandbox = $2
                           and exists (
                               select 1 from webhook_endpoints
                               where agency_id = $1 and status = 'enabled' and deleted_at is null)
                         limit $4) as undispatched)
                   + (select count(*) from (
                         select 1 from webhook_deliveries
                         where status = 'pending' and attempts = 0
                           and agency_id = $1 and is_sandbox = $2 and next_attempt_at <= $3
                         limit $4) as unattempted)",
            )
            .bind(&tenant.agency_id)
            .bind(sandbox)
            .bind(now)
            .bind(limit)
            .fetch_one(pool)
            .await?
        });
        Ok(u32::try_from(backlog).unwrap_or(u32::MAX))
    }
}
