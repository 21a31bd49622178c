//! The single-listing read as one query: the listing with its orders, shoot,
//! assigned people and the owner's largest fee tier, aggregated by the database
//! (SQLite `json_group_array`, PostgreSQL `json_agg`), so the hottest read of
//! the API is one round trip.

use serde::Deserialize;
use sqlx::types::Json;

use crate::db::Database;
use crate::ids::{AppointmentId, ListingId, OrderId, UserId};
use crate::records::appointment::Appointment;
use crate::records::listing::{Listing, ListingRow};
use crate::records::listing_detail::{ListingDetail, Person};
use crate::records::numbers::normalise_listing_number;
use crate::records::order::{InvoiceState, Order};
use crate::records::user::Role;
use crate::rules::cancellation::FeeTier;
use crate::rules::cancellation::{default_tiers, no_fee_cutoff};
use crate::{Entity, Result, StorageError, Tenant, Timestamp};

#[derive(Deserialize)]
struct OrderJson {
    id: String,
    listing_id: String,
    package: String,
    amount: i64,
    currency: String,
    invoice_number: String,
    invoice_state: String,
    payment_reference: Option<String>,
    paid_at: Option<i64>,
    voided_at: Option<i64>,
    created_at: i64,
}

#[derive(Deserialize)]
struct PersonJson {
    id: String,
    role: String,
    name: Option<String>,
}

#[derive(sqlx::FromRow)]
struct DetailRow {
    #[sqlx(flatten)]
    listing: ListingRow,
    appointment_id: Option<AppointmentId>,
    appointment_scheduled_at: Option<Timestamp>,
    appointment_photographer_id: Option<UserId>,
    appointment_status: Option<String>,
    max_hours_before: Option<i64>,
    orders_json: Json<Vec<OrderJson>>,
    people_json: Json<Vec<PersonJson>>,
}

const SELECT_SQLITE: &str = "select l.id, l.agency_id, l.is_sandbox, l.listing_number, l.status, l.address,
        l.owner_user_id, l.agent_one_id, l.agent_two_id, l.package, l.notes, l.activated_at, l.billed_at,
        l.tour3d_url, l.floorplan, l.created_at, l.updated_at,
        a.id as appointment_id, a.scheduled_at as appointment_scheduled_at,
        a.photographer_id as appointment_photographer_id, a.status as appointment_status,
        (select max(t.hours_before) from cancellation_fee_tiers t
          where t.agency_id = l.agency_id and t.owner_user_id = l.owner_user_id) as max_hours_before,
        (select json_group_array(json_object(
             'id', o.id, 'listing_id', o.listing_id, 'package', o.package, 'amount', o.amount,
             'currency', o.currency, 'invoice_number', o.invoice_number, 'invoice_state', o.invoice_state,
             'payment_reference', o.payment_reference, 'paid_at', o.paid_at, 'voided_at', o.voided_at,
             'created_at', o.created_at) order by o.created_at, o.id)
          from orders o where o.listing_id = l.id) as orders_json,
        (select json_group_array(json_object('id', u.id, 'role', u.role, 'name', u.name))
          from users u where u.agency_id = l.agency_id
           and u.id in (l.owner_user_id, l.agent_one_id, l.agent_two_id, a.photographer_id)) as people_json
     from listings l left join appointments a on a.listing_id = l.id
     where l.agency_id = $1 and l.is_sandbox = $2 and l.listing_number = $3";

