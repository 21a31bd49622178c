//! Creating a listing: the body's fields checked (`crate::rules::new_listing`),
//! the people checked against the agency, then, in one transaction, the listing, its order (raised by
//! `orders`) and the `listing.created` and `invoice.created` events. A
//! creation under an idempotency key that already made a listing within the
//! idempotency window returns that listing and its order instead.

use super::counts::{self, Counted};
use super::{CreatedListing, Listings, NewListing, RACE_RETRIES};
use crate::background::outbox::insert_events;
use crate::db::{Tx, in_transaction, on_tx};
use crate::ids::{ListingId, UserId};
use crate::listings::orders;
use crate::records::listing::{LISTING_COLUMNS, Listing, ListingRow, listing_event_data};
use crate::records::numbers::generate_listing_number;
use crate::rules::events::{EventType, NewEvent};
use crate::rules::listing_status::ListingStatus;
use crate::rules::new_listing::{FieldErrors, check_fields};
use crate::{Result, StorageError, Tenant, Timestamp};

/// The listing an earlier creation under `key` made within the idempotency
/// window (from `window_start`), with its order. A listing holding the key
/// from before the window gives it up, so the key may make a new one.
async fn made_earlier<'c>(
    tx: impl Into<Tx<'c>>,
    tenant: &Tenant,
    key: &str,
    window_start: Timestamp,
) -> Result<Option<CreatedListing>> {
    let earlier = on_tx!(tx.into(), conn => {
        let existing: Option<ListingRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "select {LISTING_COLUMNS} from listings where agency_id = $1 and idempotency_key = $2"
        )))
        .bind(&tenant.agency_id)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await?;
        let reusable = existing.as_ref().is_some_and(|row| {
            row.created_after(window_start) && row.belongs_to(tenant.environment)
        });
        if existing.is_some() && !reusable {
            // A key older than the idempotency window may make a new listing.
            sqlx::query(
                "update listings set idempotency_key = null where agency_id = $1 and idempotency_key = $2",
            )
            .bind(&tenant.agency_id)
            .bind(key)
            .execute(&mut *conn)
            .await?;
        }
        match existing.filter(|_| reusable) {
            None => None,
            Some(row) => {
                let listing = Listing::try_from(row)?;
                let order = orders::first_of(&mut *conn, &listing).await?;
                Some(CreatedListing { listing, order })
            }
        }
    });
    Ok(earlier)
}

/// Adds an error for each named person who is not an active, non-platform
/// user of the tenant's agency.
async fn check_people<'c>(
    tx: impl Into<Tx<'c>>,
    tenant: &Tenant,
    people: &[(&'static str, UserId)],
    errors: &mut FieldErrors,
) -> Result<()> {
    let person_id = |n: usize| people.get(n).map(|(_, id)| id);
    let members: Vec<(UserId, bool, String)> = on_tx!(tx.into(), conn => {
        sqlx::query_as(
            "select id, is_active, role from users where agency_id = $1 and id in ($2, $3, $4)",
        )
        .bind(&tenant.agency_id)
        .bind(person_id(0))
        .bind(person_id(1))
        .bind(person_id(2))
        .fetch_all(&mut *conn)
        .await?
    });
    for (field, id) in people {
        let member = members
            .iter()
            .find(|(member, _, _)| member == id)
            .map(|(_, active, role)| (*active, role.as_str()));
        match member {
            Some((_, role)) if role == "super_admin" || role == "admin" => {
                errors.insert(field, "is not a user of this agency".to_owned());
            }
            Some((true, _)) => {}
            Some((false, _)) => {
                errors.insert(field, "is deactivated".to_owned());
            }
            None => {
                errors.insert(field, "is not a user of this agency".to_owned());
            }
        }
    }
    Ok(())
}

/// Inserts `listing` under a fresh listing number (a collision is rare: it
/// tries another number instead of failing) and returns it numbered.
async fn insert_numbered<'c>(
    tx: impl Into<Tx<'c>>,
    mut listing: Listing,
    idempotency_key: Option<&str>,
) -> Result<Listing> {
    on_tx!(tx.into(), conn => {
        for _ in 0..RACE_RETRIES {
            let number = generate_listing_number(listing.environment);
            let inserted: Option<(String,)> = sqlx::query_as(
                "insert into listings (id, agency_id, is_sandbox, listing_number, status, address,
                     owner_user_id, agent_one_id, agent_two_id, package, notes, created_at, updated_at,
                     idempotency_key)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13)
                 on conflict (listing_number) do nothing
                 returning id",
            )
            .bind(&listing.id)
            .bind(&listing.agency_id)
            .bind(listing.environment.is_sandbox())
            .bind(&number)
            .bind(listing.status.key())
            .bind(&listing.address)
            .bind(&listing.owner_user_id)
            .bind(&listing.agent_one_id)
            .bind(&listing.agent_two_id)
            .bind(&listing.package)
            .bind(&listing.notes)
            .bind(listing.created_at)
            .bind(idempotency_key)
            .fetch_optional(&mut *conn)
            .await?;
            if inserted.is_some() {
                listing.listing_number = number;
                return Ok(listing);
            }
        }
    });
    Err(StorageError::Corrupt(
        "no free listing number after retries".to_owned(),
    ))
}

