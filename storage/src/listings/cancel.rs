//! Cancellation inside the no-fee window: the owner's fee tiers and the
//! scheduled shoot give the cutoff; a cancellation voids the unpaid invoices
//! (through `orders`), cancels the shoot and emits `listing.cancelled` once.

use serde_json::json;

use super::counts::{self, Counted};
use super::{Listings, RACE_RETRIES, Transition};
use crate::background::outbox::insert_event;
use crate::db::in_transaction;
use crate::error::Rule;
use crate::listings::appointments;
use crate::listings::cancellation_fees;
use crate::listings::orders;
use crate::records::fetch_listing;
use crate::records::listing::{Listing, found, listing_event_data};
use crate::records::numbers::normalise_listing_number;
use crate::rules::cancellation::{no_fee_cutoff, within_window};
use crate::rules::events::{EventType, NewEvent};
use crate::rules::listing_status::ListingStatus;
use crate::{Result, StorageError, Tenant, Timestamp};

/// Either the result, or "the row changed under us; read again and retry".
enum Attempt<T> {
    Done(T),
    LostRace,
}

impl Listings<'_> {
    /// Cancels a listing at or before its no-fee cutoff (the shoot time minus
    /// the owner's largest fee tier; no shoot, no cutoff). Voids open invoices,
    /// cancels the shoot, and emits `listing.cancelled` exactly once.
    pub async fn cancel(&self, tenant: &Tenant, listing_number: &str) -> Result<Transition> {
        let number = normalise_listing_number(listing_number);
        for _ in 0..RACE_RETRIES {
            if let Attempt::Done(transition) = self.try_cancel(tenant, &number).await? {
                self.store.listing_cache().invalidate(tenant, &number);
                return Ok(transition);
            }
        }
        Err(StorageError::Corrupt(
            "cancellation kept losing races".to_owned(),
        ))
    }

    async fn try_cancel(&self, tenant: &Tenant, number: &str) -> Result<Attempt<Transition>> {
        let now = self.store.clock().now();
        let mut emitted = Vec::new();
        let attempt = in_transaction!(self.store.db(), |tx| {
            let listing = found(fetch_listing!(&mut *tx, tenant, number).await?)?;
            let from = listing.status;
            if from == ListingStatus::Cancelled {
                return Err(Rule::ListingAlreadyCancelled.into());
            }
            // The specification's table lets every listing that is not
            // cancelled be cancelled inside the window, Archived included.
            let shoot = appointments::scheduled_shoot(&mut *tx, &listing).await?;
            let tiers =
                cancellation_fees::tiers_in(&mut *tx, &tenant.agency_id, &listing.owner_user_id)
                    .await?;
            let cutoff = no_fee_cutoff(shoot.as_ref().map(|(_, at)| *at), &tiers);
            if !within_window(now, cutoff) {
                let cutoff_rfc3339 = cutoff.map(Timestamp::to_rfc3339).unwrap_or_default();
                return Err(Rule::OutsideCancellationWindow { cutoff_rfc3339 }.into());
            }
            let updated = sqlx::query(
                "update listings set status = 'cancelled', updated_at = $1 where id = $2 and status = $3",
            )
            .bind(now)
            .bind(&listing.id)
            .bind(from.key())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 0 {
                Attempt::LostRace
            } else {
                let cancelled = Listing {
                    status: ListingStatus::Cancelled,
                    updated_at: now,
                    ..listing.clone()
                };
                counts::count(
                    (&mut *tx).into(),
                    tenant,
                    &[(Counted::of(&listing), -1), (Counted::of(&cancelled), 1)],
                )
                .await?;
                let listing = cancelled;
                let tenant = listing.tenant();
                if let Some(shoot) = &shoot {
                    emitted.push(
                        appointments::cancel_with_listing(&mut *tx, &listing, shoot, now).await?,
                    );
                }
                for order in orders::void_unpaid(&mut *tx, &listing, now).await? {
                    let voided = NewEvent::new(EventType::InvoiceVoided, order.event_data());
                    emitted.push(insert_event(&mut *tx, &tenant, now, voided).await?);
                }
                let mut data = listing_event_data(&listing);
                data["previous_status"] = from.display().into();
                data["cancelled_at"] = now.to_rfc3339().into();
                data["fee_applied"] = json!({"amount": 0, "currency": "USD"});
                let cancelled = NewEvent::new(EventType::ListingCancelled, data);
                emitted.push(insert_event(&mut *tx, &tenant, now, cancelled).await?);
                Attempt::Done(Transition {
                    listing,
                    previous: from,
                })
            }
        });
        self.store.announce(&emitted);
        Ok(attempt)
    }
}
