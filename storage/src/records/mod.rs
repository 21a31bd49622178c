//! The records several repositories share, at the bottom of the crate: a
//! listing and its orders as stored, their columns, the tenant-scoped lookup
//! of a listing by number, a shoot appointment, a person of an agency, and
//! the unambiguous numbers people read aloud (listing and invoice numbers).
//! Listings, orders, appointments, users, sessions, the sandbox and the
//! detail read all build on these and on nothing of each other.

pub mod appointment;
pub mod listing;
pub mod listing_detail;
pub mod numbers;
pub mod order;
pub mod user;

pub(crate) use listing::fetch_listing;
