//! An order of a listing as stored: its invoice state, record and columns,
//! and the `data` invoice events carry.

use serde_json::json;

use crate::ids::{ListingId, OrderId};
use crate::{Result, StorageError, Timestamp};

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
