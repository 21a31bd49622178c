//! Wire types of the listing routes and their conversions from the domain.

use serde::{Deserialize, Serialize};
use storage::Timestamp;
use storage::listings::Listing;
use storage::listings::appointments::Appointment;
use storage::listings::orders::Order;
use utoipa::ToSchema;

use crate::state::PublicUrls;

/// A listing as every listing route returns it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ListingOut {
    /// Internal id.
    pub id: String,
    /// The public slug (6–8 characters; sandbox listings start with `snd_`).
    pub listing_number: String,
    /// Display form: Coming Soon, Active, Pending, Sold, Off Market, Archived or Cancelled.
    pub status: String,
    /// Street address.
    pub address: String,
    /// The listing's owner.
    pub owner_user_id: String,
    /// First agent.
    pub agent_one_id: String,
    /// Second agent.
    pub agent_two_id: Option<String>,
    /// Package key.
    pub package: String,
    /// Free-form notes.
    pub notes: Option<String>,
    /// The canonical page: `{base_url}/property/<listing_number>`.
    pub canonical_url: String,
    /// True for the sandbox pool.
    pub is_sandbox: bool,
    /// Activated and billed: status changes are allowed.
    pub activated: bool,
    /// When the listing was activated (RFC 3339).
    pub activated_at: Option<String>,
    /// When the listing was created (RFC 3339).
    pub created_at: String,
    /// When the listing last changed (RFC 3339).
    pub updated_at: String,
}

impl ListingOut {
    /// The wire form of `listing`.
    pub fn new(listing: &Listing, urls: &PublicUrls) -> Self {
        Self {
            id: listing.id.to_string(),
            listing_number: listing.listing_number.clone(),
            status: listing.status.display().to_owned(),
            address: listing.address.clone(),
            owner_user_id: listing.owner_user_id.to_string(),
            agent_one_id: listing.agent_one_id.to_string(),
            agent_two_id: listing.agent_two_id.as_ref().map(ToString::to_string),
            package: listing.package.clone(),
            notes: listing.notes.clone(),
            canonical_url: canonical_url(urls, &listing.listing_number),
            is_sandbox: listing.environment.is_sandbox(),
            activated: listing.is_activated(),
            activated_at: listing.activated_at.map(Timestamp::to_rfc3339),
            created_at: listing.created_at.to_rfc3339(),
            updated_at: listing.updated_at.to_rfc3339(),
        }
    }
}

/// `{base_url}/property/<listing_number>`.
pub fn canonical_url(urls: &PublicUrls, listing_number: &str) -> String {
    format!("{}/property/{listing_number}", urls.base_url)
}

/// An amount of money in minor units.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MoneyOut {
    /// Minor units (cents).
    pub amount: i64,
    /// ISO 4217 currency.
    pub currency: String,
}

/// An order and its invoice.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OrderOut {
    /// The order's id.
    pub order_id: String,
    /// The listing's number.
    pub listing_number: String,
    /// Package key.
    pub package: String,
    /// Amount in minor units.
    pub amount: i64,
    /// ISO 4217 currency.
    pub currency: String,
    /// Invoice number.
    pub invoice_number: String,
    /// draft, open, paid or void.
    pub invoice_state: String,
    /// The payment provider's reference, once paid.
    pub payment_reference: Option<String>,
    /// When paid (RFC 3339).
    pub paid_at: Option<String>,
    /// When voided (RFC 3339).
    pub voided_at: Option<String>,
    /// When raised (RFC 3339).
    pub created_at: String,
}

impl From<Order> for OrderOut {
    fn from(order: Order) -> Self {
        Self {
            order_id: order.id.to_string(),
            listing_number: order.listing_number,
            package: order.package,
            amount: order.amount,
            currency: order.currency,
            invoice_number: order.invoice_number,
            invoice_state: order.invoice_state.as_str().to_owned(),
            payment_reference: order.payment_reference,
            paid_at: order.paid_at.map(Timestamp::to_rfc3339),
            voided_at: order.voided_at.map(Timestamp::to_rfc3339),
            created_at: order.created_at.to_rfc3339(),
        }
    }
}

/// A listing's shoot.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AppointmentOut {
    /// The appointment's id.
    pub appointment_id: String,
    /// When the shoot starts (RFC 3339).
    pub scheduled_at: String,
    /// scheduled, cancelled or completed.
    pub status: String,
    /// Who shoots, once assigned.
    pub photographer_id: Option<String>,
}

impl From<Appointment> for AppointmentOut {
    fn from(appointment: Appointment) -> Self {
        Self {
            appointment_id: appointment.id.to_string(),
            scheduled_at: appointment.scheduled_at.to_rfc3339(),
            status: appointment.status,
            photographer_id: appointment.photographer_id.map(|id| id.to_string()),
        }
    }
}
