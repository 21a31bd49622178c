//! Ordered endpoints: on an endpoint with ordering `listing`, deliveries of
//! events about the same listing are made in commit order. Before its
//! attempt a delivery takes its turn here: while an earlier delivery of its
//! listing to the endpoint is pending or retrying, it waits (no attempt, its
//! job done) until that one ends and wakes it ([`Webhooks::record_attempt`]
//! returns the delivery to wake). An earlier delivery that fails for good
//! wakes the next just the same. Deliveries of other listings never wait.

use super::Webhooks;
use crate::db::in_transaction;
use crate::ids::{DeliveryId, WebhookEndpointId};
use crate::{Result, Timestamp};

/// How long after its blocker's next attempt a waiting delivery is offered
/// again by the overdue sweep, should its wake-up be lost.
const WAKE_SLACK_SECONDS: i64 = 60;

impl Webhooks<'_> {
    /// Whether `delivery_id` (of `endpoint_id`, ordered by `order_key`, its
    /// event at `event_seq`) must wait for an earlier delivery of its
    /// listing; if so it is marked waiting. The endpoint's row is locked
    /// first, as an ending delivery locks it before waking the next, so the
    /// two cannot pass each other.
    pub async fn wait_for_turn(
        &self,
        endpoint_id: &WebhookEndpointId,
        delivery_id: &DeliveryId,
        order_key: &str,
        event_seq: i64,
    ) -> Result<bool> {
        let now = self.store.clock().now();
        let waits = in_transaction!(self.store.db(), |tx| {
            sqlx::query("update webhook_endpoints set updated_at = updated_at where id = $1")
                .bind(endpoint_id)
                .execute(&mut *tx)
                .await?;
            let blocker: Option<Option<Timestamp>> = sqlx::query_scalar(
                "select next_attempt_at from webhook_deliveries
                 where endpoint_id = $1 and order_key = $2 and kind = 'event'
                   and event_seq < $3 and status in ('pending', 'retrying')
                 order by event_seq limit 1",
            )
            .bind(endpoint_id)
            .bind(order_key)
            .bind(event_seq)
            .fetch_optional(&mut *tx)
            .await?;
            match blocker {
                None => {
                    sqlx::query(
                        "update webhook_deliveries set waiting_for_order = false
                         where id = $1 and waiting_for_order",
                    )
                    .bind(delivery_id)
                    .execute(&mut *tx)
                    .await?;
                    false
                }
                Some(blocker_due) => {
                    let due = blocker_due.filter(|due| *due > now).unwrap_or(now);
                    sqlx::query(
                        "update webhook_deliveries set waiting_for_order = true, next_attempt_at = $2
                         where id = $1 and status in ('pending', 'retrying')",
                    )
                    .bind(delivery_id)
                    .bind(due.plus_seconds(WAKE_SLACK_SECONDS))
                    .execute(&mut *tx)
                    .await?;
                    true
                }
            }
        });
        Ok(waits)
    }
}
