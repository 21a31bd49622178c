//! The domain's rules, which hold no SQL: the listing lifecycle
//! (`listing_status`), the section rules (`sections`), the packages and
//! their shoot lengths (`packages`), the no-fee cancellation window
//! (`cancellation`), the API changelog (`changelog`), the event types and
//! their payloads (`events`, `event_catalog`), the roles (`roles`), a
//! login email's shape and a name's length (`emails`), a new password
//! (`passwords`), and what the fields of a new listing and a new account
//! must be (`new_listing`, `new_account`), and what a delivery profile may
//! ask for (`delivery_profiles`). The repositories apply them; the API's
//! wire types name their limits.

pub mod cancellation;
pub mod changelog;
pub mod delivery_profiles;
pub mod emails;
pub mod event_catalog;
pub mod events;
pub mod listing_status;
pub mod new_account;
pub mod new_listing;
pub mod packages;
pub mod passwords;
pub mod roles;
pub mod sections;
