//! Notifications to an agency's owner (an endpoint disabled): recorded in
//! the attempt's transaction, e-mailed by a worker when a relay is set.

use super::Webhooks;
use super::notification_record::Notification;
use crate::db::{in_transaction, on_pool};
use crate::ids::{AgencyId, NotificationId};
use crate::{Result, Timestamp};

impl Webhooks<'_> {
    /// A notification with its recipient's e-mail address, if any.
    pub async fn notification_to_send(
        &self,
        id: &NotificationId,
    ) -> Result<Option<(Notification, Option<String>, Option<Timestamp>)>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            #[sqlx(flatten)]
            notification: Notification,
            email: Option<String>,
            sent_at: Option<Timestamp>,
        }
        let row: Option<Row> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(
                "select n.id, n.agency_id, n.user_id, n.kind, n.subject, n.body, n.created_at, n.is_sandbox,
                        u.email, n.sent_at
                 from notifications n left join users u on u.id = n.user_id
                 where n.id = $1",
            )
            .bind(id)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|r| (r.notification, r.email, r.sent_at)))
    }

    /// Records that a notification was e-mailed.
    pub async fn mark_notification_sent(&self, id: &NotificationId) -> Result<()> {
        let now = self.store.clock().now();
        in_transaction!(self.store.db(), |tx| {
            sqlx::query("update notifications set sent_at = $2 where id = $1 and sent_at is null")
                .bind(id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        });
        Ok(())
    }

    /// Notifications raised before `before` whose recipient has an e-mail
    /// address and which were not e-mailed yet.
    pub async fn unsent_notifications(
        &self,
        before: Timestamp,
        limit: u32,
    ) -> Result<Vec<NotificationId>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_scalar(
                "select n.id from notifications n join users u on u.id = n.user_id
                 where n.sent_at is null and n.created_at < $1 and u.email is not null
                 order by n.created_at limit $2",
            )
            .bind(before)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?)
        })
    }

    /// The agency's notifications, newest first.
    pub async fn notifications(&self, agency_id: &AgencyId) -> Result<Vec<Notification>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(
                "select id, agency_id, user_id, kind, subject, body, created_at, is_sandbox
                 from notifications where agency_id = $1 order by created_at desc, id desc",
            )
            .bind(agency_id)
            .fetch_all(pool)
            .await?)
        })
    }
}