const SELECT_POSTGRES: &str = "select l.id, l.agency_id, l.is_sandbox, l.listing_number, l.status, l.address,
        l.owner_user_id, l.agent_one_id, l.agent_two_id, l.package, l.notes, l.activated_at, l.billed_at,
        l.tour3d_url, l.floorplan, l.created_at, l.updated_at,
        a.id as appointment_id, a.scheduled_at as appointment_scheduled_at,
        a.photographer_id as appointment_photographer_id, a.status as appointment_status,
        (select max(t.hours_before) from cancellation_fee_tiers t
          where t.agency_id = l.agency_id and t.owner_user_id = l.owner_user_id) as max_hours_before,
        coalesce((select json_agg(json_build_object(
             'id', o.id, 'listing_id', o.listing_id, 'package', o.package, 'amount', o.amount,
             'currency', o.currency, 'invoice_number', o.invoice_number, 'invoice_state', o.invoice_state,
             'payment_reference', o.payment_reference, 'paid_at', o.paid_at, 'voided_at', o.voided_at,
             'created_at', o.created_at) order by o.created_at, o.id)
          from orders o where o.listing_id = l.id), '[]'::json) as orders_json,
        coalesce((select json_agg(json_build_object('id', u.id, 'role', u.role, 'name', u.name))
          from users u where u.agency_id = l.agency_id
           and u.id in (l.owner_user_id, l.agent_one_id, l.agent_two_id, a.photographer_id)), '[]'::json) as people_json
     from listings l left join appointments a on a.listing_id = l.id
     where l.agency_id = $1 and l.is_sandbox = $2 and l.listing_number = $3";

impl DetailRow {
    fn into_detail(self) -> Result<ListingDetail> {
        let corrupt = |what: &str| StorageError::Corrupt(format!("listing detail: {what}"));
        let listing = Listing::try_from(self.listing)?;
        let orders = self
            .orders_json
            .0
            .into_iter()
            .map(|o| {
                Ok(Order {
                    id: OrderId::parse(&o.id).ok_or_else(|| corrupt("order id"))?,
                    listing_id: ListingId::parse(&o.listing_id)
                        .ok_or_else(|| corrupt("listing id"))?,
                    listing_number: listing.listing_number.clone(),
                    package: o.package,
                    amount: o.amount,
                    currency: o.currency,
                    invoice_number: o.invoice_number,
                    invoice_state: InvoiceState::parse(&o.invoice_state)
                        .ok_or_else(|| corrupt("invoice state"))?,
                    payment_reference: o.payment_reference,
                    paid_at: o.paid_at.map(Timestamp::from_micros),
                    voided_at: o.voided_at.map(Timestamp::from_micros),
                    created_at: Timestamp::from_micros(o.created_at),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let appointment = match (
            self.appointment_id,
            self.appointment_scheduled_at,
            self.appointment_status,
        ) {
            (Some(id), Some(scheduled_at), Some(status)) => Some(Appointment {
                id,
                listing_number: listing.listing_number.clone(),
                scheduled_at,
                photographer_id: self.appointment_photographer_id,
                status,
            }),
            _ => None,
        };
        // People in assignment order: owner, agent one, agent two, photographer.
        let by_id: Vec<Person> = self
            .people_json
            .0
            .into_iter()
            .map(|p| {
                Ok(Person {
                    id: UserId::parse(&p.id).ok_or_else(|| corrupt("user id"))?,
                    role: Role::parse(&p.role).ok_or_else(|| corrupt("role"))?,
                    name: p.name,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let tiers = match self.max_hours_before {
            Some(hours_before) => vec![FeeTier {
                hours_before,
                amount: 0,
                currency: String::new(),
            }],
            None => default_tiers(),
        };
        let scheduled = appointment
            .as_ref()
            .filter(|a| a.status == "scheduled")
            .map(|a| a.scheduled_at);
        Ok(ListingDetail {
            no_fee_cutoff: no_fee_cutoff(scheduled, &tiers),
            people: by_id,
            orders,
            appointment,
            listing,
            media: Vec::new(),
        })
    }
}

/// Reads the tenant's listing with everything the detail shows.
pub(crate) async fn fetch(
    db: &Database,
    tenant: &Tenant,
    listing_number: &str,
) -> Result<ListingDetail> {
    let number = normalise_listing_number(listing_number);
    let row: Option<DetailRow> = match db {
        Database::Sqlite(sqlite) => {
            sqlx::query_as(SELECT_SQLITE)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(&number)
                .fetch_optional(sqlite.pool())
                .await?
        }
        Database::Postgres(pool) => {
            sqlx::query_as(SELECT_POSTGRES)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(&number)
                .fetch_optional(pool)
                .await?
        }
    };
    row.ok_or(StorageError::NotFound(Entity::Listing))?
        .into_detail()
}
