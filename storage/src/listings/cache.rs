//! A short-lived cache of single-listing reads, the hottest read of the API.
//!
//! Every write to a listing made through this process's store invalidates its
//! entry after the write committed, and a generation counter keeps a reader
//! that fetched before that commit from putting the old state back. Changes
//! made by other processes (an operator command, another replica) are seen
//! within `TTL_SECONDS`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::ids::AgencyId;
use crate::records::listing_detail::ListingDetail;
use crate::{Tenant, Timestamp};

/// How long an entry is trusted without asking the database.
pub const TTL_SECONDS: i64 = 1;
/// Entries kept before stale ones are swept.
const SWEEP_AT: usize = 20_000;

type Key = (AgencyId, bool, String);

/// The cache; one per store, shared by its clones.
#[derive(Debug, Default)]
pub struct ListingCache {
    entries: Mutex<HashMap<Key, (Arc<ListingDetail>, Timestamp)>>,
    generation: AtomicU64,
}

fn key(tenant: &Tenant, listing_number: &str) -> Key {
    (
        tenant.agency_id.clone(),
        tenant.environment.is_sandbox(),
        listing_number.to_owned(),
    )
}

impl ListingCache {
    /// The cached detail, if fresh at `now`.
    pub fn get(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        now: Timestamp,
    ) -> Option<Arc<ListingDetail>> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        entries
            .get(&key(tenant, listing_number))
            .filter(|(_, fetched_at)| {
                *fetched_at <= now && now < fetched_at.plus_seconds(TTL_SECONDS)
            })
            .map(|(detail, _)| detail.clone())
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
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if entries.len() >= SWEEP_AT {
            entries.retain(|_, (_, fetched_at)| now < fetched_at.plus_seconds(TTL_SECONDS));
        }
        entries.insert(key(tenant, listing_number), (detail, now));
    }

    /// Forgets one listing after a write to it.
    pub fn invalidate(&self, tenant: &Tenant, listing_number: &str) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.remove(&key(tenant, listing_number));
    }

    /// Forgets every listing of an agency (a change to its people or fee tiers).
    pub fn invalidate_agency(&self, agency: &AgencyId) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.retain(|(cached_agency, _, _), _| cached_agency != agency);
    }
}
