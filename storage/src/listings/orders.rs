//! Orders of a listing and their invoices: raised when the listing is created
//! ([`raise`], in the creation's transaction), paid through the payment
//! provider's callback (here `record_payment`, which also activates and bills
//! the listing), voided by cancellation ([`void_unpaid`], in its transaction).

use crate::background::outbox::insert_event;
use crate::db::{Tx, in_transaction, on_pool, on_tx};
use crate::error::Rule;
use crate::ids::OrderId;
use crate::page::{Page, Position};
use crate::people::sandbox::{SideEffectKind, payment_detail, record_side_effect};
use crate::records::fetch_listing;
use crate::records::listing::{Listing, found};
use crate::records::numbers::{invoice_number, normalise_listing_number};
use crate::records::order::{ORDER_COLUMNS, OrderRow};
use crate::rules::events::{EventType, NewEvent};
use crate::rules::listing_status::ListingStatus;
use crate::rules::packages::Package;
use crate::{Entity, Result, StorageError, Store, Tenant, Timestamp};

pub use crate::records::order::{InvoiceState, Order};

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

/// Raises the order of a new listing, its invoice open for `package`, in
/// the lender's transaction.
pub(crate) async fn raise<'c>(
    tx: impl Into<Tx<'c>>,
    listing: &Listing,
    package: &Package,
    now: Timestamp,
) -> Result<Order> {
    let order = Order {
        id: OrderId::generate(),
        listing_id: listing.id.clone(),
        listing_number: listing.listing_number.clone(),
        package: package.key.to_owned(),
        amount: package.amount,
        currency: package.currency.to_owned(),
        invoice_number: invoice_number(),
        invoice_state: InvoiceState::Open,
        payment_reference: None,
        paid_at: None,
        voided_at: None,
        created_at: now,
    };
    on_tx!(tx.into(), conn => {
        sqlx::query(
            "insert into orders (id, agency_id, is_sandbox, listing_id, package, amount, currency,
                 invoice_number, invoice_state, created_at, updated_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)",
        )
        .bind(&order.id)
        .bind(&listing.agency_id)
        .bind(listing.environment.is_sandbox())
        .bind(&order.listing_id)
        .bind(&order.package)
        .bind(order.amount)
        .bind(&order.currency)
        .bind(&order.invoice_number)
        .bind(order.invoice_state.as_str())
        .bind(now)
        .execute(&mut *conn)
        .await?;
    });
    Ok(order)
}

/// The first order raised for `listing` (the one its creation raised), read
/// in the lender's transaction.
pub(crate) async fn first_of<'c>(tx: impl Into<Tx<'c>>, listing: &Listing) -> Result<Order> {
    let row: OrderRow = on_tx!(tx.into(), conn => {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "select {ORDER_COLUMNS} from orders where listing_id = $1 order by created_at, id limit 1"
        )))
        .bind(&listing.id)
        .fetch_one(&mut *conn)
        .await?
    });
    row.into_order(&listing.listing_number)
}

/// Voids `listing`'s unpaid invoices (draft or open) in the lender's
/// transaction and returns the voided orders.
pub(crate) async fn void_unpaid<'c>(
    tx: impl Into<Tx<'c>>,
    listing: &Listing,
    now: Timestamp,
) -> Result<Vec<Order>> {
    let rows: Vec<OrderRow> = on_tx!(tx.into(), conn => {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "update orders set invoice_state = 'void', voided_at = $1, updated_at = $1
             where listing_id = $2 and invoice_state in ('draft', 'open')
             returning {ORDER_COLUMNS}"
        )))
        .bind(now)
        .bind(&listing.id)
        .fetch_all(&mut *conn)
        .await?
    });
    rows.into_iter()
        .map(|row| row.into_order(&listing.listing_number))
        .collect()
}

/// Order repository; see [`Store::orders`].
pub struct Orders<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Orders and invoices of listings.
    pub fn orders(&self) -> Orders<'_> {
        Orders { store: self }
    }
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
        let mut emitted = Vec::new();
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
                    let row = earlier.ok_or(StorageError::NotFound(Entity::OpenInvoice))?;
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
                let paid = NewEvent::new(EventType::InvoicePaid, order.event_data());
                emitted.push(insert_event(&mut *tx, tenant, now, paid).await?);
                if tenant.environment.is_sandbox() {
                    // The sandbox charges nobody: the payment is a recorded no-op.
                    let detail =
                        payment_detail(&order.id, order.amount, &order.currency, &reference);
                    record_side_effect(
                        &mut *tx,
                        &tenant.agency_id,
                        SideEffectKind::Payment,
                        &listing.listing_number,
                        &detail,
                        now,
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
