//! `outbox_dispatch`: fanning committed outbox events out to their subscribers.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use storage::ids::EventId;

use super::job::Job;

/// Fan committed outbox events out to their subscribers and mark them
/// dispatched, in order. One job carries the events of a batch of commits, so
/// queue traffic does not grow with the events a write emits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchEvents {
    /// The events' ids (`event_id` of the envelope), in commit order.
    pub event_ids: Vec<EventId>,
}

impl DispatchEvents {
    /// Most events one job carries.
    pub const MAX_EVENTS: usize = 100;

    /// Jobs for `event_ids`, at most [`Self::MAX_EVENTS`] each.
    pub fn chunked(event_ids: Vec<EventId>) -> Vec<Self> {
        event_ids
            .chunks(Self::MAX_EVENTS)
            .map(|chunk| Self {
                event_ids: chunk.to_vec(),
            })
            .collect()
    }
}

impl Job for DispatchEvents {
    const KIND: &'static str = "outbox_dispatch";
    const MAX_ATTEMPTS: usize = 10;

    /// A digest of its events, so the same set pushed twice (a sweep
    /// repeating itself while an earlier job waits dead, say) is dropped,
    /// while any other set is a new job.
    fn dedupe_key(&self) -> Option<String> {
        let mut digest = Sha256::new();
        for id in &self.event_ids {
            digest.update(id.as_str().as_bytes());
            digest.update(b"\n");
        }
        let digest = digest.finalize();
        Some(format!("events:{}", hex::encode(&digest[..16])))
    }
}
