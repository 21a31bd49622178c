//! The job kinds: one payload type per kind, each with a stable `KIND` that
//! names its queue. Renaming a Rust type never orphans queued jobs because the
//! queue is named by `KIND`, not by the type.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A kind of job.
pub trait Job: Serialize + DeserializeOwned + Send + Sync + Unpin + 'static {
    /// The stable name of the kind and of its queue.
    const KIND: &'static str;
    /// How many times a job of this kind runs before it is dead.
    const MAX_ATTEMPTS: usize;
}

/// Fan one outbox event out to its subscribers and mark it dispatched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchEvent {
    /// The event's id (`event_id` of the envelope).
    pub event_id: String,
}

impl Job for DispatchEvent {
    const KIND: &'static str = "outbox_dispatch";
    const MAX_ATTEMPTS: usize = 10;
}

/// A canary operators push to check the worker fleet end to end: it runs
/// `steps` steps of `step_ms` each and publishes its progress, so it exercises
/// the queue, a worker and progress fan-out together.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// The operation whose progress it publishes.
    pub operation_id: String,
    /// The agency it reports to.
    pub agency_id: String,
    /// Whether it belongs to the agency's sandbox.
    pub is_sandbox: bool,
    /// Steps to run.
    pub steps: u32,
    /// Milliseconds per step.
    pub step_ms: u64,
}

impl Job for Probe {
    const KIND: &'static str = "probe";
    const MAX_ATTEMPTS: usize = 3;
}

/// The names of every queue, in the order operators see them.
pub const QUEUES: [&str; 2] = [DispatchEvent::KIND, Probe::KIND];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_stable_and_distinct() {
        assert_eq!(DispatchEvent::KIND, "outbox_dispatch");
        assert_eq!(Probe::KIND, "probe");
        let mut names = QUEUES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), QUEUES.len());
    }
}
