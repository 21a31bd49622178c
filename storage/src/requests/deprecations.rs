//! Calls to deprecated routes, and the e-mail each calling agency's owner
//! gets before a route's removal. The specification: "the agency owner is
//! emailed at least 30 days before a removal". A deprecated route records
//! which agencies call it; once a removal is [`NOTICE_DAYS`] away, a
//! scheduled task writes one notification per calling agency and entry,
//! which the notification worker e-mails.

use crate::db::{bookkeeping_transaction, in_transaction};
use crate::ids::{AgencyId, NotificationId, UserId};
use crate::rules::changelog::{ChangeType, ENTRIES, Entry, unix_seconds};
use crate::{Result, Store, Timestamp};

/// How many days before a removal its notices go out: one more than the
/// specification's 30, so an hourly task still e-mails at least 30 days
/// ahead.
pub const NOTICE_DAYS: i64 = 31;

/// How often one agency's calls to a route are recorded at most (a busy
/// client's every call is not a write).
const USE_RESOLUTION_SECONDS: i64 = 3_600;

/// Calls to deprecated routes and their removal notices.
pub struct Deprecations<'a> {
    store: &'a Store,
}

impl Store {
    /// Calls to deprecated routes and their removal notices.
    pub fn deprecations(&self) -> Deprecations<'_> {
        Deprecations { store: self }
    }
}

impl Deprecations<'_> {
    /// Records that `agency` called the deprecated route of `entry` now.
    pub async fn record_use(&self, agency: &AgencyId, entry: &Entry) -> Result<()> {
        let now = self.store.clock().now();
        let stale = now.plus_seconds(-USE_RESOLUTION_SECONDS);
        bookkeeping_transaction!(self.store.bookkeeping(), |tx| {
            sqlx::query(
                "insert into deprecated_route_uses (agency_id, entry_id, first_used_at, last_used_at)
                 values ($1, $2, $3, $3)
                 on conflict (agency_id, entry_id) do update set last_used_at = excluded.last_used_at
                 where deprecated_route_uses.last_used_at < $4",
            )
            .bind(agency)
            .bind(entry.id)
            .bind(now)
            .bind(stale)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// Writes the removal notices that are due: for every deprecation whose
    /// removal is at most [`NOTICE_DAYS`] away and not yet past, one
    /// notification to the owner of each agency that called its route and
    /// was not told yet. Returns the notifications to e-mail.
    pub async fn write_due_notices(&self) -> Result<Vec<NotificationId>> {
        let now = self.store.clock().now();
        let mut written = Vec::new();
        for entry in ENTRIES
            .iter()
            .filter(|entry| entry.change_type == ChangeType::Deprecated)
        {
            let Some(removal) = entry.removal_date.and_then(unix_seconds) else {
                continue;
            };
            let removal = Timestamp::from_micros(removal.saturating_mul(1_000_000));
            if now >= removal || now < removal.plus_seconds(-NOTICE_DAYS * 86_400) {
                continue;
            }
            written.extend(self.notify_callers(entry, now).await?);
        }
        Ok(written)
    }

    async fn notify_callers(&self, entry: &Entry, now: Timestamp) -> Result<Vec<NotificationId>> {
        let removal_date = entry.removal_date.unwrap_or_default();
        let routes = entry.routes.join(", ");
        let migration = entry
            .migration
            .unwrap_or("the route named in the changelog");
        let subject = format!("{routes} will be removed on {removal_date}");
        let body = format!(
            "Your agency called {routes}, which is deprecated and will be removed on \
             {removal_date}; from then on it answers 410 Gone. Move to {migration} before then. \
             The changelog entry {id} (GET /api/v1/agency/changelog) says what changes.",
            id = entry.id
        );
        let notified = in_transaction!(self.store.db(), |tx| {
            let callers: Vec<(AgencyId, Option<UserId>)> = sqlx::query_as(
                "select d.agency_id,
                        (select u.id from users u join agencies a on a.id = u.agency_id
                         where u.agency_id = d.agency_id and u.role = a.kind and u.is_active
                         order by u.created_at, u.id limit 1)
                 from deprecated_route_uses d
                 where d.entry_id = $1 and d.notified_at is null
                 order by d.agency_id",
            )
            .bind(entry.id)
            .fetch_all(&mut *tx)
            .await?;
            let mut notified = Vec::new();
            for (agency, owner) in callers {
                let id = NotificationId::generate();
                sqlx::query(
                    "insert into notifications (id, agency_id, user_id, kind, subject, body, created_at, is_sandbox)
                     values ($1, $2, $3, 'route_removal', $4, $5, $6, false)",
                )
                .bind(&id)
                .bind(&agency)
                .bind(&owner)
                .bind(&subject)
                .bind(&body)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "update deprecated_route_uses set notified_at = $3
                     where agency_id = $1 and entry_id = $2",
                )
                .bind(&agency)
                .bind(entry.id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                notified.push(id);
            }
            notified
        });
        Ok(notified)
    }
}
