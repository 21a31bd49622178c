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
    entries: Mutex<HashMap<String, (Credential, Timestamp)>>,
}

impl KeyCache {
    /// The credential cached for `hash`, if it is younger than the TTL at `now`.
    pub fn get(&self, hash: &str, now: Timestamp) -> Option<Credential> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        entries
            .get(hash)
            .filter(|(_, fetched_at)| {
                now < fetched_at.plus_seconds(TTL_SECONDS) && *fetched_at <= now
            })
            .map(|(credential, _)| credential.clone())
    }

    /// Remembers `credential` as fetched at `now`.
    pub fn put(&self, hash: String, credential: Credential, now: Timestamp) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if entries.len() >= SWEEP_AT {
            entries.retain(|_, (_, fetched_at)| now < fetched_at.plus_seconds(TTL_SECONDS));
            if entries.len() >= SWEEP_AT {
                entries.clear();
            }
        }
        entries.insert(hash, (credential, now));
    }

    /// Forgets the key `id` (revoked or rotated in this process).
    pub fn forget(&self, id: &ApiKeyId) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.retain(|_, (credential, _)| &credential.key.id != id);
    }

    /// Forgets every key (a revocation may have been missed).
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
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

    #[test]
    fn entries_live_for_the_ttl_only() {
        let cache = KeyCache::default();
        let start = Timestamp::from_micros(1_000_000_000);
        cache.put("h".into(), credential(), start);
        assert!(
            cache
                .get("h", start.plus_seconds(TTL_SECONDS - 1))
                .is_some()
        );
        assert!(cache.get("h", start.plus_seconds(TTL_SECONDS)).is_none());
        assert!(cache.get("other", start).is_none());
    }

    #[test]
    fn forgetting_a_key_drops_its_entries() {
        let cache = KeyCache::default();
        let now = Timestamp::from_micros(0);
        let kept = credential();
        let dropped = credential();
        cache.put("a".into(), kept.clone(), now);
        cache.put("b".into(), dropped.clone(), now);
        cache.forget(&dropped.key.id);
        assert!(cache.get("a", now).is_some());
        assert!(cache.get("b", now).is_none());
    }
}
