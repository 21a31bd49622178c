//! Everything the single-listing read shows: the listing, its orders, shoot,
//! people and no-fee cutoff, and its media. Read by `listings::detail` in one
//! query and kept by the listing cache.

use crate::Timestamp;
use crate::ids::UserId;
use crate::records::appointment::Appointment;
use crate::records::listing::Listing;
use crate::records::order::Order;
use crate::records::user::Role;

/// A person assigned to a listing, as the detail read shows them.
#[derive(Clone, Debug)]
pub struct Person {
    /// The user.
    pub id: UserId,
    /// Their role in the agency.
    pub role: Role,
    /// Display name.
    pub name: Option<String>,
}

/// Everything the single-listing read shows.
#[derive(Clone, Debug)]
pub struct ListingDetail {
    /// The listing.
    pub listing: Listing,
    /// Its orders, oldest first.
    pub orders: Vec<Order>,
    /// Its shoot, if one was ever scheduled.
    pub appointment: Option<Appointment>,
    /// The owner, agents and photographer.
    pub people: Vec<Person>,
    /// The last instant to cancel without a fee (none without a scheduled shoot).
    pub no_fee_cutoff: Option<Timestamp>,
    /// Its uploaded media with their variants, oldest first.
    pub media: Vec<crate::media::MediaItem>,
}
