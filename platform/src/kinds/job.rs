//! What every job kind declares: its stable name, attempts, concurrency and
//! the keys that make two pushes one job or share a queue fairly.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A kind of job.
pub trait Job: Serialize + DeserializeOwned + Send + Sync + Unpin + 'static {
    /// The stable name of the kind and of its queue.
    const KIND: &'static str;
    /// How many times a job of this kind runs before it is dead.
    const MAX_ATTEMPTS: usize;
    /// Jobs of this kind one worker process runs at once unless configured.
    const DEFAULT_CONCURRENCY: usize = 4;

    /// What makes two pushes the same work: a second push under the key of
    /// a job the queue still holds (waiting, running, or kept after it ran)
    /// is dropped. `None`: every push is a job of its own.
    fn dedupe_key(&self) -> Option<String>;

    /// Whose share of the queue this job is, when the queue is shared fairly
    /// (`crate::queue` tags it so that keys take turns): the agency for media
    /// and archives. `None`: first in, first out.
    fn fairness_key(&self) -> Option<String> {
        None
    }

    /// The agency the job works for, when it names one (the ops console's
    /// history is broken down by it).
    fn agency(&self) -> Option<String> {
        None
    }

    /// The webhook endpoint the job delivers to, when it is a delivery.
    fn endpoint(&self) -> Option<String> {
        None
    }
}
