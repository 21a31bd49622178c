//! Memory of recent nonces and accepted event ids, behind a trait so receivers can share it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::error::StoreError;
use crate::rules::NONCE_WINDOW_SECS;

/// Entries each memory of [`MemoryReplayStore::new`] holds before evicting the oldest.
pub const DEFAULT_STORE_CAPACITY: usize = 100_000;
/// How long [`MemoryReplayStore::new`] remembers an accepted event id: one day, well past
/// the last retry (about 2 h 35 min after the first attempt).
pub const DEFAULT_EVENT_RETENTION_SECS: i64 = 86_400;

/// What a store knew about a delivery's nonce and event id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Neither was known; both are now recorded.
    New,
    /// The nonce is new (and now recorded) but the event id was accepted before.
    DuplicateEvent,
    /// The nonce was seen within [`NONCE_WINDOW_SECS`]; nothing was recorded.
    ReplayedNonce,
}

/// Where nonces and accepted event ids are remembered.
///
/// [`MemoryReplayStore`] serves one process. Receivers running several instances
/// implement this over shared storage (for example Redis `SET NX EX` for the nonce, then
/// for the event id), keeping the check and the record atomic per key.
pub trait ReplayStore {
    /// Checks the nonce, then the event id, recording each that is new, as one step.
    ///
    /// Called only for authentic, timely deliveries. A replayed nonce records nothing.
    fn check_and_record(
        &self,
        nonce: &str,
        event_id: &str,
        now_unix: i64,
    ) -> Result<Seen, StoreError>;

    /// Forgets an accepted event id, so that a retry of it is processed again.
    fn forget_event(&self, event_id: &str) -> Result<(), StoreError>;
}

/// Several verifiers (for example one per endpoint secret set) can share one store.
impl<T: ReplayStore + ?Sized> ReplayStore for std::sync::Arc<T> {
    fn check_and_record(
        &self,
        nonce: &str,
        event_id: &str,
        now_unix: i64,
    ) -> Result<Seen, StoreError> {
        (**self).check_and_record(nonce, event_id, now_unix)
    }

    fn forget_event(&self, event_id: &str) -> Result<(), StoreError> {
        (**self).forget_event(event_id)
    }
}

/// In-process [`ReplayStore`]: nonces for [`NONCE_WINDOW_SECS`], event ids for a retention
/// period, each memory bounded in size.
///
/// When a memory is full the oldest entry goes first. Losing an old nonce early is
/// harmless to the event it belonged to: its event id is still remembered, so a replay
/// of it is a duplicate, never processed twice.
#[derive(Debug)]
pub struct MemoryReplayStore {
    inner: Mutex<Memories>,
}

#[derive(Debug)]
struct Memories {
    nonces: Window,
    events: Window,
}

impl MemoryReplayStore {
    /// [`DEFAULT_STORE_CAPACITY`] entries each, event ids kept [`DEFAULT_EVENT_RETENTION_SECS`].
    pub fn new() -> Self {
        Self::with_limits(DEFAULT_STORE_CAPACITY, DEFAULT_EVENT_RETENTION_SECS)
    }

    /// At most `capacity` nonces and `capacity` event ids (at least one each); event ids
    /// are kept `event_retention_secs`. The nonce window is fixed by the specification.
    pub fn with_limits(capacity: usize, event_retention_secs: i64) -> Self {
        let capacity = capacity.max(1);
        Self {
            inner: Mutex::new(Memories {
                nonces: Window::new(NONCE_WINDOW_SECS, capacity),
                events: Window::new(event_retention_secs, capacity),
            }),
        }
    }

