//! `ApiKeys`: the repository of API keys; see [`Store::api_keys`].

use crate::Store;

/// API key repository; see [`Store::api_keys`].
pub struct ApiKeys<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// API keys: issuing and authenticating.
    pub fn api_keys(&self) -> ApiKeys<'_> {
        ApiKeys { store: self }
    }
}
