//! Attempts: recording one and moving its delivery and endpoint on (retry,
//! fail, auto-disable and notify), and giving a delivery up.

use super::Webhooks;
use super::delivery_record::{
    AfterAttempt, Attempt, AttemptRecorded, Delivery, DeliveryKind, DeliveryStatus, DueAttempt,
};
use super::endpoint_record::{AUTO_DISABLE_AFTER, AUTO_DISABLED_REASON};
use super::health::{HealthSubject, RECOVERED_AFTER, WARN_AFTER};
use crate::Result;
use crate::db::in_transaction;
use crate::ids::UserId;
use crate::ids::{DeliveryId, NotificationId, WebhookEndpointId};
use crate::outbox::insert_event;
use crate::{Environment, Tenant};

impl Webhooks<'_> {
    /// Records attempt number `attempt.attempt` of a delivery and moves the
    /// delivery and its endpoint on, in one transaction. An attempt recorded
    /// before (a job that ran twice) changes nothing. A delivery failing for
    /// good raises the endpoint's failure count; at [`AUTO_DISABLE_AFTER`] the
    /// endpoint is disabled and its agency's owner notified. A success resets
    /// the count.
    pub async fn record_attempt(
        &self,
        delivery: &Delivery,
        attempt: &Attempt,
        after: AfterAttempt,
    ) -> Result<AttemptRecorded> {
        let now = self.store.clock().now();
        let (status, next_at, completed_at) = match after {
            AfterAttempt::Succeeded => (DeliveryStatus::Succeeded, None, Some(now)),
            AfterAttempt::RetryAt(at) => (DeliveryStatus::Retrying, Some(at), None),
            AfterAttempt::Failed => (DeliveryStatus::Failed, None, Some(now)),
        };
        let mut emitted = Vec::new();
        let result = in_transaction!(self.store.db(), |tx| {
            let inserted = sqlx::query(
                "insert into webhook_attempts (delivery_id, attempt, endpoint_id, nonce, started_at,
                     duration_ms, outcome, status_code, response_excerpt, error)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                 on conflict do nothing",
            )
            .bind(&delivery.id)
            .bind(attempt.attempt)
            .bind(&delivery.endpoint_id)
            .bind(&attempt.nonce)
            .bind(attempt.started_at)
            .bind(attempt.duration_ms)
            .bind(&attempt.outcome)
            .bind(attempt.status_code)
            .bind(&attempt.response_excerpt)
            .bind(&attempt.error)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                AttemptRecorded {
                    recorded: false,
                    consecutive_failures: 0,
                    disabled_endpoint: false,
                    notification_id: None,
                    next_in_order: None,
                }
            } else {
                let order_key: Option<Option<String>> = sqlx::query_scalar(
                    "update webhook_deliveries set status = $2, attempts = $3, next_attempt_at = $4,
                         completed_at = $5, held_until = null
                     where id = $1
                     returning order_key",
                )
                .bind(&delivery.id)
                .bind(status.as_str())
                .bind(attempt.attempt)
                .bind(next_at)
                .bind(completed_at)
                .fetch_optional(&mut *tx)
                .await?;
                // Replays and test fires are an owner's probes: they do not
                // move the endpoint's health.
                let counts = delivery.kind == DeliveryKind::Event;
                let mut notification_id = None;
                let (failures, disabled) = match after {
                    AfterAttempt::Succeeded if counts => {
                        // Most successes follow successes: only a streak
                        // to end is read (and then reset).
                        let streak: Option<(i32, String, Option<String>, bool)> = sqlx::query_as(
                            "select unrecovered_failures, url, name, is_sandbox from webhook_endpoints
                             where id = $1 and deleted_at is null
                               and (consecutive_failures <> 0 or unrecovered_failures <> 0)",
                        )
                        .bind(&delivery.endpoint_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                        if let Some((streak, url, name, is_sandbox)) = streak {
                            // Only the success that ends the streak reports it.
                            let ended = sqlx::query(
                                "update webhook_endpoints set consecutive_failures = 0,
                                     unrecovered_failures = 0
                                 where id = $1 and unrecovered_failures = $2",
                            )
                            .bind(&delivery.endpoint_id)
                            .bind(streak)
                            .execute(&mut *tx)
                            .await?
                            .rows_affected();
                            if ended == 1 && streak >= RECOVERED_AFTER {
                                let subject = HealthSubject {
                                    endpoint_id: &delivery.endpoint_id,
                                    url: &url,
                                    name: name.as_deref(),
                                };
                                let tenant = Tenant::new(
                                    delivery.agency_id.clone(),
                                    Environment::from_sandbox_flag(is_sandbox),
                                );
                                emitted.push(
                                    insert_event(
                                        &mut *tx,
                                        &tenant,
                                        now,
                                        subject.recovered(streak, now),
                                    )
                                    .await?,
                                );
                            }
                        }
                        (0, false)
                    }
                    AfterAttempt::Failed if counts => {
                        let counted: Option<(i32, String, String, Option<String>, bool)> = sqlx::query_as(
                            "update webhook_endpoints set consecutive_failures = consecutive_failures + 1,
                                 unrecovered_failures = unrecovered_failures + 1
                             where id = $1 and deleted_at is null
                             returning consecutive_failures, status, url, name, is_sandbox",
                        )
                        .bind(&delivery.endpoint_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                        // A deleted endpoint counts nothing and is disabled by nobody.
                        let (failures, status, url, name, is_sandbox) =
                            counted.unwrap_or((0, String::new(), String::new(), None, false));
                        let enabled = status == "enabled";
                        let disable = failures >= AUTO_DISABLE_AFTER && enabled;
                        let warn = failures == WARN_AFTER && enabled;
                        let subject = HealthSubject {
                            endpoint_id: &delivery.endpoint_id,
                            url: &url,
                            name: name.as_deref(),
                        };
                        if disable {
                            sqlx::query(
                                "update webhook_endpoints set status = 'disabled', disabled_reason = $2,
                                     disabled_at = $3, updated_at = $3
                                 where id = $1",
                            )
                            .bind(&delivery.endpoint_id)
                            .bind(AUTO_DISABLED_REASON)
                            .bind(now)
                            .execute(&mut *tx)
                            .await?;
                            let tenant = Tenant::new(
                                delivery.agency_id.clone(),
                                Environment::from_sandbox_flag(is_sandbox),
                            );
                            emitted.push(
                                insert_event(
                                    &mut *tx,
                                    &tenant,
                                    now,
                                    subject.disabled(failures, now),
                                )
                                .await?,
                            );
                        }
                        if disable || warn {
                            let owner: Option<UserId> = sqlx::query_scalar(
                                "select u.id from users u join agencies a on a.id = u.agency_id
                                 where u.agency_id = $1 and u.role = a.kind and u.is_active
                                 order by u.created_at, u.id limit 1",
                            )
                            .bind(&delivery.agency_id)
                            .fetch_optional(&mut *tx)
                            .await?;
                            let notice = if disable {
                                subject.disabled_notice(failures)
                            } else {
                                subject.failing_notice(failures)
                            };
                            let id = NotificationId::generate();
                            sqlx::query(
                                "insert into notifications (id, agency_id, user_id, kind, subject, body, created_at,
                                     is_sandbox)
                                 values ($1, $2, $3, $4, $5, $6, $7, $8)",
                            )
                            .bind(&id)
                            .bind(&delivery.agency_id)
                            .bind(owner)
                            .bind(notice.kind)
                            .bind(notice.subject)
                            .bind(notice.body)
                            .bind(now)
                            .bind(is_sandbox)
                            .execute(&mut *tx)
                            .await?;
                            notification_id = Some(id);
                        }
                        (failures, disable)
                    }
                    _ => (0, false),
                };
                // An ordered delivery that ended (succeeded, or failed for
                // good) wakes the next one of its listing waiting for it. The
                // endpoint's row is locked first, as the turn check locks it,
                // so a delivery deciding to wait and this one ending cannot
                // miss each other.
                let mut next_in_order = None;
                if matches!(after, AfterAttempt::Succeeded | AfterAttempt::Failed)
                    && let Some(order_key) = order_key.flatten()
                {
                    sqlx::query(
                        "update webhook_endpoints set updated_at = updated_at where id = $1",
                    )
                    .bind(&delivery.endpoint_id)
                    .execute(&mut *tx)
                    .await?;
                    let next: Option<(DeliveryId, WebhookEndpointId, i32)> = sqlx::query_as(
                        "update webhook_deliveries set waiting_for_order = false, next_attempt_at = $3
                         where id = (select id from webhook_deliveries
                             where endpoint_id = $1 and order_key = $2 and waiting_for_order
                               and status in ('pending', 'retrying')
                             order by event_seq limit 1)
                         returning id, endpoint_id, attempts + 1",
                    )
                    .bind(&delivery.endpoint_id)
                    .bind(&order_key)
                    .bind(now)
                    .fetch_optional(&mut *tx)
                    .await?;
                    next_in_order = next.map(|(delivery_id, endpoint_id, attempt)| DueAttempt {
                        delivery_id,
                        endpoint_id,
                        attempt,
                    });
                }
                AttemptRecorded {
                    recorded: true,
                    consecutive_failures: failures,
                    disabled_endpoint: disabled,
                    notification_id,
                    next_in_order,
                }
            }
        });
        self.store.announce(&emitted);
        Ok(result)
    }

    /// Gives up a delivery without an attempt (its endpoint was deleted or disabled).
    pub async fn abandon(&self, delivery_id: &DeliveryId) -> Result<bool> {
        let now = self.store.clock().now();
        let updated = in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "update webhook_deliveries set status = 'failed', next_attempt_at = null, completed_at = $2,
                     held_until = null
                 where id = $1 and status in ('pending', 'retrying')",
            )
            .bind(delivery_id)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        });
        Ok(updated == 1)
    }
}
