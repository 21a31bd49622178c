//! `AppState`: what every handler can reach. Cheap to clone.

use std::sync::{Arc, OnceLock};

use platform::Platform;
use storage::Store;

use crate::config::UploadLimits;
use crate::middleware::deadline::RequestDeadlines;
use crate::middleware::documented_queries::DocumentedQueries;
use crate::middleware::key_cache::KeyCache;
use crate::pacing::{PacingSettings, WritePacing};
use crate::pagination::CursorCodec;
use crate::rate_limit::RateLimiter;

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
    platform: Platform,
    cursors: CursorCodec,
    urls: PublicUrls,
    rate_limiter: RateLimiter,
    key_cache: KeyCache,
    revocation_redis_url: Option<String>,
    upload_limits: UploadLimits,
    request_deadlines: RequestDeadlines,
    documented_queries: OnceLock<DocumentedQueries>,
    usage: Arc<crate::usage::UsageRecorder>,
    pacing: WritePacing,
}

impl AppState {
    /// State over the platform (store, queue, progress) with a rate limiter
    /// (in process, or Redis in the distributed profile).
    pub fn new(platform: Platform, urls: PublicUrls, rate_limiter: RateLimiter) -> Self {
        let cursors = CursorCodec::new(platform.store.derived_keys().cursor_signing_key());
        let pacing = WritePacing::new(
            platform.store.clone(),
            PacingSettings::default(),
            platform.delivery_batches.attempts_recorded(),
        );
        Self {
            inner: Arc::new(Inner {
                platform,
                cursors,
                urls,
                rate_limiter,
                key_cache: KeyCache::default(),
                revocation_redis_url: None,
                upload_limits: Default::default(),
                request_deadlines: Default::default(),
                documented_queries: OnceLock::new(),
                usage: Arc::default(),
                pacing,
            }),
        }
    }

    /// Announces revocations on the Redis at `url` (the distributed profile).
    /// Call it before the state is shared; a shared state is left unchanged.
    pub fn with_revocation_channel(mut self, url: String) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.revocation_redis_url = Some(url);
        }
        self
    }

    /// Uploads under `limits` instead of the specification's (tests).
    /// Call it before the state is shared; a shared state is left unchanged.
    pub fn with_upload_limits(mut self, limits: UploadLimits) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.upload_limits = limits;
        }
        self
    }

    /// The upload limits.
    pub fn upload_limits(&self) -> UploadLimits {
        self.inner.upload_limits
    }

    /// Requests under `deadlines` instead of the specification's (tests).
    /// Call it before the state is shared; a shared state is left unchanged.
    pub fn with_request_deadlines(mut self, deadlines: RequestDeadlines) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.request_deadlines = deadlines;
        }
        self
    }

    /// Writes paced by `settings` instead of the defaults.
    /// Call it before the state is shared; a shared state is left unchanged.
    pub fn with_write_pacing(mut self, settings: PacingSettings) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.pacing = WritePacing::new(
                inner.platform.store.clone(),
                settings,
                inner.platform.delivery_batches.attempts_recorded(),
            );
        }
        self
    }

    /// How writes are paced by their agency's webhook backlog.
    pub fn write_pacing(&self) -> &WritePacing {
        &self.inner.pacing
    }

    /// Records the query parameters the OpenAPI document declares (once,
    /// when the routes are built).
    pub fn set_documented_queries(&self, queries: DocumentedQueries) {
        let _ = self.inner.documented_queries.set(queries);
    }

    /// The query parameters each documented operation declares.
    pub fn documented_queries(&self) -> DocumentedQueries {
        self.inner
            .documented_queries
            .get()
            .cloned()
            .unwrap_or_default()
    }

    /// The routes' deadlines.
    pub fn request_deadlines(&self) -> RequestDeadlines {
        self.inner.request_deadlines
    }

    /// The Redis revocations are announced on, if any.
    pub fn revocation_redis_url(&self) -> Option<&str> {
        self.inner.revocation_redis_url.as_deref()
    }

    /// Recently authenticated keys.
    pub fn key_cache(&self) -> &KeyCache {
        &self.inner.key_cache
    }

    /// This process's key uses and request counts not yet stored.
    pub fn usage(&self) -> &Arc<crate::usage::UsageRecorder> {
        &self.inner.usage
    }

    /// The rate limiter.
    pub fn rate_limiter(&self) -> &RateLimiter {
        &self.inner.rate_limiter
    }

    /// The repositories.
    pub fn store(&self) -> &Store {
        &self.inner.platform.store
    }

    /// The queue, progress fan-out and dispatch, shared with in-process workers.
    pub fn platform(&self) -> &Platform {
        &self.inner.platform
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