impl Listings<'_> {
    /// Creates a listing with status Coming Soon and its order with an open
    /// invoice for the package, and emits `listing.created` and
    /// `invoice.created`. The owner and agents must be active people of the
    /// tenant's agency.
    pub async fn create(&self, tenant: &Tenant, new: NewListing) -> Result<CreatedListing> {
        let mut checked = check_fields(&new);
        let now = self.store.clock().now();
        let idempotency_key = new.idempotency_key.as_deref();
        let window_start =
            now.plus_seconds(-(crate::requests::idempotency::RETENTION.as_secs() as i64));
        let mut emitted = Vec::new();
        let created = in_transaction!(self.store.db(), |tx| {
            if let Some(key) = idempotency_key
                && let Some(earlier) = made_earlier(&mut *tx, tenant, key, window_start).await?
            {
                return Ok(earlier);
            }
            check_people(&mut *tx, tenant, &checked.people, &mut checked.errors).await?;
            let (Some(address), Some(package), true) = (
                checked.address.take(),
                checked.package,
                checked.errors.is_empty(),
            ) else {
                return Err(StorageError::Fields(checked.errors));
            };
            let (Some(owner_user_id), Some(agent_one_id)) = (
                checked.person("owner_user_id"),
                checked.person("agent_one_id"),
            ) else {
                return Err(StorageError::Corrupt("validated people missing".to_owned()));
            };
            let listing = Listing {
                id: ListingId::generate(),
                agency_id: tenant.agency_id.clone(),
                environment: tenant.environment,
                listing_number: String::new(),
                status: ListingStatus::ComingSoon,
                address,
                owner_user_id,
                agent_one_id,
                agent_two_id: checked.person("agent_two_id"),
                package: package.key.to_owned(),
                notes: checked.notes.take(),
                activated_at: None,
                billed_at: None,
                tour3d_url: None,
                floorplan: Vec::new(),
                created_at: now,
                updated_at: now,
            };
            let listing = insert_numbered(&mut *tx, listing, idempotency_key).await?;
            counts::count((&mut *tx).into(), tenant, &[(Counted::of(&listing), 1)]).await?;
            let order = orders::raise(&mut *tx, &listing, package, now).await?;
            let events = [
                NewEvent::new(EventType::ListingCreated, listing_event_data(&listing)),
                NewEvent::new(EventType::InvoiceCreated, order.event_data()),
            ];
            emitted.extend(insert_events(&mut *tx, tenant, now, events).await?);
            CreatedListing { listing, order }
        });
        self.store.announce(&emitted);
        Ok(created)
    }
}
