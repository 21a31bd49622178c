//! Shoot appointments: one per listing, scheduled or moved by operators (and
//! later by the scheduling flow), cancelled with the listing.

use serde_json::json;

use crate::background::outbox::insert_event;
use crate::db::{Tx, in_transaction, on_tx};
use crate::error::Rule;
use crate::ids::{AppointmentId, EventId, UserId};
use crate::records::fetch_listing;
use crate::records::listing::{Listing, found};
use crate::rules::events::{EventType, NewEvent};
use crate::rules::listing_status::ListingStatus;

pub use crate::records::appointment::Appointment;
use crate::records::numbers::normalise_listing_number;
use crate::{Entity, Result, Store, Tenant, Timestamp};

/// The outcome of scheduling.
#[derive(Clone, Debug)]
pub struct Scheduled {
    /// The appointment.
    pub appointment: Appointment,
    /// The shoot time before, when this moved an existing shoot.
    pub previous_scheduled_at: Option<Timestamp>,
}

/// The listing's scheduled shoot (its id and time), read in the lender's
/// transaction; `None` when none is scheduled.
pub(crate) async fn scheduled_shoot<'c>(
    tx: impl Into<Tx<'c>>,
    listing: &Listing,
) -> Result<Option<(AppointmentId, Timestamp)>> {
    Ok(on_tx!(tx.into(), conn => {
        sqlx::query_as(
            "select id, scheduled_at from appointments where listing_id = $1 and status = 'scheduled'",
        )
        .bind(&listing.id)
        .fetch_optional(&mut *conn)
        .await?
    }))
}

/// Cancels the shoot of a cancelled listing in the lender's transaction and
/// writes `scheduling.appointment.created`'s counterpart,
/// `scheduling.appointment.cancelled`; returns that event's id.
pub(crate) async fn cancel_with_listing<'c>(
    tx: impl Into<Tx<'c>>,
    listing: &Listing,
    (appointment_id, scheduled_at): &(AppointmentId, Timestamp),
    now: Timestamp,
) -> Result<EventId> {
    on_tx!(tx.into(), conn => {
        sqlx::query("update appointments set status = 'cancelled', updated_at = $1 where id = $2")
            .bind(now)
            .bind(appointment_id)
            .execute(&mut *conn)
            .await?;
        let data = json!({
            "appointment_id": appointment_id,
            "listing_number": listing.listing_number,
            "scheduled_at": scheduled_at.to_rfc3339(),
            "reason": "listing_cancelled",
        });
        let cancelled = NewEvent::new(EventType::AppointmentCancelled, data);
        insert_event(&mut *conn, &listing.tenant(), now, cancelled).await
    })
}

/// Appointment repository; see [`Store::appointments`].
pub struct Appointments<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Shoot appointments.
    pub fn appointments(&self) -> Appointments<'_> {
        Appointments { store: self }
    }
}

impl Appointments<'_> {
    /// Creates the listing's shoot at `at`, or moves it there; emits
    /// `scheduling.appointment.created` or `.rescheduled`.
    pub async fn schedule(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        at: Timestamp,
    ) -> Result<Scheduled> {
        let number = normalise_listing_number(listing_number);
        let now = self.store.clock().now();
        let mut emitted = Vec::new();
        let scheduled = in_transaction!(self.store.db(), |tx| {
            let listing = found(fetch_listing!(&mut *tx, tenant, &number).await?)?;
            if listing.status == ListingStatus::Cancelled {
                return Err(Rule::ListingAlreadyCancelled.into());
            }
            let existing: Option<(AppointmentId, Timestamp, Option<UserId>, String)> = sqlx::query_as(
                "select id, scheduled_at, photographer_id, status from appointments where listing_id = $1",
            )
            .bind(&listing.id)
            .fetch_optional(&mut *tx)
            .await?;
            let (appointment, previous, event_type) = match existing {
                Some((id, previous, photographer_id, status)) => {
                    sqlx::query(
                        "update appointments set scheduled_at = $1, status = 'scheduled', updated_at = $2 where id = $3",
                    )
                    .bind(at)
                    .bind(now)
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                    let previous = (status == "scheduled").then_some(previous);
                    let event_type = if previous.is_some() {
                        EventType::AppointmentRescheduled
                    } else {
                        EventType::AppointmentCreated
                    };
                    let appointment = Appointment {
                        id,
                        listing_number: listing.listing_number.clone(),
                        scheduled_at: at,
                        photographer_id,
                        status: "scheduled".to_owned(),
                    };
                    (appointment, previous, event_type)
                }
                None => {
                    let appointment = Appointment {
                        id: AppointmentId::generate(),
                        listing_number: listing.listing_number.clone(),
                        scheduled_at: at,
                        photographer_id: None,
                        status: "scheduled".to_owned(),
                    };
                    sqlx::query(
                        "insert into appointments (id, agency_id, is_sandbox, listing_id, scheduled_at, status,
                             created_at, updated_at)
                         values ($1, $2, $3, $4, $5, 'scheduled', $6, $6)",
                    )
                    .bind(&appointment.id)
                    .bind(&tenant.agency_id)
                    .bind(tenant.environment.is_sandbox())
                    .bind(&listing.id)
                    .bind(at)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                    (appointment, None, EventType::AppointmentCreated)
                }
            };
            let data = json!({
                "appointment_id": appointment.id,
                "listing_number": appointment.listing_number,
                "scheduled_at": at.to_rfc3339(),
                "previous_scheduled_at": previous.map(Timestamp::to_rfc3339),
                "photographer_id": appointment.photographer_id,
            });
            emitted
                .push(insert_event(&mut *tx, tenant, now, NewEvent::new(event_type, data)).await?);
            Scheduled {
                appointment,
                previous_scheduled_at: previous,
            }
        });
        self.store.announce(&emitted);
        self.store.listing_cache().invalidate(tenant, &number);
        Ok(scheduled)
    }

    /// Assigns the listing's shoot to `photographer`, an active photographer
    /// of the tenant's agency, so the shoot blocks their availability.
    /// No event: the catalog has none for an assignment.
    pub async fn assign_photographer(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        photographer: &UserId,
    ) -> Result<()> {
        let number = normalise_listing_number(listing_number);
        let now = self.store.clock().now();
        in_transaction!(self.store.db(), |tx| {
            let listing = found(fetch_listing!(&mut *tx, tenant, &number).await?)?;
            let role: Option<String> = sqlx::query_scalar(
                "select role from users where agency_id = $1 and id = $2 and is_active = true",
            )
            .bind(&tenant.agency_id)
            .bind(photographer)
            .fetch_optional(&mut *tx)
            .await?;
            if role.as_deref() != Some("photographer") {
                return Err(crate::StorageError::Invalid {
                    field: "photographer_id",
                    reason: "is not an active photographer of this agency".to_owned(),
                });
            }
            let updated = sqlx::query(
                "update appointments set photographer_id = $1, updated_at = $2 where listing_id = $3",
            )
            .bind(photographer)
            .bind(now)
            .bind(&listing.id)
            .execute(&mut *tx)
            .await?;
            if updated.rows_affected() == 0 {
                return Err(crate::StorageError::NotFound(Entity::Appointment));
            }
        });
        self.store.listing_cache().invalidate(tenant, &number);
        Ok(())
    }
}
