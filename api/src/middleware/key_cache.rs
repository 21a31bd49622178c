//! Authenticated keys, remembered for a short while so the hot path does not
//! query the database on every request. An entry lives `TTL` on the store's
//! clock; in-process revocation forgets it at once (`forget`), and a change
//! made elsewhere (another process, an operator's SQL) is seen within the TTL,
//! inside the specification's "about 60 seconds".

use std::collections::HashMap;
use std::sync::Mutex;

use storage::Timestamp;
use storage::api_keys::Credential;
use storage::ids::ApiKeyId;

/// How long a looked-up key is trusted without asking the database again.
pub const TTL_SECONDS: i64 = 30;
/// Entries kept before expired ones are swept.
const SWEEP_AT: usize = 50_000;

/// The cache, keyed by the key's keyed hash (never its plaintext).
#[derive(Debug, Default)]
pub struct KeyCache {
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_hash: HashMap<String, (Credential, Timestamp)>,
    /// Bumped by every `forget` and `clear`: a lookup that began before one
    /// may have read a key that has ended since, and must not cache it.
    generation: u64,
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
    Hit(Box<Credential>),
    /// Look it up; then `put` it with this ticket.
    Miss(Ticket),
}

impl KeyCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The credential cached for `hash`, if it is younger than the TTL at `now`.
    pub fn get(&self, hash: &str, now: Timestamp) -> Cached {
        let entries = self.lock();
        let fresh = entries
            .by_hash
            .get(hash)
            .filter(|(_, fetched_at)| {
                now < fetched_at.plus_seconds(TTL_SECONDS) && *fetched_at <= now
            })
            .map(|(credential, _)| credential.clone());
        match fresh {
            Some(credential) => Cached::Hit(Box::new(credential)),
            None => Cached::Miss(Ticket(entries.generation)),
        }
    }

    /// Remembers `credential` as fetched at `now`, unless a key was forgotten
    /// since `ticket`'s lookup began (it may have been this one: revoked
    /// after the database answered, before this put).
    pub fn put(&self, hash: String, credential: Credential, now: Timestamp, ticket: Ticket) {
        let mut entries = self.lock();
        if entries.generation != ticket.0 {
            return;
        }
        if entries.by_hash.len() >= SWEEP_AT {
            entries
                .by_hash
                .retain(|_, (_, fetched_at)| now < fetched_at.plus_seconds(TTL_SECONDS));
            if entries.by_hash.len() >= SWEEP_AT {
                entries.by_hash.clear();
            }
        }
        entries.by_hash.insert(hash, (credential, now));
    }

    /// Forgets the key `id` (revoked or rotated in this process).
    pub fn forget(&self, id: &ApiKeyId) {
        let mut entries = self.lock();
        entries.generation += 1;
        entries
            .by_hash
            .retain(|_, (credential, _)| &credential.key.id != id);
    }

    /// Forgets every key (a revocation may have been missed).
    pub fn clear(&self) {
        let mut entries = self.lock();
        entries.generation += 1;
        entries.by_hash.clear();
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
        cache.put("h".into(), credential(), start, ticket);
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
        cache.put("a".into(), kept.clone(), now, first);
        let second = ticket(&cache, "b", now);
        cache.put("b".into(), dropped.clone(), now, second);
        cache.forget(&dropped.key.id);
        assert!(hit(&cache, "a", now));
        assert!(!hit(&cache, "b", now));
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
        cache.put("h".into(), key.clone(), now, ticket);
        assert!(!hit(&cache, "h", now), "the stale answer was dropped");
        let after_clear = super::Ticket(0);
        cache.clear();
        cache.put("h".into(), key, now, after_clear);
        assert!(!hit(&cache, "h", now));
    }
}
