//! `QueueAdmin`: operator actions on the queues, over the push side's
//! connection.

use crate::queue::JobQueue;

pub(super) use crate::queue::DEAD;

/// Operator actions on the queues.
#[derive(Clone, Debug)]
pub struct QueueAdmin {
    pub(super) queue: JobQueue,
    /// Most done jobs a page of a free-text search reads on Redis.
    pub(super) search_budget: u64,
}

impl QueueAdmin {
    /// Administers `queue`.
    pub fn new(queue: JobQueue) -> Self {
        Self {
            queue,
            search_budget: super::found::SEARCH_BUDGET,
        }
    }

    /// The same, with a page of a free-text search of the Redis queue's done
    /// jobs (which have no text index) reading at most `jobs` of them,
    /// newest first, instead of [`super::found::SEARCH_BUDGET`].
    #[must_use]
    pub fn with_search_budget(mut self, jobs: u64) -> Self {
        self.search_budget = jobs.max(1);
        self
    }
}
