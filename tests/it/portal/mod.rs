//! The developer portal and the public pages: driven in headless Chromium
//! (`browser`, `uploads`, `delivery_profiles`), and their JSON routes and
//! refusals over HTTP (`console`, `session_webhooks`, `delivery_profiles`;
//! the property page's tests are with the media tests).

mod browser;
mod console;
mod delivery_profiles;
mod session_webhooks;
mod sign_in_page;
mod uploads;

use std::time::Duration;

/// How long a page may take to show what a test waits for.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);
