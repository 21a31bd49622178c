//! The domain's rules, which hold no SQL: the listing lifecycle
//! (`listing_status`), the section rules (`sections`), the packages and
//! their shoot lengths (`packages`), the no-fee cancellation window
//! (`cancellation`), the API changelog (`changelog`), the event types and
//! their payloads (`events`, `event_catalog`), and what a new listing's
//! fields must be (`new_listing`). The repositories apply them; the API's
//! wire types name their limits.

pub mod cancellation;
pub mod changelog;
pub mod event_catalog;
pub mod events;
pub mod listing_status;
pub mod new_listing;
pub mod packages;
pub mod sections;
