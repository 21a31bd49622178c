//! Listings, one file per aggregate action: creation together with its
//! order (`create`), reads (`read`, `detail`), the status lifecycle
//! (`status`), cancellation inside the no-fee window (`cancel`), and the
//! tour3d and floorplan sections (`section_updates`). Every change writes its
//! events to the outbox in the same transaction, and every guarded change
//! repeats its precondition in the `UPDATE … WHERE`, so two racing writers
//! cannot both win.

mod cancel;
mod create;
pub mod detail;
mod read;
mod section_updates;
mod status;

pub use crate::records::listing::{Listing, listing_event_data};
pub use crate::records::listing_detail::{ListingDetail, Person};
pub use crate::records::numbers::{
    SANDBOX_PREFIX, generate_listing_number, normalise_listing_number,
};
pub use create::{MAX_ADDRESS_CHARS, MAX_NOTES_CHARS};

use crate::Store;
use crate::ids::UserId;
use crate::listing_status::ListingStatus;
use crate::records::order::Order;

/// How often a guarded change is retried after losing a race.
const RACE_RETRIES: usize = 5;

/// What a client asks to create. User ids arrive unparsed so every problem
/// can be reported per field.
#[derive(Clone, Debug, Default)]
pub struct NewListing {
    /// Street address (required).
    pub address: String,
    /// Owner (required).
    pub owner_user_id: String,
    /// First agent (required).
    pub agent_one_id: String,
    /// Second agent.
    pub agent_two_id: Option<String>,
    /// Package key; the default package when absent.
    pub package: Option<String>,
    /// Notes.
    pub notes: Option<String>,
    /// The request's idempotency key: a creation under a key that already made
    /// a listing within the idempotency window returns that listing instead.
    pub idempotency_key: Option<String>,
}

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
