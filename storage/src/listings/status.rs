//! The status lifecycle: `PATCH …/status` judged against the status read and
//! guarded by it in the `UPDATE … WHERE`, emitting `listing.status_changed`.

use super::counts::{self, Counted};
use super::{Listings, StatusChange, Transition};
use crate::background::outbox::insert_event;
use crate::db::in_transaction;
use crate::error::Rule;
use crate::records::fetch_listing;
use crate::records::listing::{Listing, found, listing_event_data};
use crate::records::numbers::normalise_listing_number;
use crate::rules::events::{EventType, NewEvent};
use crate::rules::listing_status::ListingStatus;
use crate::{Result, Tenant};

/// The rules of `PATCH …/status`, in the specification's order: activation
/// (409), no-op (409), lifecycle (422).
fn check_status_change(listing: &Listing, to: ListingStatus) -> Result<()> {
    let from = listing.status;
    if !listing.is_activated() {
        return Err(Rule::ListingNotActivated.into());
    }
    if from == to {
        return Err(Rule::NoOpTransition(to.display()).into());
    }
    if !from.allows(to) {
        return Err(Rule::LifecycleViolation {
            from: from.display(),
            to: to.display(),
        }
        .into());
    }
    Ok(())
}

impl Listings<'_> {
    /// Moves a listing to `to` if it is activated and billed, `to` differs from
    /// its status and the lifecycle allows it; emits `listing.status_changed`.
    ///
    /// The request is judged against the status it reads, and the `UPDATE`
    /// repeats that status in its `WHERE`. A writer overtaken between the two
    /// (another change committed first) does not try again against the new
    /// status: the client asked to leave the status it saw, which is gone. It
    /// gets `NoOpTransition` when the winner already moved the listing to `to`,
    /// and [`StatusChange::Overtaken`] otherwise; either way nothing is written.
    pub async fn change_status(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        to: ListingStatus,
    ) -> Result<StatusChange> {
        let number = normalise_listing_number(listing_number);
        let now = self.store.clock().now();
        let mut emitted = Vec::new();
        let change = in_transaction!(self.store.db(), |tx| {
            let listing = found(fetch_listing!(&mut *tx, tenant, &number).await?)?;
            let from = listing.status;
            check_status_change(&listing, to)?;
            let updated = sqlx::query(
                "update listings set status = $1, updated_at = $2
                 where id = $3 and status = $4 and activated_at is not null and billed_at is not null",
            )
            .bind(to.key())
            .bind(now)
            .bind(&listing.id)
            .bind(from.key())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 0 {
                // Overtaken. On PostgreSQL this statement sees the winner's
                // commit; SQLite's single writer never gets here.
                let current = found(fetch_listing!(&mut *tx, tenant, &number).await?)?;
                if !current.is_activated() {
                    return Err(Rule::ListingNotActivated.into());
                }
                if current.status == to {
                    return Err(Rule::NoOpTransition(to.display()).into());
                }
                StatusChange::Overtaken {
                    expected: from,
                    current: current.status,
                }
            } else {
                let moved = Listing {
                    status: to,
                    updated_at: now,
                    ..listing.clone()
                };
                counts::count(
                    (&mut *tx).into(),
                    tenant,
                    &[(Counted::of(&listing), -1), (Counted::of(&moved), 1)],
                )
                .await?;
                let listing = moved;
                let mut data = listing_event_data(&listing);
                data["previous_status"] = from.display().into();
                emitted.push(
                    insert_event(
                        &mut *tx,
                        tenant,
                        now,
                        NewEvent::new(EventType::ListingStatusChanged, data),
                    )
                    .await?,
                );
                StatusChange::Changed(Box::new(Transition {
                    listing,
                    previous: from,
                }))
            }
        });
        self.store.announce(&emitted);
        // Also when overtaken: the winner may be another process, whose
        // change this process's cache has not seen.
        self.store.listing_cache().invalidate(tenant, &number);
        Ok(change)
    }
}
