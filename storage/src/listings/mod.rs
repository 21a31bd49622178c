//! The listing aggregate. Listings, one file per action: creation together
//! with its order (`create`), reads (`read`, `detail`, and the short-lived
//! read cache `cache`), the status lifecycle (`status`), cancellation inside
//! the no-fee window (`cancel`), and the tour3d and floorplan sections
//! (`section_updates`); and what belongs to a listing: its orders and
//! invoices (`orders`), its shoot appointment (`appointments`), the shoot
//! availability of the agency's photographers (`availability`) and the
//! owner's cancellation fees (`cancellation_fees`). Every change writes its
//! events to the outbox in the same transaction, and every guarded change
//! repeats its precondition in the `UPDATE … WHERE`, so two racing writers
//! cannot both win. The rules these apply are `crate::rules`.

pub mod appointments;
pub mod availability;
pub mod cache;
mod cancel;
pub mod cancellation_fees;
pub(crate) mod counts;
mod create;
pub mod detail;
pub mod orders;
pub(crate) mod read;
mod section_updates;
mod status;

pub use crate::records::listing::{Listing, listing_event_data};
pub use crate::records::listing_detail::{ListingDetail, Person};
pub use crate::records::numbers::{
    SANDBOX_PREFIX, generate_listing_number, normalise_listing_number,
};
pub use crate::rules::new_listing::{MAX_ADDRESS_CHARS, MAX_NOTES_CHARS, NewListing};

use crate::Store;
use crate::ids::UserId;
use crate::records::order::Order;
use crate::rules::listing_status::ListingStatus;

/// How often a guarded change is retried after losing a race.
const RACE_RETRIES: usize = 5;

/// Filters of the listings listing.
#[derive(Clone, Debug, Default)]
pub struct ListingFilter {
    /// Only this status.
    pub status: Option<ListingStatus>,
    /// Only listings where this user is agent one or agent two.
    pub agent_id: Option<UserId>,
}

/// A created listing and the order raised for it.
#[derive(Clone, Debug)]
pub struct CreatedListing {
    /// The listing.
    pub listing: Listing,
    /// Its order (invoice open).
    pub order: Order,
}

/// The outcome of a status change or a cancellation.
#[derive(Clone, Debug)]
pub struct Transition {
    /// The listing after the change.
    pub listing: Listing,
    /// The status it had before.
    pub previous: ListingStatus,
}

/// What a status change came to when no rule refused it.
#[derive(Clone, Debug)]
pub enum StatusChange {
    /// The listing moved and `listing.status_changed` was written (boxed: a
    /// listing is large beside the other variant).
    Changed(Box<Transition>),
    /// Another writer changed the status between this request's read and its
    /// write, to something other than the requested status; nothing was written.
    Overtaken {
        /// The status the request was judged against.
        expected: ListingStatus,
        /// The status the other writer left.
        current: ListingStatus,
    },
}

/// The outcome of a tour3d patch.
#[derive(Clone, Debug)]
pub struct Tour3dChange {
    /// The listing after the change.
    pub listing: Listing,
    /// The URL before.
    pub previous_url: Option<String>,
}

/// Listing repository; see [`Store::listings`].
pub struct Listings<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Listings, their status lifecycle and sections.
    pub fn listings(&self) -> Listings<'_> {
        Listings { store: self }
    }
}
