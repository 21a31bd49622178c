//! A short-lived cache of single-listing reads, the hottest read of the API.
//!
//! Bounded (`CAPACITY` entries) with per-entry eviction (moka's TinyLFU), so
//! a working set larger than the cache evicts its least useful entries
//! rather than emptying the cache. An entry is trusted for `TTL_SECONDS` on
//! the store's clock. Every write to a listing made through this process's
//! store invalidates its entry after the write committed, and a generation
//! counter keeps a reader that fetched before that commit from putting the
//! old state back. Changes made by other processes (an operator command,
//! another replica) are seen within `TTL_SECONDS`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moka::sync::Cache;

use crate::ids::AgencyId;
use crate::records::listing_detail::ListingDetail;
use crate::{Tenant, Timestamp};

/// How long an entry is trusted without asking the database.
pub const TTL_SECONDS: i64 = 1;
/// Entries kept at most.
pub const CAPACITY: u64 = 20_000;

type Key = (AgencyId, bool, String);

/// The cache; one per store, shared by its clones.
#[derive(Debug)]
pub struct ListingCache {
    entries: Cache<Key, (Arc<ListingDetail>, Timestamp)>,
    generation: AtomicU64,
}

impl Default for ListingCache {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

fn key(tenant: &Tenant, listing_number: &str) -> Key {
    (
        tenant.agency_id.clone(),
        tenant.environment.is_sandbox(),
        listing_number.to_owned(),
    )
}

impl ListingCache {
    /// A cache of at most `capacity` listings.
    pub fn with_capacity(capacity: u64) -> Self {
        Self {
            entries: Cache::builder()
                .max_capacity(capacity)
                // Memory is given back soon after the store's clock would
                // call an entry stale (tests move that clock by hand).
                .time_to_live(Duration::from_secs(TTL_SECONDS.unsigned_abs() * 2))
                .support_invalidation_closures()
                .build(),
            generation: AtomicU64::new(0),
        }
    }

    /// The cached detail, if fresh at `now`.
    pub fn get(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        now: Timestamp,
    ) -> Option<Arc<ListingDetail>> {
        self.entries
            .get(&key(tenant, listing_number))
            .filter(|(_, fetched_at)| {
                *fetched_at <= now && now < fetched_at.plus_seconds(TTL_SECONDS)
            })
            .map(|(detail, _)| detail)
    }

    /// The generation to pass to `put` for a fetch starting now.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Remembers a detail fetched since `generation`, unless a write happened since.
    pub fn put(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        detail: Arc<ListingDetail>,
        generation: u64,
        now: Timestamp,
    ) {
        if self.generation() != generation {
            return;
        }
        let key = key(tenant, listing_number);
        self.entries.insert(key.clone(), (detail, now));
        // A write that committed while this was being inserted has moved the
        // generation on and may have removed the key before it was here.
        if self.generation() != generation {
            self.entries.invalidate(&key);
        }
    }

    /// Forgets one listing after a write to it.
    pub fn invalidate(&self, tenant: &Tenant, listing_number: &str) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.entries.invalidate(&key(tenant, listing_number));
    }

    /// Forgets every listing of an agency (a change to its people or fee tiers).
    pub fn invalidate_agency(&self, agency: &AgencyId) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        let agency = agency.clone();
        // Only fails when invalidation closures are not enabled; they are.
        let _ = self
            .entries
            .invalidate_entries_if(move |(cached_agency, _, _), _| *cached_agency == agency);
    }

    /// How many entries are held (maintenance done first).
    pub fn len(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.entry_count()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
