//! Attempts: recording one and moving its delivery and endpoint on (retry,
//! fail, auto-disable and notify), and giving a delivery up.

use std::collections::{HashMap, HashSet};

use sqlx::QueryBuilder;

use super::Webhooks;
use super::delivery_record::{
    AfterAttempt, Attempt, AttemptRecorded, AttemptToRecord, Delivery, DueAttempt,
};
use super::endpoint_record::{AUTO_DISABLE_AFTER, AUTO_DISABLED_REASON};
use super::health::{HealthSubject, RECOVERED_AFTER, WARN_AFTER};
use crate::Result;
use crate::StorageError;
use crate::background::outbox::insert_event;
use crate::db::in_transaction;
use crate::ids::UserId;
use crate::ids::{DeliveryId, NotificationId, WebhookEndpointId};

/// Attempts (and their deliveries) written by one statement: at most 10
/// values each, well under either database's limit on bound values.
const ROWS_PER_STATEMENT: usize = 256;

impl Webhooks<'_> {
    /// Records attempt number `attempt.attempt` of a delivery and moves the
    /// delivery and its endpoint on, in one transaction: [`Self::record_attempts`]
    /// of one.
    pub async fn record_attempt(
        &self,
        delivery: &Delivery,
        attempt: &Attempt,
        after: AfterAttempt,
    ) -> Result<AttemptRecorded> {
        let one = AttemptToRecord {
            delivery: delivery.clone(),
            attempt: attempt.clone(),
            after,
        };
        let mut recorded = self.record_attempts(std::slice::from_ref(&one)).await?;
        recorded
            .pop()
            .ok_or_else(|| StorageError::Corrupt("an attempt recorded nothing".to_owned()))
    }

    /// Records attempts of deliveries and moves each delivery and its
    /// endpoint on, all in one transaction; returns what each changed, in
    /// their order. An attempt recorded before (a job that ran twice)
    /// changes nothing. A delivery failing for good raises the endpoint's
    /// failure count: at [`WARN_AFTER`] its agency's owner is warned, at
    /// [`AUTO_DISABLE_AFTER`] the endpoint is disabled and the owner
    /// notified. A success resets the count. The attempts and their
    /// deliveries are written many to a statement, so concurrent deliveries
    /// recorded together cost a few round trips to the database, not a few
    /// each; what only some attempts need (a streak ended, a failure counted,
    /// the next ordered delivery woken) follows one by one.
    pub async fn record_attempts(
        &self,
        attempts: &[AttemptToRecord],
    ) -> Result<Vec<AttemptRecorded>> {
        if attempts.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.store.clock().now();
        let backend = self.store.db().backend();
        let streaks_sql = format!(
            "select id from webhook_endpoints
             where id in ({}) and deleted_at is null
               and (consecutive_failures <> 0 or unrecovered_failures <> 0)",
            backend.id_list("$1")
        );
        // Of the successes that count, the endpoints that may have a streak
        // to end.
        let mut success_endpoints: Vec<&str> = attempts
            .iter()
            .filter(|item| item.after == AfterAttempt::Succeeded && item.counts())
            .map(|item| item.delivery.endpoint_id.as_str())
            .collect();
        success_endpoints.sort_unstable();
        success_endpoints.dedup();
        let success_endpoints = serde_json::to_string(&success_endpoints)
            .map_err(|err| StorageError::Corrupt(format!("endpoint ids: {err}")))?;
        let mut emitted = Vec::new();
        let results = in_transaction!(self.store.db(), |tx| {
            let mut fresh: HashSet<(DeliveryId, i32)> = HashSet::with_capacity(attempts.len());
            for chunk in attempts.chunks(ROWS_PER_STATEMENT) {
                let mut insert = QueryBuilder::new(
                    "insert into webhook_attempts (delivery_id, attempt, endpoint_id, nonce, started_at,
                         duration_ms, outcome, status_code, response_excerpt, error) ",
                );
                insert.push_values(chunk, |mut row, item| {
                    let attempt = &item.attempt;
                    row.push_bind(&item.delivery.id)
                        .push_bind(attempt.attempt)
                        .push_bind(&item.delivery.endpoint_id)
                        .push_bind(&attempt.nonce)
                        .push_bind(attempt.started_at)
                        .push_bind(attempt.duration_ms)
                        .push_bind(&attempt.outcome)
                        .push_bind(attempt.status_code)
                        .push_bind(&attempt.response_excerpt)
                        .push_bind(&attempt.error);
                });
                insert.push(" on conflict do nothing returning delivery_id, attempt");
                let inserted: Vec<(DeliveryId, i32)> =
                    insert.build_query_as().fetch_all(&mut *tx).await?;
                fresh.extend(inserted);
            }
            // Each inserted attempt moves its delivery on once (the first of
            // the same attempt given twice).
            let moving: Vec<&AttemptToRecord> = attempts
                .iter()
                .filter(|item| fresh.remove(&(item.delivery.id.clone(), item.attempt.attempt)))
                .collect();
            let mut order_keys: HashMap<DeliveryId, Option<String>> =
                HashMap::with_capacity(moving.len());
            // A delivery attempted twice in one batch ends as its later
            // attempt leaves it, as if they were recorded one after the other.
            let mut last_of: HashMap<&DeliveryId, usize> = HashMap::with_capacity(moving.len());
            for (index, item) in moving.iter().enumerate() {
                last_of.insert(&item.delivery.id, index);
            }
            let updates: Vec<&AttemptToRecord> = moving
                .iter()
                .enumerate()
                .filter(|(index, item)| last_of.get(&item.delivery.id) == Some(index))
                .map(|(_, item)| *item)
                .collect();
            for chunk in updates.chunks(ROWS_PER_STATEMENT) {
                let mut update = QueryBuilder::new(
                    "update webhook_deliveries set status = v.column2, attempts = v.column3,
                         next_attempt_at = v.column4, completed_at = v.column5, held_until = null
                     from (",
                );
                update.push_values(chunk, |mut row, item| {
                    let (status, next_at, completed_at) = item.after.moves_to(now);
                    row.push_bind(&item.delivery.id)
                        .push_bind(status.as_str())
                        .push_bind(item.attempt.attempt)
                        .push_bind(next_at)
                        .push_bind(completed_at);
                });
                update.push(
                    ") as v where webhook_deliveries.id = v.column1
                     returning webhook_deliveries.id, webhook_deliveries.order_key",
                );
                let moved: Vec<(DeliveryId, Option<String>)> =
                    update.build_query_as().fetch_all(&mut *tx).await?;
                order_keys.extend(moved);
            }
            let streaked: HashSet<String> = if success_endpoints == "[]" || moving.is_empty() {
                HashSet::new()
            } else {
                sqlx::query_scalar(sqlx::AssertSqlSafe(streaks_sql.clone()))
                    .bind(&success_endpoints)
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .collect()
            };
            // Endpoints a failure in this batch counted against: a success
            // after it ends that streak.
            let mut failed_here: HashSet<&str> = HashSet::new();
            let mut results = Vec::with_capacity(attempts.len());
            let mut moving = moving.into_iter().peekable();
            for item in attempts {
                let is_moving = moving.peek().is_some_and(|next| std::ptr::eq(*next, item));
                if !is_moving {
                    results.push(AttemptRecorded {
                        recorded: false,
                        consecutive_failures: 0,
                        disabled_endpoint: false,
                        notification_id: None,
                        next_in_order: None,
                    });
                    continue;
                }
                moving.next();
                let delivery = &item.delivery;
                let after = item.after;
                let order_key = order_keys.get(&delivery.id).cloned();
                let may_have_streak = streaked.contains(delivery.endpoint_id.as_str())
                    || failed_here.contains(delivery.endpoint_id.as_str());
                if after == AfterAttempt::Failed && item.counts() {
                    failed_here.insert(delivery.endpoint_id.as_str());
                }
                // Replays and test fires are an owner's probes: they do not
                // move the endpoint's health.
                let counts = item.counts();
                let mut notification_id = None;
                let (failures, disabled) = match after {
                    AfterAttempt::Succeeded if counts && may_have_streak => {
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
                                let subject =
                                    HealthSubject::of(delivery, is_sandbox, &url, name.as_deref());
                                emitted.push(
                                    insert_event(
                                        &mut *tx,
                                        &subject.tenant,
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
                        let subject =
                            HealthSubject::of(delivery, is_sandbox, &url, name.as_deref());
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
                            emitted.push(
                                insert_event(
                                    &mut *tx,
                                    &subject.tenant,
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
                results.push(AttemptRecorded {
                    recorded: true,
                    consecutive_failures: failures,
                    disabled_endpoint: disabled,
                    notification_id,
                    next_in_order,
                });
            }
            results
        });
        self.store.announce(&emitted);
        Ok(results)
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
