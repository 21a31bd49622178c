//! Authenticated keys, remembered for a short while so the hot path does not
//! query the database on every request. Bounded (`CAPACITY` keys) with
//! per-entry eviction (moka's TinyLFU), so a working set larger than the
//! cache evicts its least useful keys rather than emptying the cache. An
//! entry lives `TTL_SECONDS` on the store's clock; a revocation forgets it at
//! once (`forget`: in this process, or heard from the database or Redis), and
//! a change nobody announces (an operator's SQL) is seen within the TTL,
//! inside the specification's "about 60 seconds".

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moka::sync::Cache;
use storage::Timestamp;
use storage::api_keys::Credential;
use storage::ids::ApiKeyId;

use crate::principal::Principal;

/// How long a looked-up key is trusted without asking the database again.
pub const TTL_SECONDS: i64 = 30;
/// Keys kept at most.
pub const CAPACITY: u64 = 50_000;

/// The cache, keyed by the key's keyed hash (never its plaintext).
#[derive(Debug)]
pub struct KeyCache {
    by_hash: Cache<String, CachedKey>,
    /// Bumped by every `forget` and `clear`: a lookup that began before one
    /// may have read a key that has ended since, and must not cache it.
    generation: AtomicU64,
}

impl Default for KeyCache {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

/// One key as the cache holds it: the stored credential and the principal
/// its requests carry, both shared (a hit copies two pointers).
#[derive(Clone, Debug)]
pub struct CachedKey {
    /// The key as stored, for the checks made on every request (usable
    /// now, holding the route's scope).
    pub credential: Arc<Credential>,
    /// The principal of the key's requests.
    pub principal: Principal,
    fetched_at: Timestamp,
}

impl CachedKey {
    /// `credential` as fetched at `now`.
    pub fn new(credential: Credential, now: Timestamp) -> Self {
        Self {
            principal: Principal::of(&credential),
            credential: Arc::new(credential),
            fetched_at: now,
        }
    }
}

/// What a miss hands the caller: the cache's generation when the lookup
/// began, so what the caller read may be put back only if no key was
/// forgotten in between.
#[derive(Clone, Copy, Debug)]
#[must_use]
pub struct Ticket(u64);

/// The answer of [`KeyCache::get`].
#[derive(Debug)]
pub enum Cached {
    /// A credential younger than the TTL.
    Hit(CachedKey),
    /// Look it up; then `put` it with this ticket.
    Miss(Ticket),
}

impl KeyCache {
    /// A cache of at most `capacity` keys.
    pub fn with_capacity(capacity: u64) -> Self {
        Self {
            by_hash: Cache::builder()
                .max_capacity(capacity)
                // Memory is given back soon after the store's clock would
                // call an entry stale (tests move that clock by hand).
                .time_to_live(Duration::from_secs(TTL_SECONDS.unsigned_abs() * 2))
                .support_invalidation_closures()
                .build(),
            generation: AtomicU64::new(0),
        }
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The credential cached for `hash`, if it is younger than the TTL at `now`.
    pub fn get(&self, hash: &str, now: Timestamp) -> Cached {
        // Read before the entry: a forget between the two makes the ticket old.
        let ticket = Ticket(self.generation());
        let fresh = self.by_hash.get(hash).filter(|cached| {
            now < cached.fetched_at.plus_seconds(TTL_SECONDS) && cached.fetched_at <= now
        });
        match fresh {
            Some(cached) => Cached::Hit(cached),
            None => Cached::Miss(ticket),
        }
    }

    /// Remembers `key`, unless a key was forgotten since `ticket`'s lookup
    /// began (it may have been this one: revoked after the database
    /// answered, before this put).
    pub fn put(&self, hash: String, key: CachedKey, ticket: Ticket) {
        if self.generation() != ticket.0 {
            return;
        }
        self.by_hash.insert(hash.clone(), key);
        // A forget while this was being inserted may have run before the
        // entry was there to forget.
        if self.generation() != ticket.0 {
            self.by_hash.invalidate(&hash);
        }
    }

    /// Forgets the key `id` (revoked or rotated in this process).
    pub fn forget(&self, id: &ApiKeyId) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        let id = id.clone();
        // Only fails when invalidation closures are not enabled; they are.
        let _ = self
            .by_hash
            .invalidate_entries_if(move |_, cached| cached.credential.key.id == id);
    }