    /// Number of nonces and event ids currently remembered (expired ones may linger
    /// until the next call that records).
    pub fn len(&self) -> (usize, usize) {
        let memories = self.lock();
        (memories.nonces.len(), memories.events.len())
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memories> {
        // A panic elsewhere cannot leave the maps half-updated in a way that matters:
        // at worst one entry is missing or lingers, so keep serving.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for MemoryReplayStore {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayStore for MemoryReplayStore {
    fn check_and_record(
        &self,
        nonce: &str,
        event_id: &str,
        now_unix: i64,
    ) -> Result<Seen, StoreError> {
        let mut memories = self.lock();
        memories.nonces.expire(now_unix);
        memories.events.expire(now_unix);
        if memories.nonces.contains(nonce, now_unix) {
            return Ok(Seen::ReplayedNonce);
        }
        memories.nonces.insert(nonce, now_unix);
        if memories.events.contains(event_id, now_unix) {
            return Ok(Seen::DuplicateEvent);
        }
        memories.events.insert(event_id, now_unix);
        Ok(Seen::New)
    }

    fn forget_event(&self, event_id: &str) -> Result<(), StoreError> {
        self.lock().events.seen.remove(event_id);
        Ok(())
    }
}

/// Keys remembered for `ttl` seconds after they were recorded, at most `capacity` of them.
#[derive(Debug)]
struct Window {
    ttl: i64,
    capacity: usize,
    /// Key to the time it was recorded.
    seen: HashMap<String, i64>,
    /// Recording order, for expiry and eviction. May hold stale pairs for keys removed or
    /// re-recorded since; those are skipped when popped.
    order: VecDeque<(i64, String)>,
}

impl Window {
    fn new(ttl: i64, capacity: usize) -> Self {
        Self {
            ttl,
            capacity,
            seen: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn len(&self) -> usize {
        self.seen.len()
    }

    /// Within the window, inclusive. A clock that went backwards still counts as within.
    fn contains(&self, key: &str, now: i64) -> bool {
        self.seen
            .get(key)
            .is_some_and(|&at| now.saturating_sub(at) <= self.ttl)
    }

    fn insert(&mut self, key: &str, now: i64) {
        while self.order.len() >= self.capacity {
            self.pop_oldest();
        }
        self.seen.insert(key.to_owned(), now);
        self.order.push_back((now, key.to_owned()));
    }

    fn expire(&mut self, now: i64) {
        while self
            .order
            .front()
            .is_some_and(|(at, _)| now.saturating_sub(*at) > self.ttl)
        {
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        if let Some((at, key)) = self.order.pop_front()
            && self.seen.get(&key) == Some(&at)
        {
            self.seen.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_a_replay_for_600_seconds_then_forgotten() {
        let store = MemoryReplayStore::new();
        assert_eq!(store.check_and_record("n", "e1", 1000), Ok(Seen::New));
        assert_eq!(
            store.check_and_record("n", "e2", 1600),
            Ok(Seen::ReplayedNonce)
        );
        assert_eq!(store.check_and_record("n", "e2", 1601), Ok(Seen::New));
    }

    #[test]
    fn expired_entries_are_dropped() {
        let store = MemoryReplayStore::with_limits(10, 60);
        for i in 0..5 {
            let key = i.to_string();
            assert_eq!(store.check_and_record(&key, &key, 1000), Ok(Seen::New));
        }
        assert_eq!(store.len(), (5, 5));
        // 61 s later the event ids have expired; 601 s later the nonces too.
        assert_eq!(store.check_and_record("a", "a", 1061), Ok(Seen::New));
        assert_eq!(store.len(), (6, 1));
        assert_eq!(store.check_and_record("b", "b", 1601), Ok(Seen::New));
        assert_eq!(store.len(), (2, 1));
    }

    #[test]
    fn size_is_bounded_and_the_oldest_goes_first() {
        let store = MemoryReplayStore::with_limits(3, 86_400);
        for (i, key) in ["a", "b", "c", "d"].into_iter().enumerate() {
            let now = 1000 + i64::try_from(i).expect("small");
            assert_eq!(store.check_and_record(key, key, now), Ok(Seen::New));
        }
        assert_eq!(store.len(), (3, 3));
        // "a" was evicted from both memories; "b" is still known.
        assert_eq!(store.check_and_record("a", "a", 1010), Ok(Seen::New));
        assert_eq!(
            store.check_and_record("x", "c", 1010),
            Ok(Seen::DuplicateEvent)
        );
    }

    #[test]
    fn a_replayed_nonce_records_nothing() {
        let store = MemoryReplayStore::new();
        assert_eq!(store.check_and_record("n", "e1", 1000), Ok(Seen::New));
        assert_eq!(
            store.check_and_record("n", "e2", 1001),
            Ok(Seen::ReplayedNonce)
        );
        assert_eq!(store.check_and_record("m", "e2", 1002), Ok(Seen::New));
    }

    #[test]
    fn a_forgotten_event_is_new_again() {
        let store = MemoryReplayStore::new();
        assert_eq!(store.check_and_record("n1", "e", 1000), Ok(Seen::New));
        assert_eq!(
            store.check_and_record("n2", "e", 1001),
            Ok(Seen::DuplicateEvent)
        );
        assert_eq!(store.forget_event("e"), Ok(()));
        assert_eq!(store.check_and_record("n3", "e", 1002), Ok(Seen::New));
        // The stale order entry of the forgotten id does not evict the new one early.
        assert_eq!(store.len(), (3, 1));
    }

    #[test]
    fn a_clock_that_steps_back_still_finds_the_nonce() {
        let store = MemoryReplayStore::new();
        assert_eq!(store.check_and_record("n", "e1", 1000), Ok(Seen::New));
        assert_eq!(
            store.check_and_record("n", "e2", 900),
            Ok(Seen::ReplayedNonce)
        );
    }
}
