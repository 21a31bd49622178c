//! Orders of a listing and their invoices: raised when the listing is created,
//! paid through the payment provider's callback (here `record_payment`, which
//! also activates and bills the listing), voided by cancellation.

use serde_json::json;

use crate::db::{in_transaction, on_pool};
use crate::error::Rule;
use crate::events::{EventType, NewEvent};
use crate::ids::{ListingId, OrderId};
use crate::listing_status::ListingStatus;
use crate::listings::{Listing, fetch_listing, found, normalise_listing_number};
use crate::outbox::insert_event;
use crate::page::{Page, Position};
use crate::{Result, StorageError, Store, Tenant, Timestamp};

/// Where an invoice is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvoiceState {
    /// Being prepared.
    Draft,
    /// Sent, awaiting payment.
    Open,
    /// Paid.
    Paid,
    /// Cancelled without payment.
    Void,
}

impl InvoiceState {
    /// The wire and column name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Draft => "draft",
            Self::Open => "open",
            Self::Paid => "paid",
            Self::Void => "void",
        }
    }

    /// Parses a column value.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Draft, Self::Open, Self::Paid, Self::Void]
            .into_iter()
            .find(|state| state.as_str() == text)
    }
}

/// A new invoice number: `INV-` and ten unambiguous characters.
pub fn invoice_number() -> String {
    const ALPHABET: &[u8] = b"23456789ABCDEFGHJKMNPQRSTUVWXYZ";
    let tail: String = (0..10)
        .map(|_| char::from(ALPHABET[rand::random_range(0..ALPHABET.len())]))
        .collect();
    format!("INV-{tail}")
}

/// An order and its invoice.
#[derive(Clone, Debug)]
pub struct Order {
    /// Its id.
    pub id: OrderId,
    /// The listing ordered for.
    pub listing_id: ListingId,
    /// That listing's number.
    pub listing_number: String,
    /// Package key.
    pub package: String,
    /// Amount in minor units.
    pub amount: i64,
    /// ISO 4217 currency.
    pub currency: String,
    /// Invoice number.
    pub invoice_number: String,
    /// Invoice state.
    pub invoice_state: InvoiceState,
    /// The payment provider's reference, once paid.
    pub payment_reference: Option<String>,
    /// When paid.
    pub paid_at: Option<Timestamp>,
    /// When voided.
    pub voided_at: Option<Timestamp>,
    /// When raised.
    pub created_at: Timestamp,
}