    /// Forgets every key (a revocation may have been missed).
    pub fn clear(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.by_hash.invalidate_all();
    }

    /// How many keys are held (maintenance done first).
    pub fn len(&self) -> u64 {
        self.by_hash.run_pending_tasks();
        self.by_hash.entry_count()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use storage::Environment;
    use storage::api_keys::{ApiKey, KeyFormat, KeyStatus};
    use storage::ids::AgencyId;

    use super::*;

    fn credential() -> Credential {
        Credential {
            key: ApiKey {
                id: ApiKeyId::generate(),
                agency_id: AgencyId::generate(),
                name: "k".into(),
                hint: "h".into(),
                format: KeyFormat::Sk,
                scopes: vec![],
                environment: Environment::Live,
                status: KeyStatus::Active,
                created_by: None,
                created_at: Timestamp::from_micros(0),
                rotation_started_at: None,
                expires_at: None,
                revoked_at: None,
                rate_limit_overrides: BTreeMap::new(),
                last_used_at: None,
            },
            agency_rate_limit_overrides: BTreeMap::new(),
            creator_role: None,
        }
    }

    fn hit(cache: &KeyCache, hash: &str, now: Timestamp) -> bool {
        matches!(cache.get(hash, now), Cached::Hit(_))
    }

    fn ticket(cache: &KeyCache, hash: &str, now: Timestamp) -> Ticket {
        match cache.get(hash, now) {
            Cached::Miss(ticket) => ticket,
            Cached::Hit(_) => panic!("{hash} is cached"),
        }
    }

    #[test]
    fn entries_live_for_the_ttl_only() {
        let cache = KeyCache::default();
        let start = Timestamp::from_micros(1_000_000_000);
        let ticket = ticket(&cache, "h", start);
        cache.put("h".into(), CachedKey::new(credential(), start), ticket);
        assert!(hit(&cache, "h", start.plus_seconds(TTL_SECONDS - 1)));
        assert!(!hit(&cache, "h", start.plus_seconds(TTL_SECONDS)));
        assert!(!hit(&cache, "other", start));
    }

    #[test]
    fn forgetting_a_key_drops_its_entries() {
        let cache = KeyCache::default();
        let now = Timestamp::from_micros(0);
        let kept = credential();
        let dropped = credential();
        let first = ticket(&cache, "a", now);
        cache.put("a".into(), CachedKey::new(kept.clone(), now), first);
        let second = ticket(&cache, "b", now);
        cache.put("b".into(), CachedKey::new(dropped.clone(), now), second);
        cache.forget(&dropped.key.id);
        assert!(hit(&cache, "a", now));
        assert!(!hit(&cache, "b", now));
    }

    #[test]
    fn a_working_set_larger_than_the_cache_evicts_entries_not_the_cache() {
        let cache = KeyCache::with_capacity(100);
        let now = Timestamp::from_micros(0);
        let hot = credential();
        let first = ticket(&cache, "hot", now);
        cache.put("hot".into(), CachedKey::new(hot.clone(), now), first);
        for n in 0..1_000 {
            // The hot key is read between the others, as a busy client's is.
            assert!(hit(&cache, "hot", now), "the hot key left at {n}");
            let name = format!("cold-{n}");
            let miss = ticket(&cache, &name, now);
            cache.put(name, CachedKey::new(credential(), now), miss);
        }
        assert!(cache.len() <= 100, "bounded: {}", cache.len());
        assert!(cache.len() >= 50, "never emptied whole: {}", cache.len());
        assert!(hit(&cache, "hot", now));
    }

    #[test]
    fn a_lookup_overtaken_by_a_revocation_is_not_cached() {
        let cache = KeyCache::default();
        let now = Timestamp::from_micros(0);
        let key = credential();
        // The lookup begins; the key is revoked (here or elsewhere) before
        // the database's answer, read earlier, is put back.
        let ticket = ticket(&cache, "h", now);
        cache.forget(&key.key.id);
        cache.put("h".into(), CachedKey::new(key.clone(), now), ticket);
        assert!(!hit(&cache, "h", now), "the stale answer was dropped");
        let after_clear = super::Ticket(0);
        cache.clear();
        cache.put("h".into(), CachedKey::new(key, now), after_clear);
        assert!(!hit(&cache, "h", now));
    }
}
