//! An endpoint's hourly delivery budget, spent evenly: GCRA over an hour, as
//! the API's per-minute budgets are. A fresh endpoint takes its whole budget
//! at once; after that one delivery every `3600 s / budget`. A delivery over
//! the budget is not refused but held back to the slot it reserves, so a
//! backlog drains one slot at a time instead of all at once an hour later.
//! What is held back is counted on the endpoint and released when the
//! budget changes.

use super::Webhooks;
use super::endpoint_record::HeldBack;
use crate::db::{in_transaction, on_pool};
use crate::ids::{AgencyId, DeliveryId, WebhookEndpointId};
use crate::{Environment, Result, Timestamp};

/// The window a budget is expressed over, in microseconds.
const HOUR_MICROS: i64 = 3_600_000_000;

/// Whether a delivery may be attempted now under its endpoint's budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetSlot {
    /// Now.
    Now,
    /// Held back: its slot is reserved for then.
    HeldUntil(Timestamp),
}

impl Webhooks<'_> {
    /// Spends one slot of `endpoint_id`'s budget on `delivery_id`'s next
    /// attempt. Within the budget the attempt goes now; over it the delivery
    /// is held back to the slot reserved for it (recorded on the delivery,
    /// with its next attempt time). An endpoint without a budget always
    /// goes now. Concurrent spenders each get their own slot: the update is
    /// one statement on the endpoint's row.
    pub async fn spend_budget(
        &self,
        endpoint_id: &WebhookEndpointId,
        delivery_id: &DeliveryId,
    ) -> Result<BudgetSlot> {
        let now = self.store.clock().now();
        let slot = in_transaction!(self.store.db(), |tx| {
            let tat: Option<Timestamp> = sqlx::query_scalar(
                "update webhook_endpoints set budget_tat =
                     case when budget_tat is not null and budget_tat > $2 then budget_tat else $2 end
                     + 3600000000 / hourly_budget
                 where id = $1 and hourly_budget is not null and hourly_budget > 0
                 returning budget_tat",
            )
            .bind(endpoint_id)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            match tat {
                None => BudgetSlot::Now,
                Some(tat) => {
                    let allowed_at = Timestamp::from_micros(tat.as_micros() - HOUR_MICROS);
                    if allowed_at <= now {
                        BudgetSlot::Now
                    } else {
                        sqlx::query(
                            "update webhook_deliveries set held_until = $2, next_attempt_at = $2
                             where id = $1 and status in ('pending', 'retrying')",
                        )
                        .bind(delivery_id)
                        .bind(allowed_at)
                        .execute(&mut *tx)
                        .await?;
                        BudgetSlot::HeldUntil(allowed_at)
                    }
                }
            }
        });
        Ok(slot)
    }

    /// What `endpoint_id`'s budget holds back now.
    pub async fn held_back(&self, endpoint_id: &WebhookEndpointId) -> Result<HeldBack> {
        let (count, next_release_at): (i64, Option<Timestamp>) = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select count(*), min(held_until) from webhook_deliveries
                 where endpoint_id = $1 and held_until is not null
                   and status in ('pending', 'retrying')",
            )
            .bind(endpoint_id)
            .fetch_one(pool)
            .await?
        });
        Ok(HeldBack {
            count,
            next_release_at,
        })
    }

    /// What the budgets of an agency's endpoints in one pool hold back,
    /// endpoint by endpoint (those holding nothing back are left out).
    pub async fn held_back_by_endpoint(
        &self,
        agency_id: &AgencyId,
        pool: Environment,
    ) -> Result<Vec<(WebhookEndpointId, HeldBack)>> {
        let rows: Vec<(WebhookEndpointId, i64, Option<Timestamp>)> = on_pool!(self.store.db(), db => {
            sqlx::query_as(
                "select d.endpoint_id, count(*), min(d.held_until) from webhook_deliveries d
                 join webhook_endpoints e on e.id = d.endpoint_id
                 where e.agency_id = $1 and e.is_sandbox = $2 and e.deleted_at is null
                   and d.held_until is not null and d.status in ('pending', 'retrying')
                 group by d.endpoint_id",
            )
            .bind(agency_id)
            .bind(pool.is_sandbox())
            .fetch_all(db)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(id, count, next_release_at)| {
                (
                    id,
                    HeldBack {
                        count,
                        next_release_at,
                    },
                )
            })
            .collect())
    }
}