impl Order {
    /// The `data` of invoice events.
    pub fn event_data(&self) -> serde_json::Value {
        json!({
            "order_id": self.id,
            "listing_number": self.listing_number,
            "invoice_number": self.invoice_number,
            "invoice_state": self.invoice_state.as_str(),
            "package": self.package,
            "amount": self.amount,
            "currency": self.currency,
            "payment_reference": self.payment_reference,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct OrderRow {
    id: OrderId,
    listing_id: ListingId,
    package: String,
    amount: i64,
    currency: String,
    invoice_number: String,
    invoice_state: String,
    payment_reference: Option<String>,
    paid_at: Option<Timestamp>,
    voided_at: Option<Timestamp>,
    created_at: Timestamp,
}

impl OrderRow {
    pub(crate) fn into_order(self, listing_number: &str) -> Result<Order> {
        let invoice_state = InvoiceState::parse(&self.invoice_state).ok_or_else(|| {
            StorageError::Corrupt(format!("invoice state {}", self.invoice_state))
        })?;
        Ok(Order {
            id: self.id,
            listing_id: self.listing_id,
            listing_number: listing_number.to_owned(),
            package: self.package,
            amount: self.amount,
            currency: self.currency,
            invoice_number: self.invoice_number,
            invoice_state,
            payment_reference: self.payment_reference,
            paid_at: self.paid_at,
            voided_at: self.voided_at,
            created_at: self.created_at,
        })
    }
}

pub(crate) const ORDER_COLUMNS: &str = "id, listing_id, package, amount, currency, invoice_number, \
     invoice_state, payment_reference, paid_at, voided_at, created_at";

/// A recorded payment.
#[derive(Clone, Debug)]
pub struct Payment {
    /// The listing, now activated and billed.
    pub listing: Listing,
    /// The paid order.
    pub order: Order,
    /// False when the invoice had been paid before (nothing changed).
    pub newly_paid: bool,
}

/// Order repository; see [`Store::orders`].
pub struct Orders<'a> {
    pub(crate) store: &'a Store,
}

impl Orders<'_> {
    /// A page of a listing's orders, oldest first.
    pub async fn for_listing(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        after: Option<&Position>,
        limit: u32,
    ) -> Result<Page<Order>> {
        let listing = self.store.listings().get(tenant, listing_number).await?;
        let limit = limit.min(crate::page::MAX_PAGE_SIZE);
        let sql = format!(
            "select {ORDER_COLUMNS} from orders
             where agency_id = $1 and is_sandbox = $2 and listing_id = $3
             and ($4 is null or (created_at, id) > ($4, $5))
             order by created_at, id limit $6"
        );
        let (rows, total): (Vec<OrderRow>, i64) = on_pool!(self.store.db(), pool => {
            let rows = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(&listing.id)
                .bind(after.map(|p| p.created_at))
                .bind(after.map(|p| p.id.as_str()))
                .bind(i64::from(limit) + 1)
                .fetch_all(pool)
                .await?;
            let total = sqlx::query_scalar(
                "select count(*) from orders where agency_id = $1 and is_sandbox = $2 and listing_id = $3",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(&listing.id)
            .fetch_one(pool)
            .await?;
            (rows, total)
        });
        let orders = rows
            .into_iter()
            .map(|row| row.into_order(&listing.listing_number))
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::from_overfetch(orders, limit, total, |o| {
            Position::after(o.created_at, o.id.as_str())
        }))
    }

    /// Records the payment of the listing's open invoice (what the payment
    /// provider's callback does): the invoice becomes paid, the listing
    /// activated and billed, and `invoice.paid` is emitted. Paying a listing
    /// whose invoice is already paid changes nothing.
    pub async fn record_payment(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        reference: Option<String>,
    ) -> Result<Payment> {
        let number = normalise_listing_number(listing_number);
        let now = self.store.clock().now();
        let reference = reference.unwrap_or_else(|| format!("pay_{}", ulid::Ulid::generate()));
        let mut emitted: Vec<String> = Vec::new();
        let payment = in_transaction!(self.store.db(), |tx| {
            let listing = found(fetch_listing!(&mut *tx, tenant, &number).await?)?;
            if listing.status == ListingStatus::Cancelled {
                return Err(Rule::ListingAlreadyCancelled.into());
            }
            let paid: Option<OrderRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "update orders set invoice_state = 'paid', payment_reference = $1, paid_at = $2, updated_at = $2
                 where id = (select id from orders where listing_id = $3 and invoice_state in ('draft', 'open')
                             order by created_at, id limit 1)
                   and invoice_state in ('draft', 'open')
                 returning {ORDER_COLUMNS}"
            )))
            .bind(&reference)
            .bind(now)
            .bind(&listing.id)
            .fetch_optional(&mut *tx)
            .await?;
            let (order, newly_paid) = match paid {
                Some(row) => (row.into_order(&listing.listing_number)?, true),
                None => {
                    let earlier: Option<OrderRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                        "select {ORDER_COLUMNS} from orders where listing_id = $1 and invoice_state = 'paid'
                         order by paid_at desc limit 1"
                    )))
                    .bind(&listing.id)
                    .fetch_optional(&mut *tx)
                    .await?;
                    let row = earlier.ok_or(StorageError::NotFound("open invoice"))?;
                    (row.into_order(&listing.listing_number)?, false)
                }
            };
            sqlx::query(
                "update listings set activated_at = coalesce(activated_at, $1), billed_at = coalesce(billed_at, $1),
                     updated_at = $1
                 where id = $2 and (activated_at is null or billed_at is null)",
            )
            .bind(now)
            .bind(&listing.id)
            .execute(&mut *tx)
            .await?;
            if newly_paid {
                insert_event!(
                    &mut *tx,
                    tenant,
                    now,
                    NewEvent::new(EventType::InvoicePaid, order.event_data()),
                    &mut emitted
                )
                .await?;
                if tenant.environment.is_sandbox() {
                    // The sandbox charges nobody: the payment is a recorded no-op.
                    let detail = crate::sandbox::payment_detail(
                        &order.id,
                        order.amount,
                        &order.currency,
                        &reference,
                    );
                    crate::sandbox::record_side_effect!(
                        &mut *tx,
                        &tenant.agency_id,
                        crate::sandbox::SideEffectKind::Payment,
                        &listing.listing_number,
                        &detail,
                        now
                    )
                    .await?;
                }
            }
            let listing = Listing {
                activated_at: listing.activated_at.or(Some(now)),
                billed_at: listing.billed_at.or(Some(now)),
                ..listing
            };
            Payment {
                listing,
                order,
                newly_paid,
            }
        });
        self.store.announce(&emitted);
        self.store.listing_cache().invalidate(tenant, &number);
        Ok(payment)
    }
}
