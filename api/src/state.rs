//! `AppState`: what every handler can reach. Cheap to clone.

use std::sync::Arc;

use storage::Store;

use crate::pagination::CursorCodec;

/// The public addresses the API is served under.
#[derive(Clone, Debug)]
pub struct PublicUrls {
    /// `{base_url}`, without a trailing slash; canonical links use it.
    pub base_url: String,
    /// `{legacy_base_url}`, the alias host serving the same API until it retires.
    pub legacy_base_url: Option<String>,
}

/// Shared state of the HTTP application.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    cursors: CursorCodec,
    urls: PublicUrls,
}

impl AppState {
    /// State over an opened store.
    pub fn new(store: Store, urls: PublicUrls) -> Self {
        let cursors = CursorCodec::new(store.derived_keys().cursor_signing_key());
        Self {
            inner: Arc::new(Inner {
                store,
                cursors,
                urls,
            }),
        }
    }

    /// The repositories.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Seals and opens pagination cursors.
    pub fn cursors(&self) -> &CursorCodec {
        &self.inner.cursors
    }

    /// The public base URLs.
    pub fn urls(&self) -> &PublicUrls {
        &self.inner.urls
    }
}
